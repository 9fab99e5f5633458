"""The registry of verifier kinds: each name maps to its item model and its scoring function.

The CLI, the service and every adapter build and score items through this module alone.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, Any, get_args

from pydantic import Field, TypeAdapter, ValidationError

from groupscore.schema.item import ItemBase
from groupscore.schema.names import did_you_mean
from groupscore.schema.reward import KIND_NAMES
from groupscore.schema.verdict import Verdict, join_versions
from groupscore.verifiers.code.item import CodeItem
from groupscore.verifiers.format.item import FormatItem
from groupscore.verifiers.json_schema.item import JsonItem
from groupscore.verifiers.length.item import LengthItem
from groupscore.verifiers.math.item import MathItem
from groupscore.verifiers.sql.item import SqlItem

# The version of each kind's verdicts; every verdict carries it as `verifier_version` ("math@2").
#
# THE RULE: bump a kind's version in the same change as anything that changes the reward or the status of any of its
# fixture verdicts (its items under fixtures/, listed in tools/verdict_pins.py). fixtures/verdict_pins.json pins a
# digest of those verdicts to the version; tests/verifiers/test_verdict_pins.py fails when they drift under an unchanged
# version. After a deliberate bump, rewrite the pins with `python tools/verdict_pins.py --write` (it refuses to pin
# changed verdicts to an unchanged version). Trainers refuse to mix versions of a kind within one run, and
# `groupscore score --compare OLD.jsonl` shows which verdicts a new version changes.
#
# History (what each bump changed):
#   math 1  the first pinned verdicts.
#   math 2  issue 11: answers as real models and datasets write them (MATH thousands separators, solution-text
#           references, multi-answer and labelled answers, relations and sets, fallback extraction, options).
#   math 3  issue 23: no reading that gives up order, sign, a side of an equation or a word pays a hedge (labelled
#           references ordered, alternatives never fill an ordered answer, the question-copy guard by meaning, a bare
#           clock time on a 24-hour clock, false equations state nothing, value words, exact scientific notation,
#           hedging sentences without a marker); a decimal comma in plain text, Indian grouping with `\\!`, solution
#           tuples joined by `and`; options clock_12h, scale_words, scientific_tolerance, check_equations; then the
#           review's holes: a decimal within one unit of its last digit, a numeric question wants a written number.
#   math 4  honest one-line endings without a marker are paid (`Therefore, x = 816.`, `Hence $p = 36/95$.`, `So x =
#           816`, `Checking: 2(816) = 1632, so x = 816.`): the fallback reads the last sentence's statement after its
#           lead-in words instead of the whole sentence; hedges in it (`or` beside a value, inside LaTeX too, `maybe`)
#           state nothing; `n = 1,632` is one number; `17 \bmod 5` is 2. No fixture verdict changed.
#   code 1  the first pinned verdicts.
#   code 2  issue 10: reward-integrity fixes found by the adversarial review.
#   format, length, json, sql 1  the first pinned verdicts.
VERSIONS: dict[str, int] = {"math": 4, "code": 2, "format": 1, "length": 1, "json": 1, "sql": 1}


@dataclass(frozen=True)
class VerifierKind:
    name: str
    item_model: type[ItemBase]
    scorer_path: str  # "module:function", imported on first use so the registry stays cheap to import
    summary: str

    @property
    def version(self) -> int:
        return VERSIONS[self.name]

    @property
    def version_tag(self) -> str:
        """What this kind's verdicts carry as `verifier_version`, e.g. "math@2"."""
        return join_versions({self.name: self.version})

    @cached_property
    def scorer(self) -> Callable[[Any], Verdict]:
        module, _, attr = self.scorer_path.partition(":")
        return getattr(importlib.import_module(module), attr)


KINDS: dict[str, VerifierKind] = {
    k.name: k
    for k in (
        VerifierKind(
            "math",
            MathItem,
            "groupscore.verifiers.math.verify:score_math",
            "Boxed/final-answer extraction and string, numeric, symbolic equivalence.",
        ),
        VerifierKind(
            "code",
            CodeItem,
            "groupscore.verifiers.code.verify:score_code",
            "Program from the completion run on public and hidden tests in the sandbox; reward = pass rate "
            "(of the hidden tests alone when there are any).",
        ),
        VerifierKind(
            "format",
            FormatItem,
            "groupscore.verifiers.format.verify:score_format",
            "Required tags in order with non-empty content (e.g. <think>, <answer>), or a linear-time regex.",
        ),
        VerifierKind(
            "length",
            LengthItem,
            "groupscore.verifiers.length.verify:score_length",
            "Length in characters or whitespace tokens inside a target range, with a penalty outside it.",
        ),
        VerifierKind(
            "json",
            JsonItem,
            "groupscore.verifiers.json_schema.verify:score_json",
            "JSON document (optionally in a ```json block) that parses and validates against a JSON schema.",
        ),
        VerifierKind(
            "sql",
            SqlItem,
            "groupscore.verifiers.sql.verify:score_sql",
            "SELECT query run read-only on an SQLite database beside the gold query; result sets compared.",
        ),
    )
}

if tuple(KINDS) != KIND_NAMES or set(VERSIONS) != set(KIND_NAMES):  # the wire's vocabulary and ours must agree
    raise RuntimeError(f"registry kinds {tuple(KINDS)} differ from groupscore.schema.reward.KIND_NAMES {KIND_NAMES}")

# Every kind's item model, in KINDS' order, written out so that type checkers see the union; the check below keeps
# it the same as KINDS.
AnyItem = MathItem | CodeItem | FormatItem | LengthItem | JsonItem | SqlItem
if get_args(AnyItem) != tuple(k.item_model for k in KINDS.values()):
    raise RuntimeError(f"registry: AnyItem {get_args(AnyItem)} differs from the item models of KINDS")
Item = Annotated[AnyItem, Field(discriminator="verifier")]
_item_adapter: TypeAdapter[AnyItem] = TypeAdapter(Item)


def parse_item(raw: Any) -> ItemBase:
    """Validate one raw item (a dict or JSON text); raises pydantic's ValidationError with field paths."""
    if isinstance(raw, (str, bytes)):
        return _item_adapter.validate_json(raw)
    return _item_adapter.validate_python(raw)


def describe_error(exc: ValidationError) -> str:
    """One line per problem, each naming the field path; a field the kind does not have names the closest one."""
    problems = []
    for err in exc.errors(include_url=False):
        loc = err["loc"]
        hint = ""
        if err["type"] == "extra_forbidden" and len(loc) == 2 and loc[0] in KINDS:  # (kind, field) of an item
            hint = did_you_mean(str(loc[1]), KINDS[str(loc[0])].item_model.model_fields)
        problems.append(f"{'.'.join(str(p) for p in loc) or '<item>'}: {err['msg']}{hint}")
    return "; ".join(problems)


def score_item(item: ItemBase) -> Verdict:
    """Score one validated item in this process (each kind enforces its own time bound), stamped with the kind's
    version; an infra_error verdict (nothing was judged) carries none."""
    kind = KINDS[item.verifier]
    verdict = kind.scorer(item)
    if verdict.id != item.id or (verdict.status != "infra_error" and verdict.verifier_version != kind.version_tag):
        # A copy, not an assignment: scorers may hand out cached verdicts. Plain setattr on the copy (no validation
        # to rerun: id and version are plain values) costs a third of model_copy(update=...), per item of a batch.
        verdict = verdict.model_copy()
        verdict.id = item.id
        if verdict.status != "infra_error":
            verdict.verifier_version = kind.version_tag
    return verdict
