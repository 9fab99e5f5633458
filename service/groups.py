"""Group statistics for GRPO: mean, std, normalised advantages and the zero-variance flag of one prompt's rewards."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from groupscore.service.models import GroupStats

# Rewards closer than this are equal for the zero-variance flag (float noise from weighted sums must not count).
_ZERO_STD = 1e-9


def group_stats(rewards: Sequence[float], eps: float = 1e-4, std: Literal["sample", "population"] = "sample") -> GroupStats:
    """advantage_i = (r_i - mean) / (std + eps).

    `sample` divides the squared deviations by n - 1, as TRL's GRPOTrainer does (its `nanstd` applies Bessel's
    correction, and its eps is 1e-4); a group of one has std 0 there, and here too. `population` divides by n.
    """
    n = len(rewards)
    mean = math.fsum(rewards) / n
    squares = math.fsum((r - mean) ** 2 for r in rewards)
    if std == "sample":
        spread = math.sqrt(squares / (n - 1)) if n > 1 else 0.0
    else:
        spread = math.sqrt(squares / n)
    denominator = spread + eps
    advantages = [(r - mean) / denominator if denominator > 0 else 0.0 for r in rewards]  # eps=0, all equal: 0
    return GroupStats(rewards=list(rewards), mean=mean, std=spread, advantages=advantages,
                      zero_variance=spread < _ZERO_STD)
