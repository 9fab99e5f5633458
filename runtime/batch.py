"""Scoring many items on all cores: `score_batch` for Python callers, and `map_chunks` under `groupscore score`.

Items of any registered kind are validated and scored in a pool of worker processes, a chunk of items per call
(`chunks.chunk_size`). Order is kept, and one bad item never costs the others: an item that fails validation or whose
scorer raises gets an error verdict, and a chunk whose worker dies or hangs is rescored one item at a time
(`isolate.run_isolated`, as in the service) so that only the culprit fails, with an `infra_error` verdict (nothing
judged it, so its 0 is no score).
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import TYPE_CHECKING, Any

from groupscore.bounded import workers as bounded
from groupscore.runtime.chunks import MAX_CHUNK, chunk_size, chunks, worker_count
from groupscore.runtime.isolate import run_isolated

if TYPE_CHECKING:
    from groupscore.schema.reward import RewardSpec
    from groupscore.schema.verdict import Verdict

# The caller's process only hands entries to the workers and takes back what they return, so the item models, the
# registry and pydantic are imported where items are validated and scored: in the workers (whose template imports
# them once, see _started_pool), and here only on a failure path. A one-shot `groupscore score` starts that much faster.
__all__ = [
    "MAX_CHUNK",
    "chunk_size",
    "infra_failure",
    "map_chunks",
    "prepare_worker",
    "score_batch",
    "score_one",
    "worker_count",
]
# Outer bound on one chunk. Every kind bounds its own items (math: timeout_s, code: per-test limits), so this only
# catches a scorer that hangs despite them; it is generous so that slow but legitimate chunks never trip it.
CHUNK_GUARD_BASE_S = 120.0
CHUNK_GUARD_PER_ITEM_S = 30.0
ITEM_GUARD_S = 600.0
# Each batch worker scores one item at a time, so its own bounded pool needs one worker (a killed one is re-forked
# from the pool's template in milliseconds).
NESTED_BOUNDED_WORKERS = "1"


def score_batch(
    items_or_raw: Iterable[Any], workers: int | None = None, reward: RewardSpec | None = None
) -> list[Verdict]:
    """Score items (ItemBase instances, dicts or JSON text) on `workers` processes (default: all cores), in order.

    reward: a composite reward spec applied to every item (default: each item's own verifier)."""
    raws = list(items_or_raw)
    chunk = chunk_size(len(raws), worker_count(workers))
    if not raws:
        return []
    parts = map_chunks(partial(_score_chunk, reward), _infra_verdict, raws, workers, chunk)
    return [verdict for verdicts in parts for verdict in verdicts]


# ----------------------------------------------------------------------------------------------------------------------
# Dispatch: chunks of entries to the pool, results back in order, failures isolated to one entry.


def map_chunks[Entry, Result](
    fn: Callable[[list[Entry]], list[Result]],
    on_failure: Callable[[Entry, Exception], Result],
    entries: Iterable[Entry],
    workers: int | None,
    chunk: int,
) -> Iterator[list[Result]]:
    """Yield fn(chunk) for consecutive chunks of `entries`, in order, with a bounded number of chunks in flight.

    The pool starts at the first chunk: nothing to score (an empty file) starts no process."""
    size = worker_count(workers)
    parts = chunks(entries, chunk)
    first = next(parts, None)
    if first is None:
        return
    from concurrent.futures import ThreadPoolExecutor

    pool = _batch_pool(size)
    run = partial(_run_isolated, pool, fn, on_failure)
    threads = ThreadPoolExecutor(max_workers=pool.size, thread_name_prefix="groupscore-batch")
    pending: deque[Any] = deque()  # futures of chunk results
    try:
        for part in itertools.chain([first], parts):
            pending.append(threads.submit(run, part))
            if len(pending) >= 2 * pool.size:  # enough to keep every worker busy; more would only hold memory
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        threads.shutdown(wait=False, cancel_futures=True)


def _run_isolated[Entry, Result](
    pool: bounded.WorkerPool,
    fn: Callable[[list[Entry]], list[Result]],
    on_failure: Callable[[Entry, Exception], Result],
    part: list[Entry],
) -> list[Result]:
    return run_isolated(pool, fn, part, on_failure, _guard_s)


def _guard_s(count: int) -> float:
    return CHUNK_GUARD_BASE_S + CHUNK_GUARD_PER_ITEM_S * count if count > 1 else ITEM_GUARD_S


_pools_lock = threading.Lock()
_pools: dict[int, bounded.PerProcess] = {}


def _batch_pool(size: int) -> bounded.WorkerPool:
    """The batch pool of this size, kept for the life of the process so that later batches start at once."""
    with _pools_lock:
        if size not in _pools:
            _pools[size] = bounded.PerProcess(partial(_started_pool, size))
        return _pools[size].get()


def _started_pool(size: int) -> bounded.WorkerPool:
    # The template imports this module and composite (the registry and the item models), nothing heavier: a worker
    # imports a kind's scorer when its first item of that kind comes, and math's symbolic step starts its own bounded
    # pool (with sympy) only for an item the fast path cannot decide. A one-shot `groupscore score` on a few numeric
    # items so never pays for sympy, the sandbox or the other kinds (the service preloads everything: it lives long).
    pool = bounded.WorkerPool(size)
    pool.warm_up([__name__, "groupscore.verifiers.scoring"])
    return pool


# ----------------------------------------------------------------------------------------------------------------------
# Worker side: these run inside the batch pool's processes.


def _score_chunk(reward: RewardSpec | None, raws: list[Any]) -> list[Verdict]:
    prepare_worker()
    return [score_one(raw, reward) for raw in raws]


def score_one(raw: Any, reward: RewardSpec | None = None) -> Verdict:
    """Validate and score one raw item (with `reward`'s components when given); every failure becomes an error
    verdict."""
    from groupscore.schema.item import ItemBase
    from groupscore.schema.verdict import Verdict
    from groupscore.verifiers.scoring import score_raw, score_valid

    if isinstance(raw, (str, bytes)):
        try:
            raw = json.loads(raw)
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError alike
            return Verdict.error(None, f"invalid JSON: {exc}")
    if isinstance(raw, ItemBase):
        return score_valid(raw, reward)
    return score_raw(raw, reward)  # as the service's workers do


def infra_failure(item_id: Any, exc: BaseException) -> Verdict:
    """The verdict for an item whose scoring process died, hung past its guard or never got a worker."""
    from groupscore.schema.verdict import Verdict

    if isinstance(exc, bounded.WorkerCrashed):
        cause = "worker_died"
    elif isinstance(exc, bounded.WorkerUnavailable):
        cause = "worker_unavailable"
    else:  # the chunk guard ran out (a scorer ignoring its own bounds), or the pool failed
        cause = "internal"
    return Verdict.infra_error(item_id, f"the scorer failed on this item: {type(exc).__name__}: {exc}", cause)


def _infra_verdict(raw: Any, exc: Exception) -> Verdict:
    from groupscore.schema.item import ItemBase
    from groupscore.verifiers.scoring import raw_item_id

    return infra_failure(raw.id if isinstance(raw, ItemBase) else raw_item_id(raw), exc)


_prepared = False


def prepare_worker() -> None:
    """Once per batch worker: size the worker's own bounded pool, which starts only when an item needs it (math's
    symbolic step calls `warm_up_symbolic` first, outside that item's budget)."""
    global _prepared
    if _prepared:
        return
    _prepared = True
    os.environ.setdefault(bounded.SIZE_ENV, NESTED_BOUNDED_WORKERS)


def worker_state() -> dict[str, int | bool]:
    """Run in a batch worker (`_batch_pool(n).run(worker_state, ...)`): whether it started a bounded pool or imported
    sympy. Tests use it to check that items the fast path decides start neither."""
    return {"bounded_templates_started": bounded.templates_started, "sympy_imported": "sympy" in sys.modules}
