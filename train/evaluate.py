"""Held-out evaluation and the preflight: n samples of each task from the run's rollouts (completions scored by the
service, or whole episodes scored by sessions), summarised as pass@k over the judged samples."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from groupscore.train.passk import pass_at_k
from groupscore.train.summary import EvalResult, TaskSamples
from groupscore.train.task import TaskRow

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from groupscore.train.batch import ScoredBatch
    from groupscore.train.rollouts import Rollouts

SOLVED = 1.0 - 1e-9  # a sample counts as a pass only with full reward (all hidden tests, the exact answer)


def evaluate(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    tasks: list[TaskRow],
    rollouts: Rollouts,
    *,
    n: int,
    ks: list[int],
    temperature: float,
    max_new_tokens: int,
    seed: int,
    max_prompts: int | None = None,
    progress: str | None = None,
) -> EvalResult:
    """n samples of every task (a group each), judged, and summarised; an infra_error is no failure: it is left out."""
    if max_prompts is not None and max_prompts < len(tasks):
        tasks = random.Random(seed).sample(tasks, max_prompts)
    batch = rollouts.sample(
        model,
        tokenizer,
        tasks,
        n=n,
        temperature=temperature,
        max_new_tokens=max_new_tokens,
        seed=seed,
        progress=progress,
    )
    return summarize(batch, tasks, n, ks)


def summarize(batch: ScoredBatch, tasks: list[TaskRow], n: int, ks: list[int]) -> EvalResult:
    """pass@k, the mean reward and the group shares of n judged samples per task (a batch in task order)."""
    counts: list[tuple[int, int]] = []  # (judged samples, correct ones) per task
    per_task: list[TaskSamples] = []
    for task, rows in zip(tasks, batch.groups()):
        judged = [r for r in batch.rewards[rows] if r is not None]
        correct = sum(r >= SOLVED for r in judged)
        counts.append((len(judged), correct))
        rewards = [0.0 if r is None else r for r in batch.rewards[rows]]
        texts = [batch.text(i) for i in range(rows.start, rows.stop)]
        per_task.append(TaskSamples(task.id, correct, len(judged), rewards, texts))
    judged = [r for r in batch.rewards if r is not None]
    stats = batch.group_stats()
    return EvalResult(
        n=n,
        pass_at={k: _pass_at(counts, k) for k in sorted(set(ks)) if k <= n},
        mean_reward=sum(judged) / len(judged) if judged else float("nan"),
        infra_errors=len(batch.rewards) - len(judged),
        solvable_share=sum(any(r > 0 for r in t.rewards) for t in per_task) / len(per_task),
        zero_variance_share=sum(s.zero_variance for s in stats) / len(stats),
        per_task=per_task,
    )


def _pass_at(counts: list[tuple[int, int]], k: int) -> float:
    """Mean unbiased pass@k over the tasks with at least k judged samples (each from its own judged count)."""
    usable = [pass_at_k(judged, correct, k) for judged, correct in counts if judged >= k]
    return sum(usable) / len(usable) if usable else float("nan")
