"""What bench scripts share (bench/ is on a script's path when it runs): the round trip of a bounded pool."""

from __future__ import annotations

import time
from typing import Any


def roundtrip_us(pool: Any, calls: int = 2000) -> tuple[float, float]:
    """p50 and p99, in microseconds, of `calls` trivial bounded calls (abs(-1)) through `pool.run(..., timeout_s=)`:
    the fixed cost a scorer pays per call, whichever pool implements `run`."""
    trips = []
    for _ in range(calls):
        t0 = time.perf_counter()
        pool.run(abs, -1, timeout_s=5)
        trips.append(time.perf_counter() - t0)
    trips.sort()
    return 1e6 * trips[calls // 2], 1e6 * trips[calls * 99 // 100]
