"""A scored batch: samples in row order and how they were judged, as every kind of rollouts hands it back; and what
the trainer and evaluation compute from it alone (group statistics by the service's formula, the group log's lines,
a step's statistics)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from groupscore.schema.advantages import judged_stats
from groupscore.schema.wire import GroupStats
from groupscore.train.summary import BatchStats, Spread


@dataclass
class ScoredBatch:
    """Samples in row order, `group_size` consecutive rows per task, and how they were judged."""

    task_ids: list[str]
    prompts: list[str]
    samples: list[Any]  # a completion's text, or an episode's trajectory (its messages, calls, verdict)
    rewards: list[float | None]  # what GRPO trains on; None: nothing judged the sample (infra_error), masked
    group_size: int
    statuses: list[str | None] = field(default_factory=list)  # each verdict's status (None: no verdict at all)
    components: dict[str, list[float | None]] = field(default_factory=dict)  # per name, in row order
    wait_s: float = 0.0  # the time the trainer blocked on scoring
    request_s: float = 0.0  # the time scoring took, overlapped or not
    samples_key: str = "completions"  # what the group log calls the samples ("trajectories" for episodes)
    group_extra: list[dict[str, Any]] = field(default_factory=list)  # per group: more fields for its log line

    def __post_init__(self) -> None:
        rows = len(self.rewards)
        if self.group_size < 1 or rows % self.group_size:
            raise ValueError(f"{rows} scored samples are not whole groups of {self.group_size}")
        for name, values in [("task_ids", self.task_ids), ("prompts", self.prompts), ("samples", self.samples)]:
            if len(values) != rows:
                raise ValueError(f"{len(values)} {name} for {rows} scored samples")

    @classmethod
    def joined(cls, batches: Sequence[ScoredBatch]) -> ScoredBatch:
        """Batches of whole groups one after another (every process's part of a generation batch)."""
        if len(batches) == 1:
            return batches[0]
        first = batches[0]
        names = sorted({name for b in batches for name in b.components})
        return cls(
            [t for b in batches for t in b.task_ids],
            [p for b in batches for p in b.prompts],
            [s for b in batches for s in b.samples],
            rewards=[r for b in batches for r in b.rewards],
            group_size=first.group_size,
            statuses=[s for b in batches for s in (b.statuses or [None] * len(b.rewards))],
            components={n: [v for b in batches for v in b.components.get(n, [None] * len(b.rewards))] for n in names},
            wait_s=max(b.wait_s for b in batches),
            request_s=max(b.request_s for b in batches),
            samples_key=first.samples_key,
            group_extra=[e for b in batches for e in (b.group_extra or [{}] * (len(b.rewards) // b.group_size))],
        )

    def groups(self) -> Iterator[slice]:
        for start in range(0, len(self.rewards), self.group_size):
            yield slice(start, start + self.group_size)

    def group_stats(self) -> list[GroupStats]:
        """Per group: mean, std, advantages and the zero-variance flag over its judged samples (schema/advantages.py,
        the service's formula)."""
        return [judged_stats(self.rewards[rows]) for rows in self.groups()]

    def advantages(self) -> list[float]:
        return [a for stats in self.group_stats() for a in stats.advantages]

    def masked(self) -> list[bool]:
        return [r is None for r in self.rewards]

    def text(self, index: int) -> str:
        sample = self.samples[index]
        return sample if isinstance(sample, str) else str(sample.get("messages", sample))


def check_rows(rows: Sequence[Mapping[str, Any]] | None, prompts: Sequence[Any]) -> Sequence[Mapping[str, Any]]:
    """The rows `begin` was given are the ones TRL generates for: else TRL's call order changed under us."""
    if rows is None or [row["prompt"] for row in rows] != list(prompts):
        raise RuntimeError(
            "TRL asked for rollouts of prompts other than the generation batch's rows (GRPOTrainer's call order "
            "changed): groupscore's trainer is written against TRL 1.16 (pip install 'trl>=1.16,<1.17')"
        )
    return rows


# -- what the trainer logs ----------------------------------------------------------------------------------------


def group_records(step: int, batch: ScoredBatch) -> list[dict[str, Any]]:
    """groups.jsonl: one line per group: the task, its prompt, its samples, the rewards and components, each
    verdict's status, the group's mean and std and the advantages trained on."""
    records = []
    for index, (rows, stats) in enumerate(zip(batch.groups(), batch.group_stats())):
        judged = [r for r in batch.rewards[rows] if r is not None]
        record: dict[str, Any] = {
            "step": step,
            "group": index,
            "task_id": batch.task_ids[rows.start],
            "prompt": batch.prompts[rows.start],
            batch.samples_key: batch.samples[rows],
            "rewards": batch.rewards[rows],
            "components": {name: values[rows] for name, values in batch.components.items()},
            "statuses": batch.statuses[rows] if batch.statuses else [],
            "mean": stats.mean if judged else None,
            "std": stats.std,
            "advantages": stats.advantages,
            "zero_variance": stats.zero_variance,
            "infra_errors": len(batch.rewards[rows]) - len(judged),
        }
        if batch.group_extra:
            record.update(batch.group_extra[index])
        records.append(record)
    return records


def _spread(values: list[float]) -> Spread:
    return Spread(statistics.fmean(values), statistics.pstdev(values)) if values else Spread(math.nan, math.nan)


def batch_stats(batch: ScoredBatch) -> BatchStats:
    """Reward mean/std over the judged samples, and per component over the values it has (None: nothing judged the
    sample, or a function said it does not apply); the share of zero-variance groups, and how many samples were
    masked because nothing judged them (infra_error)."""
    judged = [r for r in batch.rewards if r is not None]
    components = {
        name: _spread([v for v in values if v is not None]) for name, values in sorted(batch.components.items())
    }
    flat = [stats.zero_variance for stats in batch.group_stats()]
    total = len(batch.rewards)
    reward = _spread(judged)
    return BatchStats(
        reward_mean=reward.mean,
        reward_std=reward.std,
        zero_variance_share=sum(flat) / len(flat) if flat else 0.0,
        infra_errors=total - len(judged),
        infra_error_share=(total - len(judged)) / total if total else 0.0,
        reward_wait_s=batch.wait_s,
        reward_request_s=batch.request_s,
        components=components,
    )
