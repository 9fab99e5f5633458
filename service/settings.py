"""The service's settings: one frozen object, built from arguments with GROUPSCORE_* environment variables as defaults."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, fields, replace
from typing import Any

from groupscore.runtime import MIN_WORKER_MEMORY_MB  # one floor for both readers

# The math item's conventions and extraction options: what `math_defaults` may set for a whole service.
MATH_DEFAULTABLE = ("profile", "percent", "decimal_comma", "significant_digits", "order", "rename_variables",
                    "reference", "fallback", "strict", "rel_tol", "timeout_s")


def _cores() -> int:
    return max(1, len(os.sched_getaffinity(0)))


@dataclass(frozen=True)
class Settings:
    host: str = "127.0.0.1"
    port: int = 8000
    workers: int = field(default_factory=_cores)  # scoring processes
    token: str | None = None  # bearer token; None: no auth
    max_body_bytes: int = 64 * 1024 * 1024  # larger bodies: 413
    max_items: int = 16384  # items (or completions, summed over groups) per request; more: 422
    max_queue_items: int = 65536  # items admitted and not yet answered, over all requests; more: 429
    deadline_s: float = 300.0  # per-request deadline; a request may ask for a shorter one
    chunk_items: int = 32  # at most this many items go to a worker in one task
    max_attempts: int = 3  # tries per task when worker processes die under it
    stuck_grace_s: float = 30.0  # a task still running this long after its request gave up: its workers are replaced
    # Address-space cap of each scoring process, in MB (0: none); the variable GROUPSCORE_WORKER_MEMORY_MB also caps
    # the bounded workers (bounded/workers.py). An item that hits it gets an error verdict; the process lives on.
    worker_memory_mb: int = 4096
    openrlhf_verifier: str = "math"  # kind used by /get_reward for plain-text labels
    # Server-side defaults of the math item's conventions (README, "Math answers"), as a JSON object, e.g.
    # '{"profile": "math_verify"}': applied to every math item that leaves the option out; an item's own value wins.
    math_defaults: str = ""
    debug: bool = False  # test hooks: /debug/workers and metadata["debug_sleep_s"]; never in production

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ValueError("workers must be at least 1")
        if self.max_items < 1 or self.max_queue_items < self.max_items:
            raise ValueError("need 1 <= max_items <= max_queue_items (a request must fit the queue)")
        if (self.deadline_s <= 0 or self.stuck_grace_s <= 0 or self.chunk_items < 1 or self.max_attempts < 1
                or self.max_body_bytes < 1024):
            raise ValueError("deadline_s, stuck_grace_s, chunk_items, max_attempts must be positive and "
                             "max_body_bytes >= 1024")
        self.math_default_options()  # a bad value fails here, at start-up, in one line
        if self.worker_memory_mb != 0 and self.worker_memory_mb < MIN_WORKER_MEMORY_MB:
            raise ValueError(f"worker_memory_mb must be 0 (no cap) or at least {MIN_WORKER_MEMORY_MB}: a scoring "
                             "process needs that much address space to start")

    def math_default_options(self) -> dict[str, Any]:
        """`math_defaults` as a dict of math item options, checked against the math item's own schema."""
        if not self.math_defaults.strip():
            return {}
        fix = "set GROUPSCORE_MATH_DEFAULTS to a JSON object of math options, e.g. '{\"profile\": \"math_verify\"}'"
        try:
            options = json.loads(self.math_defaults)
        except ValueError:
            raise ValueError(f"math_defaults is not JSON: {fix}") from None
        if not isinstance(options, dict):
            raise ValueError(f"math_defaults must be a JSON object: {fix}")
        unknown = sorted(set(options) - set(MATH_DEFAULTABLE))
        if unknown:
            raise ValueError(f"math_defaults: {', '.join(unknown)} cannot have a server default; options that can: "
                             f"{', '.join(MATH_DEFAULTABLE)}")
        from pydantic import ValidationError

        from groupscore.verifiers.math.item import MathItem
        from groupscore.verifiers.registry import describe_error

        try:
            MathItem(completion="", answer="0", **options)
        except ValidationError as exc:
            raise ValueError(f"math_defaults: {describe_error(exc)}") from None
        return options

    @classmethod
    def from_env(cls, **overrides: Any) -> Settings:
        """Settings from GROUPSCORE_<FIELD> variables, then `overrides` (None values are ignored)."""
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = os.environ.get(f"GROUPSCORE_{f.name.upper()}")
            if raw is None or raw == "":
                continue
            kind = type(getattr(cls(), f.name)) if f.name != "token" else str
            if kind is bool:
                values[f.name] = raw.strip().lower() in {"1", "true", "yes", "on"}
            else:
                try:
                    values[f.name] = kind(raw)
                except ValueError:
                    raise ValueError(f"GROUPSCORE_{f.name.upper()}={raw!r} is not a valid {kind.__name__}") from None
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def with_(self, **changes: Any) -> Settings:
        return replace(self, **changes)
