"""Fields a verifier kind cannot score without, and the one-line error when a batch lacks one (a dataset column missing
or renamed would otherwise make every reward a silent 0). Used by the TRL and verl adapters and by /get_reward."""

from __future__ import annotations

from typing import Any

from groupscore.verifiers.registry import KINDS

BASE_FIELDS = frozenset({"id", "completion", "metadata", "verifier"})  # every kind has these: no column needed
# Columns datasets often use for a field under another name: suggested in the mapping that fixes the error.
_LIKELY_COLUMNS = {"answer": ("solution", "ground_truth", "final_answer", "label", "reference", "target", "gold"),
                   "tests": ("test_cases", "test", "test_list", "input_output"),
                   "gold_sql": ("query", "sql", "gold_query")}


class MissingColumn(ValueError):
    """A field the reward needs has no dataset column (or an empty one): every reward would be a silent 0."""


def needed_fields(kind: str) -> list[tuple[str, ...]]:
    """The item fields a kind cannot score without, each as the group of fields any one of which will do."""
    model = KINDS[kind].item_model
    needs = [(name,) for name, info in model.model_fields.items() if info.is_required() and name not in BASE_FIELDS]
    if kind == "code":  # either list of tests will do; an item with neither is an error verdict
        needs.append(("tests", "hidden_tests"))
    return needs


def check_columns(adapter: str, items: list[dict[str, Any]], seen: list[str], fix: str,
                  candidates: list[str] | None = None) -> None:
    """Raise MissingColumn when no item of a kind in this batch got a field that kind needs (a column missing or
    renamed). The message is one line: the field, the columns seen, and the mapping that fixes it, put into `fix`
    where it says {mapping}; the mapping suggests one of `candidates` (default: `seen`) named like the field.
    Items of an unknown kind are left to their own error verdicts."""
    for kind in dict.fromkeys(item.get("verifier") for item in items):
        if kind not in KINDS:
            continue
        of_kind = [item for item in items if item.get("verifier") == kind]
        for fields in needed_fields(kind):
            if any(item.get(f) not in (None, "", []) for item in of_kind for f in fields):
                continue
            likely = next((c for c in (seen if candidates is None else candidates)
                           if c in _LIKELY_COLUMNS.get(fields[0], ())), "<column holding it>")
            mapping = f"{{{fields[0]!r}: {likely!r}}}"
            raise MissingColumn(f"{adapter}: the {kind} reward needs the field {' or '.join(map(repr, fields))} but "
                                f"no column of the batch holds it (missing, renamed or empty); columns seen: "
                                f"{', '.join(sorted(seen)) or 'none'}; fix: {fix.format(mapping=mapping)}")
