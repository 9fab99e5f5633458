"""The group statistics GRPO trains on, computed one way for everyone: the service's `GroupStats` in every groups
response, and the bundled trainer's advantages on every batch it trains on (completions and episodes alike).

advantage_i = (r_i - mean) / (std + eps), over the completions something judged; a completion nothing judged
(`infra_error`, or None here) is left out of mean and std and its advantage is 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from groupscore.schema.wire import GroupStats

EPS = 1e-4  # TRL's GRPOTrainer adds the same to the std
# Rewards closer than this are equal for the zero-variance flag (float noise from weighted sums must not count).
_ZERO_STD = 1e-9


def group_stats(
    rewards: Sequence[float],
    eps: float = EPS,
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


def judged_stats(rewards: Sequence[float | None], eps: float = EPS) -> GroupStats:
    """`group_stats` of rewards where None marks what nothing judged (the trainer's form of `masked`); the masked
    rewards read 0.0 in the result."""
    return group_stats([0.0 if r is None else r for r in rewards], eps, masked=[r is None for r in rewards])
