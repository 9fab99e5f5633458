"""The service's readiness, one answer for `/readyz` and the Ray deployment's health check: the scoring workers up
with every scorer loaded, and the sandbox able to run a program in a jail.

The sandbox is probed with one harmless program (`runtime.programs.sandbox_problem`) in a thread, at most every
`PROBE_EVERY_S`: a jail costs tens of milliseconds, and Ray Serve asks every replica every 10 s. A replica that must
serve code items (`require_sandbox`, on for the Ray deployment) is not ready without it, so Serve routes nothing to it
rather than let it answer every code item with an infra_error verdict.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from groupscore.runtime.programs import sandbox_problem

PROBE_EVERY_S = 30.0  # a failed probe is repeated at the next ask, a passed one trusted this long


@dataclass(frozen=True)
class Readiness:
    workers_ready: bool  # every scoring process started with the scorers loaded
    sandbox: str | None  # None: a probe jail ran the probe program; else why not
    unavailable_kinds: dict[str, str] = field(default_factory=dict)  # kinds whose scorer did not load (their items err)

    def problems(self, require_sandbox: bool) -> list[str]:
        """What keeps this service from scoring every kind it should, one line each (none: ready)."""
        found = [] if self.workers_ready else ["the scoring processes are not started"]
        if require_sandbox and self.sandbox is not None:
            found.append(self.sandbox)
        return found


class SandboxProbe:
    """The sandbox's state as last probed; `problem()` probes again once the last answer is stale."""

    def __init__(self, probe: Callable[[], str | None] = sandbox_problem, every_s: float = PROBE_EVERY_S) -> None:
        self._probe = probe
        self._every_s = every_s
        self._last: tuple[float, str | None] | None = None  # (monotonic time, problem)
        self._lock = asyncio.Lock()

    async def problem(self) -> str | None:
        async with self._lock:  # concurrent asks share one probe
            now = time.monotonic()
            if self._last is None or self._last[1] is not None or now - self._last[0] >= self._every_s:
                self._last = (now, await asyncio.to_thread(self._probe))
            return self._last[1]
