"""What one call of a reward target produced: its rewards, each classified (`Value`), or the failure, and the time.

`run_call` is the body of every caller: `groupscore.testing.calls` runs it in a thread or hands the target to a worker
process (`groupscore.testing.worker`), which runs it there; both import it from here.
"""

from __future__ import annotations

import math
import numbers
import os
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from groupscore.testing.cases import Case
from groupscore.testing.targets import InfraError, ItemError, Target


@dataclass(frozen=True)
class Value:
    """One returned reward, classified. `number` is set for numeric values (NaN included)."""

    kind: str  # "number", "none", "item_error", "infra_error" (nothing judged it: never the reward's fault) or "other"
    number: float | None = None
    detail: str = ""  # the type for numbers that are not plain floats, the reason of an item error, a repr otherwise

    @property
    def key(self) -> tuple[Any, ...]:
        """For equality across calls: NaN equals NaN here, so a deterministic NaN is not reported as nondeterminism."""
        if self.number is not None and math.isnan(self.number):
            return (self.kind, "nan", self.detail)
        return (self.kind, self.number, self.detail)

    def show(self) -> str:
        if self.kind == "number":
            return repr(self.number) if not self.detail else f"{self.number!r} ({self.detail})"
        if self.kind == "none":
            return "None"
        if self.kind == "item_error":
            return f"error({self.detail})"
        if self.kind == "infra_error":
            return f"infra_error({self.detail})"
        return self.detail


@dataclass(frozen=True)
class CallResult:
    """What one call of the target produced."""

    values: tuple[Value, ...] | None  # None when the call as a whole failed
    error: str | None = None  # the exception (type, message, last frames), a wrong return shape, a dead worker
    elapsed_s: float = 0.0  # wall time of the target call itself, measured where it ran
    hang: bool = False

    @property
    def ok(self) -> bool:
        return self.values is not None


def classify_reward(value: Any) -> Value:
    """What kind of value one reward the target returned is (a number, None, an item or infra error, or other)."""
    if value is None:
        return Value("none")
    if isinstance(value, ItemError):
        return Value("item_error", detail=value.reason[:300])
    if isinstance(value, InfraError):
        return Value("infra_error", detail=value.reason[:300])
    if isinstance(value, bool):
        return Value("number", float(value), "bool")
    if isinstance(value, numbers.Real) or (hasattr(value, "__float__") and not isinstance(value, (str, bytes))):
        try:
            number = float(value)
        except Exception as exc:  # noqa: BLE001 - a tensor with several elements, say
            return Value("other", detail=f"{type(value).__name__} that float() rejects ({exc})")
        return Value("number", number, "" if type(value) in (float, int) else type(value).__name__)
    text = repr(value)
    return Value("other", detail=f"{type(value).__name__} {text[:60]}{'...' if len(text) > 60 else ''}")


def run_call(target: Target, cases: Sequence[Case]) -> CallResult:
    """Call the target here and now (no time bound): the body of every caller."""
    start = time.perf_counter()
    try:
        raw = target.score(cases)
    except BaseException as exc:  # noqa: BLE001 - SystemExit from a reward is a finding too
        elapsed = time.perf_counter() - start
        return CallResult(None, _describe_exception(exc), elapsed)
    elapsed = time.perf_counter() - start
    # TRL iterates the result and measures its length: a list, a tuple or a 1-d array all work; a string does not.
    if isinstance(raw, (str, bytes, dict)) or not hasattr(raw, "__len__") or not hasattr(raw, "__iter__"):
        return CallResult(None, f"returned {type(raw).__name__}, not a list of rewards", elapsed)
    try:
        raw = list(raw)
    except TypeError as exc:  # a 0-d array has __len__ and __iter__ but refuses both
        return CallResult(None, f"returned {type(raw).__name__} that cannot be iterated ({exc})", elapsed)
    if len(raw) != len(cases):
        return CallResult(None, f"returned {len(raw)} rewards for {len(cases)} completions", elapsed)
    return CallResult(tuple(classify_reward(v) for v in raw), None, elapsed)


def _describe_exception(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)[-2:]
    where = " <- ".join(f"{os.path.basename(f.filename)}:{f.lineno} in {f.name}" for f in reversed(frames))
    message = str(exc)
    if len(message) > 200:
        message = message[:200] + "..."
    return f"{type(exc).__name__}: {message}" + (f" (at {where})" if where else "")
