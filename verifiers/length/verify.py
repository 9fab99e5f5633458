"""Scores a LengthItem: 1 inside [min, max], a linear (or hard) penalty outside, always in [0, 1]."""

from __future__ import annotations

from groupscore.schema.verdict import Status, Verdict
from groupscore.verifiers.length.item import LengthItem


def measure(text: str, unit: str) -> int:
    return len(text) if unit == "chars" else len(text.split())


def score_length(item: LengthItem) -> Verdict:
    text = item.completion.strip() if item.strip else item.completion
    n = measure(text, item.unit)
    details = {"length": n, "unit": item.unit, "min": item.min, "max": item.max}
    if n < item.min:
        distance, bound, side = item.min - n, item.min, "short"
    elif item.max is not None and n > item.max:
        distance, bound, side = n - item.max, item.max, "long"
    else:
        return Verdict(
            id=item.id,
            reward=1.0,
            status=Status.correct,
            details=details,
            reason=f"{n} {item.unit} within [{item.min}, {item.max if item.max is not None else 'inf'}]",
        )
    if item.penalty == "hard":
        reward = 0.0
    elif item.slope is not None:
        reward = max(0.0, 1.0 - item.slope * distance)
    else:
        # Relative to the bound crossed, so one setting works for 20-token and 2000-token targets alike.
        reward = max(0.0, 1.0 - distance / max(bound, 1))
    return Verdict(
        id=item.id,
        reward=reward,
        status=Status.partial if reward > 0 else Status.incorrect,
        details=details,
        reason=f"{n} {item.unit}: {distance} too {side}",
    )
