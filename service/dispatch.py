"""One path from a request to the scoring runtime for every endpoint: admission (a bounded queue), the deadline, the
server's math defaults, metrics; `/run_code` goes through it too.

The scoring itself (workers, chunks, split on failure, deadlines, stuck calls, memory caps) is the runtime's
(`groupscore.runtime.engine`); what is left here is the service's business: how many items may wait, what a refused
request is told (QueueFull, Retry-After from the recent throughput), and what is counted.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections import deque
from typing import Any

from groupscore.runtime.engine import EngineConfig, ScoringEngine
from groupscore.runtime.tasks import START_MARGIN_S, run_code_task
from groupscore.schema.reward import RewardSpec
from groupscore.service.metrics import ServiceMetrics
from groupscore.service.readiness import Readiness, SandboxProbe
from groupscore.service.settings import Settings

_RATE_WINDOW_S = 10.0


class QueueFull(Exception):
    """The queue cannot take this many more items now; try again after `retry_after_s`."""

    def __init__(self, retry_after_s: int) -> None:
        super().__init__(f"scoring queue full; retry after {retry_after_s} s")
        self.retry_after_s = retry_after_s


class Dispatcher:
    def __init__(self, settings: Settings, metrics: ServiceMetrics) -> None:
        self.settings = settings
        self.metrics = metrics
        self.math_defaults = settings.math_default_options()
        self.engine = ScoringEngine(
            EngineConfig(
                workers=settings.workers,
                chunk_items=settings.chunk_items,
                memory_mb=settings.worker_memory_mb,
                max_attempts=settings.max_attempts,
                stuck_grace_s=settings.stuck_grace_s,
                debug=settings.debug,
            ),
            events=self,
        )
        self.sandbox = SandboxProbe()
        self._in_flight = 0
        self._completed: deque[tuple[float, int]] = deque()  # (time, items) of finished chunks, for Retry-After
        self._completed_lock = threading.Lock()  # appended from the engine's threads, read on the event loop

    # -- life cycle ---------------------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start every scoring worker with the scorers loaded; the service is ready when this returns."""
        await self.engine.start()
        self.metrics.workers.set(self.settings.workers)

    async def close(self) -> None:
        await self.engine.close()

    @property
    def ready(self) -> bool:
        return self.engine.ready

    @property
    def unavailable_kinds(self) -> dict[str, str]:
        return self.engine.unavailable_kinds

    async def readiness(self) -> Readiness:
        """Workers up with their scorers loaded, and the sandbox as last probed (probed only once workers are up)."""
        sandbox = await self.sandbox.problem() if self.ready else "not probed: the scoring processes are not started"
        return Readiness(self.ready, sandbox, dict(self.unavailable_kinds))

    def worker_pids(self) -> list[int]:
        return self.engine.worker_pids()

    # -- endpoints ----------------------------------------------------------------------------------------------------

    async def score(
        self, raw_items: list[Any], spec: RewardSpec | None = None, deadline_s: float | None = None
    ) -> list[dict[str, Any]]:
        """Verdict dicts in input order; raises QueueFull when the queue has no room for these items."""
        if self.math_defaults:
            raw_items = [self._with_math_defaults(raw) for raw in raw_items]
        self.admit(len(raw_items))
        try:
            budget = min(deadline_s or self.settings.deadline_s, self.settings.deadline_s)
            deadline_at = asyncio.get_running_loop().time() + budget
            spec_json = None if spec is None else spec.model_dump_json()
            verdicts = await self.engine.score(raw_items, spec_json, deadline_at)
        finally:
            self.release(len(raw_items))
        self.metrics.count_verdicts(raw_items, verdicts)
        return verdicts

    async def run_code(self, fields: dict[str, Any]) -> tuple[str, Any]:
        """A SandboxFusion-style run in a scoring worker (runtime.programs.run_program): ("ok", RunResult) or
        ("sandbox_error", message). Takes one place in the queue (QueueFull when there is none)."""
        # The jail enforces the run's own limits; this outer bound only catches a worker that hangs despite them.
        timeout_s = fields["compile_timeout_s"] + fields["run_timeout_s"] + START_MARGIN_S + self.settings.stuck_grace_s
        self.admit(1)
        try:
            outcome, value = await self.engine.call(run_code_task, fields, timeout_s=timeout_s)
        except Exception as exc:  # noqa: BLE001 - its worker died every time, or it overran: the sandbox's failure
            outcome, value = "sandbox_error", f"the run failed in the service: {type(exc).__name__}: {exc}"
        finally:
            self.release(1)
        if outcome != "ok":
            self.metrics.sandbox_failures.inc()
        return outcome, value

    def _with_math_defaults(self, raw: Any) -> Any:
        """A math item with the server's convention defaults under its own options (its own values win)."""
        if isinstance(raw, dict) and raw.get("verifier") == "math":
            return {**self.math_defaults, **raw}
        return raw

    # -- admission ----------------------------------------------------------------------------------------------------

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
        with self._completed_lock:
            while self._completed and self._completed[0][0] < now - _RATE_WINDOW_S:
                self._completed.popleft()
            rate = sum(n for _, n in self._completed) / _RATE_WINDOW_S
        if rate <= 0:
            return 5
        return int(min(60, max(1, math.ceil(self._in_flight / rate))))

    # -- the engine's events (called from its threads) ----------------------------------------------------------------

    def worker_replaced(self) -> None:
        self.metrics.worker_restarts.inc()

    def call_stuck(self) -> None:
        self.metrics.stuck_tasks.inc()

    def chunk_done(self, items: int, seconds: float) -> None:
        with self._completed_lock:
            self._completed.append((time.monotonic(), items))
        self.metrics.task_latency.observe(seconds)
