"""The bounded workers' settings: GROUPSCORE_BOUNDED_WORKERS and GROUPSCORE_WORKER_MEMORY_MB.

Read when a pool is made (`load`), not cached: a process may set them for the pools it and its children make next (the
runtime sizes its batch workers' pools so). An empty variable counts as unset; a bad value is a ValueError in one line
naming the variable and what it takes. Like the rest of `groupscore.bounded`, this imports nothing of ours.

Why not pydantic-settings, as the other parts' settings are: the one-shot `groupscore score` makes a bounded pool in
its own process, which imports no pydantic (tests/runtime/test_lazy_start.py); pydantic with pydantic-settings cost that
process about 0.3 s of CPU here, more than its whole run on a quiet machine (bench/RESULTS.md: 0.24 s). Two integers
are read by hand instead, with the same conventions (prefix, empty = unset, one line per bad value).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

ENV_PREFIX = "GROUPSCORE_"
SIZE_ENV = f"{ENV_PREFIX}BOUNDED_WORKERS"
MEMORY_ENV = f"{ENV_PREFIX}WORKER_MEMORY_MB"
MIN_WORKER_MEMORY_MB = 512  # below this a worker cannot even import its modules: every call would fail


@dataclass(frozen=True)
class BoundedSettings:
    # Workers in a process's default bounded pool (math's symbolic step); None: the usable cores, at most 4.
    bounded_workers: int | None = None
    # Address-space cap of each bounded worker in MB (0: none); the service's scoring processes read it too.
    worker_memory_mb: int = 4096

    # (field, variable, what it takes): for messages, the README's table and tests/service/test_settings.py.
    VARIABLES = (
        ("bounded_workers", SIZE_ENV, "a number of workers, at least 1"),
        ("worker_memory_mb", MEMORY_ENV, f"megabytes, 0 (no cap) or at least {MIN_WORKER_MEMORY_MB}"),
    )


def _integer(name: str, takes: str, smallest: int) -> int | None:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not an integer: give {takes}, or unset it") from None
    if value < smallest:
        raise ValueError(f"{name}={value} is too small: give {takes}, or unset it")
    return value


def load() -> BoundedSettings:
    """The settings as the environment holds them now."""
    size = _integer(SIZE_ENV, BoundedSettings.VARIABLES[0][2], 1)
    memory = _integer(MEMORY_ENV, BoundedSettings.VARIABLES[1][2], 0)
    if memory is not None and memory != 0 and memory < MIN_WORKER_MEMORY_MB:
        raise ValueError(
            f"{MEMORY_ENV}={memory} is below {MIN_WORKER_MEMORY_MB}: a worker needs that much address "
            "space to start (0: no cap)"
        )
    return BoundedSettings(size, BoundedSettings.worker_memory_mb if memory is None else memory)
