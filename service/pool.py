"""The scoring process pool behind the service: admission (bounded queue), tasks, deadlines, and recovery from dead workers.

- Scoring is CPU-bound, so it runs in a ProcessPoolExecutor sized to the cores; the event loop only awaits futures.
  Each scoring process's address space is capped (`worker_memory_mb`): an item that hits the cap gets an error
  verdict from its process, which lives on.
- A request's items are cut into tasks of at most `chunk_items`, spread over the workers, answered in order.
- When a worker process dies (killed, segfault, OOM), the executor breaks and fails every task in it. The pool is
  replaced once, and each affected task is sent again; a task that keeps breaking the pool is split into single
  items, so only an item that really kills its worker ends with an `infra_error` verdict. Scoring is idempotent, so
  sending a task again is safe.
- Items not scored by the request's deadline get `infra_error` verdicts (cause "service_deadline": the service ran
  out of time, the program did not); their tasks are cancelled where not yet started. An item that runs a program is a
  task of its own, and its worker starts it only while the request has its whole time budget left (the most its own
  limits allow, `verifiers.budget`): once started it ends before the deadline, so a slow program gets its own
  `timeout` (0), and whether an item is masked never depends on what its program, or a task-mate's, does.
  A task still running `stuck_grace_s` after its request gave up has a scorer ignoring its own time bound: its
  workers are killed and replaced (other tasks there are sent again), so one degenerate item cannot hold a worker.
"""

from __future__ import annotations

import asyncio
import math
import multiprocessing
import time
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from collections.abc import Callable
from typing import Any

from groupscore.service import worker
from groupscore.service.metrics import ServiceMetrics
from groupscore.service.settings import Settings
from groupscore.verifiers.budget import runs_programs
from groupscore.verifiers.scoring import raw_item_id
from groupscore.schema.verdict import Verdict

_RATE_WINDOW_S = 10.0


class WorkerDied(RuntimeError):
    """A task's worker process died on every attempt."""


class QueueFull(Exception):
    """The queue cannot take this many more items now; try again after `retry_after_s`."""

    def __init__(self, retry_after_s: int) -> None:
        super().__init__(f"scoring queue full; retry after {retry_after_s} s")
        self.retry_after_s = retry_after_s


