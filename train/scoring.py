"""The trainer's view of the scoring service: groups out, per-group rewards, components and advantages back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class GroupScores:
    """One prompt's completions as the service scored them (total reward and each component)."""

    rewards: list[float]
    components: dict[str, list[float]]
    statuses: list[str]
    mean: float
    std: float
    advantages: list[float]
    zero_variance: bool

    @classmethod
    def from_wire(cls, group: dict[str, Any]) -> GroupScores:
        total = group["total"]
        return cls(rewards=list(total["rewards"]),
                   components={name: list(stats["rewards"]) for name, stats in group.get("components", {}).items()},
                   statuses=[v["status"] for v in group["results"]], mean=total["mean"], std=total["std"],
                   advantages=list(total["advantages"]), zero_variance=bool(total["zero_variance"]))


def wire_group(group_id: str, item: dict[str, Any], completions: list[str]) -> dict[str, Any]:
    """The service's group shape: an item without its completion, and the completions to score as that item."""
    return {"id": group_id, "item": item, "completions": list(completions)}
