"""How long scoring an item may take by its own limits, so the service starts only items that can finish in time."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from groupscore.schema.item import ItemBase
from groupscore.schema.reward import RewardSpec
from groupscore.verifiers.code.item import CodeItem
from groupscore.verifiers.composite import component_item
from groupscore.verifiers.registry import parse_item


def item_time_budget_s(raw: Any, spec: RewardSpec | None = None) -> float:
    """Seconds that scoring `raw` (under `spec`) may take by the limits of the item alone, whatever its completion does.

    Code: compile, runs, their kills (`time_budget_s`). A kind whose verdict has a wall-clock bound of its own counts
    it (`timeout_s`: math's symbolic step, a schema's regex validation). Every other kind counts 0 (sql's per-query
    `time_limit_s` is not counted yet); so does a bad item: it is answered at once with an error verdict."""
    if not isinstance(raw, dict):
        return 0.0
    try:
        item = parse_item(raw)
        items = [item] if spec is None else [component_item(item, c) for c in spec.components]
    except (ValidationError, ValueError, TypeError):
        return 0.0
    return sum(_budget(i) for i in items)  # components are scored one after another


def runs_programs(raw: Any, spec: RewardSpec | None = None) -> bool:
    """Whether scoring `raw` runs its completion as a program (a code item, or a spec with a code component):
    such an item may take as long as its own limits allow."""
    kinds = {raw.get("verifier")} if isinstance(raw, dict) else set()
    if spec is not None:
        kinds |= {c.verifier for c in spec.components}
    return "code" in kinds


def _budget(item: ItemBase) -> float:
    if not isinstance(item, CodeItem):  # every item of kind "code" is one (parse_item)
        bound = getattr(item, "timeout_s", None)
        return float(bound) if isinstance(bound, (int, float)) else 0.0
    from groupscore.verifiers.code.verify import time_budget_s  # the sandbox only where code items come

    return time_budget_s(item)