class ScoringPool:
    def __init__(self, settings: Settings, metrics: ServiceMetrics) -> None:
        self.settings = settings
        self.metrics = metrics
        # forkserver: workers fork from a clean process that preloaded the scorers, so a replacement starts fast
        # and no worker inherits the server's threads or sockets.
        self._context = multiprocessing.get_context("forkserver")
        self._context.set_forkserver_preload(["groupscore.service.preload"])
        self._executor: ProcessPoolExecutor | None = None
        self._generation = 0
        self._in_flight = 0
        self._completed: deque[tuple[float, int]] = deque()  # (time, items) of finished tasks, for Retry-After
        self.ready = False
        self.unavailable_kinds: dict[str, str] = {}

    # -- life cycle ---------------------------------------------------------------------------------------------------

    def _new_executor(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(max_workers=self.settings.workers, mp_context=self._context,
                                   initializer=worker.cap_memory, initargs=(self.settings.worker_memory_mb,))

    async def start(self) -> None:
        """Start every worker and load the scorers in it; the service is ready when this returns."""
        self._executor = self._new_executor()
        self.metrics.workers.set(self.settings.workers)
        warmed = await asyncio.gather(*(asyncio.wrap_future(self._executor.submit(worker.warm))
                                        for _ in range(self.settings.workers)))
        self.unavailable_kinds = {kind: problem for _, problems in warmed for kind, problem in problems.items()
                                  if problem is not None}
        self.ready = True

    async def close(self) -> None:
        self.ready = False
        if self._executor is not None:
            executor, self._executor = self._executor, None
            await asyncio.to_thread(executor.shutdown, wait=True, cancel_futures=True)

    def worker_pids(self) -> list[int]:
        """Pids of the live worker processes (debug endpoint: tests kill one)."""
        processes = getattr(self._executor, "_processes", None) or {}
        return sorted(pid for pid, process in processes.items() if process.is_alive())

    def _replace_executor(self, broken_generation: int) -> None:
        # Many tasks see the same break; only the first one to report it replaces the executor.
        if broken_generation != self._generation or self._executor is None:
            return
        broken, self._executor = self._executor, self._new_executor()
        self._generation += 1
        self.metrics.worker_restarts.inc()
        broken.shutdown(wait=False, cancel_futures=True)

    def _watch(self, future: Future, generation: int) -> None:
        asyncio.get_running_loop().call_later(self.settings.stuck_grace_s, self._reap_if_stuck, future, generation)

    def _reap_if_stuck(self, future: Future, generation: int) -> None:
        """A task its request abandoned is still running long after: a scorer ignoring its own time bound.

        One stuck task holds a worker for good, so the workers of its executor are killed and replaced; other tasks
        that were running there are sent again (scoring is idempotent), as after a crash.
        """
        if future.done() or generation != self._generation or self._executor is None:
            return
        self.metrics.stuck_tasks.inc()
        processes = list((getattr(self._executor, "_processes", None) or {}).values())
        self._replace_executor(generation)
        for process in processes:
            process.kill()

    # -- admission ------------------------------------------------------------------------------------------------------

    @property
    def queue_depth(self) -> int:
        return self._in_flight

    def admit(self, n_items: int) -> None:
        """Reserve queue room for a request's items, or raise QueueFull. Pair with `release`."""
        if self._in_flight + n_items > self.settings.max_queue_items:
            raise QueueFull(self.retry_after_s())
        self._in_flight += n_items
        self.metrics.queue_depth.set(self._in_flight)

    def release(self, n_items: int) -> None:
        self._in_flight -= n_items
        self.metrics.queue_depth.set(self._in_flight)

    def retry_after_s(self) -> int:
        """Seconds until the backlog should have drained, from the recent throughput (1 to 60)."""
        now = time.monotonic()
        while self._completed and self._completed[0][0] < now - _RATE_WINDOW_S:
            self._completed.popleft()
        rate = sum(n for _, n in self._completed) / _RATE_WINDOW_S
        if rate <= 0:
            return 5
        return int(min(60, max(1, math.ceil(self._in_flight / rate))))

    # -- scoring ----------------------------------------------------------------------------------------------------------

    def _task_size(self, n_items: int) -> int:
        # Several tasks per worker keep every worker busy to the end; small tasks also bound what a crash costs.
        return max(1, min(self.settings.chunk_items, math.ceil(n_items / (4 * self.settings.workers))))

    def _split(self, raw_items: list[Any], spec_json: str | None) -> list[list[Any]]:
        """The request's items as tasks, in order. An item that runs a program is a task of its own: it may take as
        long as its limits allow, and the items of a task are answered together, so it would hold its task-mates'
        verdicts (and past the deadline mask them)."""
        spec = worker._spec(spec_json)
        size = self._task_size(len(raw_items))
        tasks: list[list[Any]] = []
        run: list[Any] = []
        for raw in raw_items:
            if runs_programs(raw, spec):
                if run:
                    tasks.append(run)
                    run = []
                tasks.append([raw])
                continue
            run.append(raw)
            if len(run) == size:
                tasks.append(run)
                run = []
        if run:
            tasks.append(run)
        return tasks

    async def score(self, raw_items: list[Any], spec_json: str | None, deadline_at: float) -> list[dict[str, Any]]:
        """Verdict dicts for `raw_items`, in order; `deadline_at` is on the event loop's clock."""
        loop = asyncio.get_running_loop()
        deadline_wall = time.time() + (deadline_at - loop.time())  # the workers' clock
        tasks_items = self._split(raw_items, spec_json)
        tasks = [asyncio.ensure_future(self._run_task(items, spec_json, deadline_wall=deadline_wall))
                 for items in tasks_items]
        try:
            if tasks:
                await asyncio.wait(tasks, timeout=max(0.0, deadline_at - loop.time()))
        finally:
            for task in tasks:
                if not task.done():
                    task.cancel()  # cancels the executor future too, where it has not started
        verdicts: list[dict[str, Any]] = []
        for items, task in zip(tasks_items, tasks):
            if not task.done() or task.cancelled():
                verdicts.extend(worker.deadline_verdict(raw) for raw in items)
            elif task.exception() is not None:
                exc = task.exception()
                verdicts.extend(Verdict.infra_error(raw_item_id(raw), f"internal error: {type(exc).__name__}: {exc}",
                                                    "internal").model_dump(mode="json") for raw in items)
            else:
                verdicts.extend(task.result())
        return verdicts

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run `fn(*args)` in a worker, sending it again when its worker dies (raises WorkerDied after max_attempts)."""
        for _attempt in range(self.settings.max_attempts):
            if self._executor is None:
                raise RuntimeError("the scoring pool is shut down")
            generation, executor = self._generation, self._executor
            try:
                future = executor.submit(fn, *args)
            except (BrokenProcessPool, RuntimeError):  # broken, or shut down by another task's replacement
                self._replace_executor(generation)
                continue
            try:
                return await asyncio.wrap_future(future)
            except BrokenProcessPool:
                self._replace_executor(generation)
            except asyncio.CancelledError:
                if asyncio.current_task().cancelling():  # our caller gave up (deadline): really cancelled
                    if not future.done():  # already running in a worker, so it could not be taken back
                        self._watch(future, generation)
                    raise
                # Not us: the executor was replaced under this task and dropped it before it ran. Send it again.
        raise WorkerDied(f"the worker process died {self.settings.max_attempts} times running this task")

    async def _run_task(self, items: list[Any], spec_json: str | None, may_split: bool = True,
                        deadline_wall: float | None = None) -> list[dict[str, Any]]:
        started = time.perf_counter()
        try:
            verdicts = await self.call(worker.score_task, items, spec_json, self.settings.debug, deadline_wall)
        except WorkerDied:
            if may_split and len(items) > 1:
                # Find the item that kills its worker: the others are scored, only it gets the error.
                parts = await asyncio.gather(*(self._run_task([raw], spec_json, may_split=False,
                                                              deadline_wall=deadline_wall) for raw in items))
                return [verdict for part in parts for verdict in part]
            return [Verdict.infra_error(raw_item_id(raw), f"the scoring process died on this item "
                                        f"{self.settings.max_attempts} times", "worker_died").model_dump(mode="json")
                    for raw in items]
        self._completed.append((time.monotonic(), len(items)))
        self.metrics.task_latency.observe(time.perf_counter() - started)
        return verdicts
