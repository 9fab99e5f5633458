"""Group statistics for GRPO: mean, std, normalised advantages and the zero-variance flag of one prompt's rewards; a
groups request as items (`group_items`) and its verdicts back as groups (`group_results`), for every way in (HTTP, a
Ray Serve handle)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

from groupscore.schema.verdict import Status
from groupscore.schema.wire import GroupsRequest, GroupStats

# Rewards closer than this are equal for the zero-variance flag (float noise from weighted sums must not count).
_ZERO_STD = 1e-9


def group_stats(
    rewards: Sequence[float],
    eps: float = 1e-4,
    std: Literal["sample", "population"] = "sample",
    masked: Sequence[bool] | None = None,
) -> GroupStats:
    """advantage_i = (r_i - mean) / (std + eps).

    `sample` divides the squared deviations by n - 1, as TRL's GRPOTrainer does (its `nanstd` applies Bessel's
    correction, and its eps is 1e-4); a group of one has std 0 there, and here too. `population` divides by n.
    `masked` marks completions that were never judged (infra_error): they are left out of mean and std, and their
    advantage is 0, so their placeholder reward moves nothing (TRL's nanmean does the same with None rewards).
    """
    flags = list(masked) if masked is not None else [False] * len(rewards)
    judged = [r for r, m in zip(rewards, flags) if not m]
    n = len(judged)
    if n == 0:  # nothing judged: no signal
        return GroupStats(
            rewards=list(rewards),
            mean=0.0,
            std=0.0,
            advantages=[0.0] * len(rewards),
            zero_variance=True,
            masked=len(rewards),
        )
    mean = math.fsum(judged) / n
    squares = math.fsum((r - mean) ** 2 for r in judged)
    if std == "sample":
        spread = math.sqrt(squares / (n - 1)) if n > 1 else 0.0
    else:
        spread = math.sqrt(squares / n)
    denominator = spread + eps
    advantages = [
        0.0 if m else (r - mean) / denominator if denominator > 0 else 0.0  # eps=0, all equal: 0
        for r, m in zip(rewards, flags)
    ]
    return GroupStats(
        rewards=list(rewards),
        mean=mean,
        std=spread,
        advantages=advantages,
        zero_variance=spread < _ZERO_STD,
        masked=len(rewards) - n,
    )


def group_items(body: GroupsRequest) -> list[dict[str, Any]]:
    """Each group's completions as items of the group's reference fields, ids numbered within the group."""
    return [
        {**group.item, "completion": completion, "id": index}
        for group in body.groups
        for index, completion in enumerate(group.completions)
    ]


def group_results(body: GroupsRequest, verdicts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    names = [component.name for component in body.reward.components] if body.reward else []
    results = []
    start = 0
    for group in body.groups:
        group_verdicts = verdicts[start : start + len(group.completions)]
        start += len(group.completions)
        masked = [v["status"] == Status.infra_error.value for v in group_verdicts]  # never judged: no fake 0
        total = group_stats([v["reward"] for v in group_verdicts], body.eps, body.std, masked)
        components = {}
        for name in names:
            # An item that failed validation has no component scores: it counts as 0, like its total.
            scores = [(v.get("components") or {}).get(name, 0.0) for v in group_verdicts]
            components[name] = group_stats(scores, body.eps, body.std, masked).model_dump()
        results.append(
            {"id": group.id, "results": group_verdicts, "total": total.model_dump(), "components": components}
        )
    return results
