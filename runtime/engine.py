"""The runtime for a long-lived caller (the service): started workers with every scorer loaded, a request's items
scored in chunks under its deadline from an event loop, and one-off calls (a SandboxFusion run).

- Workers: a bounded `WorkerPool` (groupscore.bounded) of `workers` processes forked from a template that imported
  every kind's scorer (`runtime.preload`); each worker starts math's symbolic pool at start-up (`tasks.warm`), and each
  one's address space is capped at `memory_mb` (an item that hits the cap gets an error verdict, the worker lives on).
- A request's items are cut into chunks (`chunks.chunk_size`, at most `chunk_items`), an item that runs programs in a
  chunk of its own, spread over the workers and answered in order. The event loop only awaits: each chunk's call to
  its worker waits in a thread, two threads per worker (`THREADS_PER_WORKER`), so a worker's next chunk is ready
  when it finishes one; a chunk that gets its worker after the request's deadline scores nothing (`tasks`).
- Split on failure (`isolate.run_isolated`, as in `groupscore score`): a chunk whose worker died is scored again one
  item at a time; an item alone whose worker dies is sent again, up to `max_attempts` calls in all (a worker may be
  killed from outside; scoring is idempotent), and then gets `infra_error` (worker_died). Only the dead worker is
  replaced, forked from the template in milliseconds; the chunks on the other workers go on undisturbed.
- Deadline: items not answered by the request's deadline get `infra_error` verdicts (cause "service_deadline": the
  service ran out of time, the item did not); chunks not yet started are dropped. Every item is started only while
  the request has its whole time budget left (`tasks.fits_before`: a program's limits, math's `timeout_s`): once
  started it ends before the deadline, and so does its chunk, so whether an item is masked never depends on what its
  completion, or a chunk-mate's, does (a slow symbolic step ends as its own `timeout`, never masking the chunk).
- Stuck calls: a chunk's call is bounded by the time left to its request's deadline plus `stuck_grace_s`; a call
  still running then has a scorer ignoring its own time bound, and its worker is killed and replaced, so one
  degenerate item cannot hold a worker.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

from groupscore.bounded.workers import BudgetExceeded, WorkerCrashed, WorkerPool, WorkerUnavailable
from groupscore.runtime import tasks
from groupscore.runtime.chunks import chunk_size, chunks_with_singles
from groupscore.runtime.isolate import NoTimeLeft, call_with_retries, killed_a_worker, run_isolated
from groupscore.schema.verdict import Verdict
from groupscore.verifiers.budget import runs_programs
from groupscore.verifiers.scoring import raw_item_id

# What the service's workers import before they are forked: every kind's scorer (and this runtime's tasks).
PRELOAD = ("groupscore.runtime.preload", "groupscore.runtime.tasks")
# Chunks in flight per worker: one being scored, one pickled and waiting for that worker. In the server the event loop
# holds the GIL for long stretches (validation, JSON), and a thread that must first win the GIL to send a worker its
# next chunk left the worker idle: with one thread per worker, HTTP batches of 256 items took 15% longer than through
# the process pool before (bench/RESULTS.md, "One scoring runtime"); with two, none.
THREADS_PER_WORKER = 2


class Events(Protocol):
    """What the engine reports as it goes (the service's metrics and its Retry-After estimate). Called from the
    engine's threads."""

    def worker_replaced(self) -> None: ...

    def call_stuck(self) -> None: ...

    def chunk_done(self, items: int, seconds: float) -> None: ...


class _NoEvents:
    def worker_replaced(self) -> None:
        pass

    def call_stuck(self) -> None:
        pass

    def chunk_done(self, items: int, seconds: float) -> None:
        pass


@dataclass(frozen=True)
class EngineConfig:
    workers: int  # worker processes
    chunk_items: int = 32  # at most this many items go to a worker in one call
    memory_mb: int = 4096  # each worker's address-space cap (0: none)
    max_attempts: int = 3  # calls per item alone when its worker dies under it
    stuck_grace_s: float = 30.0  # a call still running this long after its request's deadline: its worker is killed
    debug: bool = False  # the tasks' test hooks (tasks.DEBUG_SLEEP_KEY, tasks.DEBUG_ALLOC_KEY)


class ScoringEngine:
    def __init__(self, config: EngineConfig, events: Events | None = None) -> None:
        self.config = config
        self.events: Events = events or _NoEvents()
        self._pool: WorkerPool | None = None
        self._threads: ThreadPoolExecutor | None = None
        self.ready = False
        self.unavailable_kinds: dict[str, str] = {}

    # -- life cycle ---------------------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start every worker with the scorers loaded; ready when this returns."""
        self._threads = ThreadPoolExecutor(
            max_workers=THREADS_PER_WORKER * self.config.workers, thread_name_prefix="groupscore-scoring"
        )
        self._pool = WorkerPool(self.config.workers, memory_mb=self.config.memory_mb)
        warmed = await asyncio.get_running_loop().run_in_executor(self._threads, self._warm, self._pool)
        self.unavailable_kinds = {
            kind: problem for _, problems in warmed for kind, problem in problems.items() if problem is not None
        }
        self.ready = True

    @staticmethod
    def _warm(pool: WorkerPool) -> list[tuple[int, dict[str, str | None]]]:
        pool.warm_up(PRELOAD)
        warmed: list[tuple[int, dict[str, str | None]]] = pool.run_on_each(tasks.warm)
        return warmed

    async def close(self) -> None:
        self.ready = False
        pool, self._pool = self._pool, None
        threads, self._threads = self._threads, None
        if threads is not None:
            threads.shutdown(wait=False, cancel_futures=True)
        if pool is not None:
            await asyncio.to_thread(pool.shutdown)

    def worker_pids(self) -> list[int]:
        """Pids of the live worker processes (the service's debug endpoint: tests kill one)."""
        return [] if self._pool is None else self._pool.pids()

    def _started(self) -> tuple[WorkerPool, ThreadPoolExecutor]:
        if self._pool is None or self._threads is None:
            raise RuntimeError("the scoring engine is not started (or was shut down)")
        return self._pool, self._threads

    # -- scoring ------------------------------------------------------------------------------------------------------

    async def score(self, raw_items: list[Any], spec_json: str | None, deadline_at: float) -> list[dict[str, Any]]:
        """Verdict dicts for `raw_items`, in order; `deadline_at` is on the event loop's clock."""
        pool, threads = self._started()
        loop = asyncio.get_running_loop()
        deadline_wall = time.time() + (deadline_at - loop.time())  # the workers' clock
        spec = tasks.spec_of(spec_json)
        size = chunk_size(len(raw_items), self.config.workers, self.config.chunk_items)
        parts = chunks_with_singles(raw_items, size, lambda raw: runs_programs(raw, spec))
        run = partial(self._score_chunk, pool, spec_json, deadline_wall, time.perf_counter())
        futures = [loop.run_in_executor(threads, run, part) for part in parts]
        try:
            if futures:
                await asyncio.wait(futures, timeout=max(0.0, deadline_at - loop.time()))
        finally:
            for future in futures:
                if not future.done():
                    future.cancel()  # a chunk not started yet is dropped; a running one ends within its bound
        verdicts: list[dict[str, Any]] = []
        for part, future in zip(parts, futures):
            if not future.done() or future.cancelled():
                verdicts.extend(tasks.deadline_verdict(raw) for raw in part)
            elif (exc := future.exception()) is not None:
                verdicts.extend(_infra(raw, f"internal error: {type(exc).__name__}: {exc}", "internal") for raw in part)
            else:
                verdicts.extend(future.result())
        return verdicts

    def _score_chunk(
        self, pool: WorkerPool, spec_json: str | None, deadline_wall: float, submitted: float, part: list[Any]
    ) -> list[dict[str, Any]]:
        # In one of the engine's threads: the call and its retries, bounded by the request's deadline plus the grace.

        def timeout_for(count: int) -> float | None:
            left = deadline_wall - time.time()
            return left + self.config.stuck_grace_s if left > 0 else None

        fn = partial(tasks.score_task, spec_json=spec_json, debug=self.config.debug, deadline_wall=deadline_wall)
        verdicts = run_isolated(
            pool, fn, part, self._failed_verdict, timeout_for, self.config.max_attempts, self._observe
        )
        self.events.chunk_done(len(part), time.perf_counter() - submitted)  # the wait for a thread included
        return verdicts

    async def call(self, fn: Any, *args: Any, timeout_s: float) -> Any:
        """fn(*args) in a worker within timeout_s, sent again when its worker dies (WorkerCrashed after max_attempts
        calls; BudgetExceeded when it overran and its worker was killed)."""
        pool, threads = self._started()
        run = partial(
            call_with_retries,
            pool,
            fn,
            *args,
            timeout_s=timeout_s,
            attempts=self.config.max_attempts,
            observe=self._observe,
        )
        return await asyncio.get_running_loop().run_in_executor(threads, run)

    def _observe(self, exc: Exception) -> None:
        if killed_a_worker(exc):
            self.events.worker_replaced()
        if isinstance(exc, BudgetExceeded) and not isinstance(exc, WorkerUnavailable):
            self.events.call_stuck()

    def _failed_verdict(self, raw: Any, exc: Exception) -> dict[str, Any]:
        if isinstance(exc, WorkerCrashed):
            return _infra(raw, f"the scoring process died on this item {self.config.max_attempts} times", "worker_died")
        if isinstance(exc, NoTimeLeft):
            return tasks.deadline_verdict(raw)
        if isinstance(exc, WorkerUnavailable):
            return _infra(raw, f"no scoring process was free: {exc}", "worker_unavailable")
        if isinstance(exc, BudgetExceeded):  # past its request's deadline and the grace: the scorer ignored its bound
            return tasks.deadline_verdict(raw, "its scorer ran past the request's deadline and was stopped")
        return _infra(raw, f"internal error: {type(exc).__name__}: {exc}", "internal")


def _infra(raw: Any, reason: str, cause: str) -> dict[str, Any]:
    verdict: dict[str, Any] = Verdict.infra_error(raw_item_id(raw), reason, cause).model_dump(mode="json")
    return verdict
