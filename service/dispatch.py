"""One path from raw items to verdicts for every endpoint: admission, deadline, pool, metrics."""

from __future__ import annotations

import asyncio
from typing import Any

from groupscore.service.metrics import ServiceMetrics
from groupscore.service.pool import ScoringPool
from groupscore.service.settings import Settings
from groupscore.schema.reward import RewardSpec


class Dispatcher:
    def __init__(self, settings: Settings, pool: ScoringPool, metrics: ServiceMetrics) -> None:
        self.settings = settings
        self.pool = pool
        self.metrics = metrics
        self.math_defaults = settings.math_default_options()

    async def score(self, raw_items: list[Any], spec: RewardSpec | None = None,
                    deadline_s: float | None = None) -> list[dict[str, Any]]:
        """Verdict dicts in input order; raises pool.QueueFull when the queue has no room for these items."""
        if self.math_defaults:
            raw_items = [self._with_math_defaults(raw) for raw in raw_items]
        self.pool.admit(len(raw_items))
        try:
            budget = min(deadline_s or self.settings.deadline_s, self.settings.deadline_s)
            deadline_at = asyncio.get_running_loop().time() + budget
            spec_json = None if spec is None else spec.model_dump_json()
            verdicts = await self.pool.score(raw_items, spec_json, deadline_at)
        finally:
            self.pool.release(len(raw_items))
        self.metrics.count_verdicts(raw_items, verdicts)
        return verdicts

    def _with_math_defaults(self, raw: Any) -> Any:
        """A math item with the server's convention defaults under its own options (its own values win)."""
        if isinstance(raw, dict) and raw.get("verifier") == "math":
            return {**self.math_defaults, **raw}
        return raw
