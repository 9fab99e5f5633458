"""Fields a verifier kind cannot score without, and the one-line error when a batch lacks one (a dataset column missing
or renamed would otherwise make every reward a silent 0). Used by the TRL and verl adapters and by /get_reward.

The kinds' fields are wire vocabulary, written out here as tables so that a client needs this package alone (the
item models live under `verifiers/`, which the schema may not import); tests/schema/test_schema_columns.py checks
that the tables agree with the registry's item models, so the two cannot drift.
"""

from __future__ import annotations

from typing import Any

from groupscore.schema.item import ItemBase

BASE_FIELDS = frozenset(ItemBase.model_fields)  # id, verifier, completion, metadata: every kind has these

# Each kind's own item fields, in the item model's order: the TRL adapter fills each from the dataset column of the
# same name (unless renamed).
KIND_FIELDS: dict[str, tuple[str, ...]] = {
    "math": (
        "answer",
        "strict",
        "rel_tol",
        "profile",
        "percent",
        "decimal_comma",
        "significant_digits",
        "order",
        "rename_variables",
        "clock_12h",
        "scale_words",
        "scientific_tolerance",
        "check_equations",
        "timeout_s",
        "question",
        "reference",
        "fallback",
    ),
    "code": (
        "language",
        "tests",
        "hidden_tests",
        "block",
        "prompt",
        "time_limit_s",
        "memory_mb",
        "python_env",
        "stop_on_first_failure",
    ),
    "format": ("tags", "regex", "allow_outside_text", "strip", "partial_credit", "max_chars"),
    "length": ("unit", "min", "max", "penalty", "slope", "strip"),
    "json": ("json_schema", "extract", "partial_credit", "timeout_s", "max_chars"),
    "sql": ("gold_sql", "database", "setup_sql", "ordered", "extract", "time_limit_s", "max_rows", "float_digits"),
}

# What each kind cannot score without, as groups of fields any one of which will do: its required fields, one group
# each; code takes either list of tests (an item with neither is an error verdict, which no model field says).
NEEDED_FIELDS: dict[str, tuple[tuple[str, ...], ...]] = {
    "math": (("answer",),),
    "code": (("tests", "hidden_tests"),),
    "format": (),
    "length": (),
    "json": (),
    "sql": (("gold_sql",),),
}

# Columns datasets often use for a field under another name: suggested in the mapping that fixes the error.
_LIKELY_COLUMNS = {
    "answer": ("solution", "ground_truth", "final_answer", "label", "reference", "target", "gold"),
    "tests": ("test_cases", "test", "test_list", "input_output"),
    "gold_sql": ("query", "sql", "gold_query"),
}


class MissingColumn(ValueError):
    """A field the reward needs has no dataset column (or an empty one): every reward would be a silent 0."""


def check_columns(
    adapter: str, items: list[dict[str, Any]], seen: list[str], fix: str, candidates: list[str] | None = None
) -> None:
    """Raise MissingColumn when no item of a kind in this batch got a field that kind needs (a column missing or
    renamed). The message is one line: the field, the columns seen, and the mapping that fixes it, put into `fix`
    where it says {mapping}; the mapping suggests one of `candidates` (default: `seen`) named like the field.
    Items of an unknown kind are left to their own error verdicts."""
    for kind in dict.fromkeys(item.get("verifier") for item in items):
        if not isinstance(kind, str) or kind not in NEEDED_FIELDS:
            continue
        of_kind = [item for item in items if item.get("verifier") == kind]
        for fields in NEEDED_FIELDS[kind]:
            if any(item.get(f) not in (None, "", []) for item in of_kind for f in fields):
                continue
            likely = next(
                (c for c in (seen if candidates is None else candidates) if c in _LIKELY_COLUMNS.get(fields[0], ())),
                "<column holding it>",
            )
            mapping = f"{{{fields[0]!r}: {likely!r}}}"
            raise MissingColumn(
                f"{adapter}: the {kind} reward needs the field {' or '.join(map(repr, fields))} but "
                f"no column of the batch holds it (missing, renamed or empty); columns seen: "
                f"{', '.join(sorted(seen)) or 'none'}; fix: {fix.format(mapping=mapping)}"
            )
