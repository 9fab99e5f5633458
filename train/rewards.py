"""The GRPO reward function: each generation batch goes to the service as groups, scored while the trainer moves on.

TRL calls `ServiceReward` with the whole generation batch (prompts repeated num_generations times, in order).
We cut it back into its groups, send them to `POST /v1/score/groups`, and keep the service's per-group
statistics so the trainer can use the service's advantages and log exactly what the service computed.
The request is started as soon as the completions are decoded (`prefetch`), so the service scores while the
trainer computes reference log-probs; the reward function then only waits for what is left.
The user's own reward functions (`rewards.functions`) run on the same batch as extra components; with any of them,
the reward is the weighted sum and the advantages are recomputed from it, group by group, as the service would.
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
from groupscore.train.user_rewards import UserReward, combine, group_advantages


@dataclass
class ScoredBatch:
    """One generation batch as the service scored it, in TRL's row order."""

    task_ids: list[str]
    prompts: list[str]
    completions: list[str]
    groups: list[GroupResult]
    wait_s: float  # time the reward function blocked on the service
    request_s: float  # time from sending the request to having the answer
    extras: dict[str, list[float | None]] = field(default_factory=dict)  # the user's functions, in row order
    combined: list[float | None] | None = None  # service and functions weighted, in row order (with extras only)

    def group_rewards(self, index: int) -> list[float | None]:
        """The rewards trained on in one group (None: not judged, masked)."""
        group = self.groups[index]
        if self.combined is None:
            return [None if m else r for r, m in zip(group.total.rewards, unscored(group))]
        size = len(group.total.rewards)
        return self.combined[index * size : (index + 1) * size]

    def advantages(self) -> list[float]:
        """Per completion in row order: the service's own, or (with the user's functions) recomputed the same way."""
        if self.combined is None:
            return [a for g in self.groups for a in g.total.advantages]
        return [a for i in range(len(self.groups)) for a in group_advantages(self.group_rewards(i))[0]]

    def zero_variance(self) -> list[bool]:
        if self.combined is None:
            return [g.total.zero_variance for g in self.groups]
        return [group_advantages(self.group_rewards(i))[1] for i in range(len(self.groups))]


@dataclass
class ServiceReward:
    scorer: GroupScorer
    num_generations: int
    overlap: bool = True  # start scoring right after generation (see `prefetch`)
    batches: list[ScoredBatch] = field(default_factory=list)
    extra: list[UserReward] = field(default_factory=list)  # the user's reward functions (rewards.functions)
    service_weight: float = 1.0
    task_columns: dict[str, dict[str, Any]] = field(default_factory=dict)  # per task id: the row's other columns
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
        batch = ScoredBatch(
            list(task_id), list(prompts), list(completions), groups, wait_s=done - entered, request_s=done - sent
        )
        if self.extra:
            service = [None if m else r for g in groups for r, m in zip(g.total.rewards, unscored(g))]
            batch.extras = await self._user_rewards(prompts, completions, task_id, log_metric, _columns)
            weights = {u.name: u.weight for u in self.extra}
            batch.combined = combine(service, batch.extras, weights, self.service_weight)
        self.batches.append(batch)
        if log_metric is not None:
            for name in sorted({c for g in groups for c in g.components}):
                values = [v for g in groups for v, m in zip(component_rewards(g, name), unscored(g)) if not m]
                if values:
                    log_metric(f"service/{name}/mean", sum(values) / len(values))
            log_metric("service/zero_variance_share", sum(g.total.zero_variance for g in groups) / len(groups))
            log_metric("service/infra_error_share", sum(m for g in groups for m in unscored(g)) / len(completions))
            log_metric("service/reward_wait_s", done - entered)
            for name, extra in batch.extras.items():
                judged = [v for v in extra if v is not None]
                if judged:
                    log_metric(f"rewards/{name}/mean", sum(judged) / len(judged))
        # None for completions the service could not score: TRL masks them; the trainer also zeroes their loss.
        return [r for i in range(len(groups)) for r in batch.group_rewards(i)]

    async def _user_rewards(
        self,
        prompts: list[str],
        completions: list[str],
        task_id: list[str],
        log_metric: Callable[[str, float], None] | None,
        trl_kwargs: dict[str, Any],
    ) -> dict[str, list[float | None]]:
        """Each function called as TRL calls one: the rows' columns as keyword lists, plus TRL's own arguments."""
        rows = [self.task_columns.get(t, {}) for t in task_id]
        names = sorted({k for row in rows for k in row} - {"prompt", "completion", "completions", "prompts"})
        columns = {k: [row.get(k) for row in rows] for k in names}
        passed = {k: v for k, v in trl_kwargs.items() if k in ("completion_ids", "trainer_state", "log_extra")}
        return {
            user.name: await user.score(
                len(completions),
                prompts=prompts,
                completions=completions,
                **{**columns, **passed, "task_id": task_id, "log_metric": log_metric or _ignore},
            )
            for user in self.extra
        }


def _ignore(*_args: Any, **_kwargs: Any) -> None:
    """log_metric / log_extra for a call made outside TRL."""
