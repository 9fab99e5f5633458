"""Entry points from raw items to verdicts: validate, score with the item's kind or a composite spec, never raise.

The runtime's workers and every in-process caller score through here; one bad item yields an error verdict.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from groupscore.schema.item import ItemBase
from groupscore.schema.names import did_you_mean
from groupscore.schema.reward import KIND_NAMES, RewardSpec
from groupscore.schema.verdict import Verdict
from groupscore.verifiers.composite import score_composite
from groupscore.verifiers.registry import describe_error, parse_item, score_item


def raw_item_id(raw: Any) -> str | int | None:
    """The id of a raw item when it has a usable one, so an error verdict still lines up with its input."""
    if isinstance(raw, dict):
        candidate = raw.get("id")
        if isinstance(candidate, (str, int)) and not isinstance(candidate, bool):
            return candidate
    return None


def score_raw(raw: Any, spec: RewardSpec | None = None) -> Verdict:
    """Validate and score one raw item (a dict); a bad item or a failing verifier yields an error verdict."""
    if not isinstance(raw, dict):
        return Verdict.error(None, f"invalid item: <item>: must be a JSON object, not {type(raw).__name__}")
    kind_problem = _kind_problem(raw.get("verifier"))
    if kind_problem is not None:
        return Verdict.error(raw_item_id(raw), f"invalid item: <item>.verifier: {kind_problem}")
    try:
        item = parse_item(raw)
    except ValidationError as exc:
        return Verdict.error(raw_item_id(raw), f"invalid item: {describe_error(exc)}")
    return score_valid(item, spec)


def score_valid(item: ItemBase, spec: RewardSpec | None = None) -> Verdict:
    """Score a validated item; a failing verifier yields an error verdict."""
    try:
        return score_item(item) if spec is None else score_composite(item, spec)
    except Exception as exc:  # noqa: BLE001 - one failing item must not take the batch down
        return Verdict.error(item.id, f"verifier {item.verifier!r} failed: {type(exc).__name__}: {exc}")


def _kind_problem(kind: Any) -> str | None:
    """Why an item's `verifier` names no kind (missing, or misspelt: with the closest kind), or None."""
    if kind in KIND_NAMES:
        return None
    kinds = ", ".join(KIND_NAMES)
    if kind is None:
        return f"missing; give the item's kind, one of {kinds} (`groupscore score --verifier KIND` for every line)"
    hint = did_you_mean(kind, KIND_NAMES) if isinstance(kind, str) else ""
    return f"{kind!r} is not a verifier kind{hint}; kinds: {kinds}"
