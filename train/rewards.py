"""The GRPO reward function: each generation batch goes to the service as groups, scored while the trainer moves on.

TRL calls `ServiceReward` with the whole generation batch (prompts repeated num_generations times, in order).
We cut it back into its groups, send them to `POST /v1/score/groups`, and keep the service's per-group
statistics so the trainer can use the service's advantages and log exactly what the service computed.
The request is started as soon as the completions are decoded (`prefetch`), so the service scores while the
trainer computes reference log-probs; the reward function then only waits for what is left.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from groupscore.schema.wire import GroupResult
from groupscore.train.scoring import GroupScorer, WireGroup, component_rewards, unscored, wire_group


@dataclass
class ScoredBatch:
    """One generation batch as the service scored it, in TRL's row order."""

    task_ids: list[str]
    prompts: list[str]
    completions: list[str]
    groups: list[GroupResult]
    wait_s: float  # time the reward function blocked on the service
    request_s: float  # time from sending the request to having the answer


@dataclass
class ServiceReward:
    scorer: GroupScorer
    num_generations: int
    overlap: bool = True  # start scoring right after generation (see `prefetch`)
    batches: list[ScoredBatch] = field(default_factory=list)
    _pending_rows: Sequence[Mapping[str, Any]] | None = None  # the generation batch's dataset rows (TRL's inputs)
    _prefetch: tuple[list[str], Future[list[GroupResult]], float] | None = None

    def __post_init__(self) -> None:
        self.__name__ = "service"  # TRL names reward functions (metrics, logs) by __name__

    def expect(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Called with the generation batch's dataset rows before generation starts."""
        self._pending_rows = rows
        self._prefetch = None

    def _groups(self, rows: Sequence[Mapping[str, Any]], completions: list[str]) -> list[WireGroup]:
        g = self.num_generations
        if len(rows) % g:
            raise ValueError(f"generation batch of {len(rows)} rows is not made of whole groups of {g}")
        groups = []
        for start in range(0, len(rows), g):
            ids = {rows[i]["task_id"] for i in range(start, start + g)}
            if len(ids) != 1:  # TRL's RepeatSampler keeps each prompt's generations together; refuse to guess
                raise ValueError(f"rows {start}..{start + g - 1} mix tasks {sorted(ids)}: groups are not contiguous")
            groups.append(
                wire_group(rows[start]["task_id"], json.loads(rows[start]["item"]), completions[start : start + g])
            )
        return groups

    def prefetch(self, completions: list[str], loop: asyncio.AbstractEventLoop | None) -> None:
        """Start scoring on TRL's reward event loop right after generation; the reward call picks it up."""
        if not self.overlap or self._pending_rows is None or loop is None:
            return
        groups = self._groups(self._pending_rows, completions)
        future = asyncio.run_coroutine_threadsafe(self.scorer.ascore_groups(groups), loop)
        self._prefetch = (list(completions), future, time.perf_counter())

    async def __call__(
        self,
        prompts: list[str],
        completions: list[str],
        task_id: list[str],
        item: list[str],
        log_metric: Callable[[str, float], None] | None = None,
        **_columns: Any,
    ) -> list[float | None]:
        entered = time.perf_counter()
        rows = [{"task_id": t, "item": i} for t, i in zip(task_id, item)]
        if self._prefetch is not None and self._prefetch[0] == list(completions):
            _, future, sent = self._prefetch
            groups = await asyncio.wrap_future(future)
        else:  # no prefetch (eval loop, or called directly): score now
            sent = entered
            groups = await self.scorer.ascore_groups(self._groups(rows, list(completions)))
        self._prefetch = None
        done = time.perf_counter()
        self.batches.append(
            ScoredBatch(
                list(task_id), list(prompts), list(completions), groups, wait_s=done - entered, request_s=done - sent
            )
        )
        if log_metric is not None:
            for name in sorted({c for g in groups for c in g.components}):
                values = [v for g in groups for v, m in zip(component_rewards(g, name), unscored(g)) if not m]
                if values:
                    log_metric(f"service/{name}/mean", sum(values) / len(values))
            log_metric("service/zero_variance_share", sum(g.total.zero_variance for g in groups) / len(groups))
            log_metric("service/infra_error_share", sum(m for g in groups for m in unscored(g)) / len(completions))
            log_metric("service/reward_wait_s", done - entered)
        # None for completions the service could not score: TRL masks them; the trainer also zeroes their loss.
        return [None if m else r for g in groups for r, m in zip(g.total.rewards, unscored(g))]
