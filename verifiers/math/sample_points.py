"""Sample points for the sampled-identity tests: unpredictable to a completion, yet the same for the same pair.

Fixed, public points let a completion plant roots at them (`x^2 + (x-0.739..)(x+1.134..)(x+6.708..)` agreed with
`x^2` at all three). Here each point is drawn from a hash of both expressions, so it moves whenever the completion
changes: planting a root at a point would mean finding a fixed point of the hash. The same pair always gets the same
points, so a verdict never changes between runs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

# Enough agreements that a non-zero difference of bounded degree vanishing at every point by accident is out of
# reach (each point is a generic real; a few spare ones cover points near a root, within the tolerance).
IDENTITY_TRIALS = 5
_LOW, _SPAN = 0.25, 2.75  # |value| in [0.25, 3): away from 0 and small enough that powers stay finite


def sample_value(a: str, b: str, trial: int, index: int) -> float:
    """The value of variable number `index` at sample point number `trial` for the pair (a, b)."""
    digest = hashlib.blake2b(f"{trial}\0{index}\0{a}\0{b}".encode(), digest_size=8).digest()
    fraction = int.from_bytes(digest[:7], "big") / float(1 << 56)
    magnitude = _LOW + _SPAN * fraction
    return -magnitude if digest[7] & 1 else magnitude


def sample_point(a: str, b: str, names: Sequence[object], trial: int) -> dict:
    """{name: value} for every name (the caller's order fixes which value each one gets)."""
    return {name: sample_value(a, b, trial, k) for k, name in enumerate(names)}
