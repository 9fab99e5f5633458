"""The registry of verifier kinds: each name maps to its item model and its scoring function.

The CLI, the service and every adapter build and score items through this module alone.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, Any, Callable, Union

from pydantic import Field, TypeAdapter, ValidationError

from groupscore.verifiers.code.item import CodeItem
from groupscore.verifiers.format.item import FormatItem
from groupscore.verifiers.json_schema.item import JsonItem
from groupscore.verifiers.length.item import LengthItem
from groupscore.verifiers.math.item import MathItem
from groupscore.verifiers.sql.item import SqlItem
from groupscore.verifiers.schema import ItemBase, Verdict


@dataclass(frozen=True)
class VerifierKind:
    name: str
    item_model: type[ItemBase]
    scorer_path: str  # "module:function", imported on first use so the registry stays cheap to import
    summary: str

    @cached_property
    def scorer(self) -> Callable[[Any], Verdict]:
        module, _, attr = self.scorer_path.partition(":")
        return getattr(importlib.import_module(module), attr)


KINDS: dict[str, VerifierKind] = {
    k.name: k
    for k in (
        VerifierKind("math", MathItem, "groupscore.verifiers.math.verify:score_math",
                     "Boxed/final-answer extraction and string, numeric, symbolic equivalence."),
        VerifierKind("code", CodeItem, "groupscore.verifiers.code.verify:score_code",
                     "Program from the completion run on public and hidden tests in the sandbox; reward = pass rate "
                     "(of the hidden tests alone when there are any)."),
        VerifierKind("format", FormatItem, "groupscore.verifiers.format.verify:score_format",
                     "Required tags in order with non-empty content (e.g. <think>, <answer>), or a linear-time regex."),
        VerifierKind("length", LengthItem, "groupscore.verifiers.length.verify:score_length",
                     "Length in characters or whitespace tokens inside a target range, with a penalty outside it."),
        VerifierKind("json", JsonItem, "groupscore.verifiers.json_schema.verify:score_json",
                     "JSON document (optionally in a ```json block) that parses and validates against a JSON schema."),
        VerifierKind("sql", SqlItem, "groupscore.verifiers.sql.verify:score_sql",
                     "SELECT query run read-only on an SQLite database beside the gold query; result sets compared."),
    )
}

Item = Annotated[Union[tuple(k.item_model for k in KINDS.values())], Field(discriminator="verifier")]
_item_adapter: TypeAdapter[Any] = TypeAdapter(Item)


def parse_item(raw: Any) -> ItemBase:
    """Validate one raw item (a dict or JSON text); raises pydantic's ValidationError with field paths."""
    if isinstance(raw, (str, bytes)):
        return _item_adapter.validate_json(raw)
    return _item_adapter.validate_python(raw)


def describe_error(exc: ValidationError) -> str:
    """One line per problem, each naming the field path."""
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or '<item>'}: {err['msg']}" for err in exc.errors(include_url=False)
    )


def score_item(item: ItemBase) -> Verdict:
    """Score one validated item in this process (each kind enforces its own time bound)."""
    verdict = KINDS[item.verifier].scorer(item)  # type: ignore[attr-defined]
    return verdict if verdict.id == item.id else verdict.model_copy(update={"id": item.id})
