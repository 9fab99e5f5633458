"""Split on failure: a chunk whose worker died, hung or could not answer is scored again one entry at a time, so that
only the entry at fault fails (and gets the caller's infra verdict). Used by the CLI's batches and the service alike."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from groupscore.bounded.workers import BudgetExceeded, WorkerCrashed, WorkerPool, WorkerUnavailable


class NoTimeLeft(WorkerUnavailable):
    """The entry's deadline had passed before a call for it could start: nothing ran."""


def killed_a_worker(exc: BaseException) -> bool:
    """Whether the failed call cost its worker (died, or killed for overrunning) and the pool forked a replacement."""
    if isinstance(exc, WorkerCrashed):
        return True
    return isinstance(exc, BudgetExceeded) and not isinstance(exc, WorkerUnavailable)


def run_isolated[Entry, Result](
    pool: WorkerPool,
    fn: Callable[[list[Entry]], list[Result]],
    part: list[Entry],
    on_failure: Callable[[Entry, Exception], Result],
    timeout_for: Callable[[int], float | None],
    attempts: int = 1,
    observe: Callable[[Exception], None] | None = None,
) -> list[Result]:
    """fn(part) in one of `pool`'s workers: one result per entry, in order, whatever fails.

    - timeout_for(n): the wall-clock budget of a call on n entries, asked when the call starts; None: there is no
      time left for it (the entries get on_failure with NoTimeLeft, a WorkerUnavailable; nothing runs).
    - When the call fails (the worker died or overran its budget and was killed, or the results could not come
      back), each entry is run again alone, so that only the culprit gets on_failure(entry, exception).
    - attempts: how often an entry alone is sent again when its worker *dies*: a worker may be killed from outside
      (the OOM killer, an operator), and scoring is idempotent. An overrun is not sent again: it would overrun again.
    - observe(exception) is told of every failed call (the service counts restarts and stuck tasks by it).
    """
    timeout_s = timeout_for(len(part))
    if timeout_s is None:
        return [on_failure(entry, NoTimeLeft("no time was left to score this item")) for entry in part]
    try:
        results: list[Result] = pool.run(fn, part, timeout_s=timeout_s)
        return results
    except Exception as exc:  # noqa: BLE001 - the worker died, hung, or could not send its answer back
        if observe is not None:
            observe(exc)
        if len(part) > 1:
            return [
                result
                for entry in part
                for result in run_isolated(pool, fn, [entry], on_failure, timeout_for, attempts, observe)
            ]
        if isinstance(exc, WorkerCrashed) and attempts > 1:
            return run_isolated(pool, fn, part, on_failure, timeout_for, attempts - 1, observe)
        return [on_failure(part[0], exc)]


def call_with_retries(
    pool: WorkerPool,
    fn: Callable[..., Any],
    *args: Any,
    timeout_s: float,
    attempts: int,
    observe: Callable[[Exception], None] | None = None,
) -> Any:
    """fn(*args) in a worker, sent again (up to `attempts` calls in all) when its worker dies under it."""
    for attempt in range(attempts):
        try:
            return pool.run(fn, *args, timeout_s=timeout_s)
        except WorkerCrashed as exc:
            if observe is not None:
                observe(exc)
            if attempt == attempts - 1:
                raise
        except BudgetExceeded as exc:
            if observe is not None:
                observe(exc)
            raise
    raise AssertionError("unreachable: attempts must be at least 1")
