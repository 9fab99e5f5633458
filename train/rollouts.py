"""Rollouts: how a batch of samples is made and scored, behind one interface that GRPO and evaluation consume.

Two kinds: completions scored by the scoring service (completions.py: one model turn per prompt, the service's
verdicts, the user's own reward functions beside them), and episodes scored by sessions (episode_rollouts.py, over
episodes.py: turns with tool calls in a jail, each session's verdict). Both hand back a `ScoredBatch`: in row order,
what was sampled, the reward trained on (None: nothing judged it, so it is masked), each component, and the time
spent waiting on scoring. The trainer (trainer.py) takes its advantages, its mask, its group log and its step
statistics from that batch alone, and evaluation (evaluate.py) its pass@k, so none of them knows which kind it runs.

TRL plugs a kind in through its public `rollout_func` and reward functions: the trainer calls `begin` with the
generation batch's rows, TRL calls `rollout` and then the reward functions, and the trainer reads `scored()`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from groupscore.train.batch import ScoredBatch

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from groupscore.train.config import TrainConfig
    from groupscore.train.prepare import Prepared
    from groupscore.train.scoring import ServiceScorer
    from groupscore.train.task import TaskRow


class Rollouts(Protocol):
    """One kind of rollouts, as GRPO's trainer and evaluation use it."""

    def reward_funcs(self) -> list[Callable[..., Any]]:
        """TRL's reward functions: they return the batch's rewards (TRL logs them; the trainer trains on
        `scored()`)."""
        ...

    def begin(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """The generation batch's dataset rows, before TRL generates for them."""
        ...

    def rollout(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        """TRL's `rollout_func`: the prompt and completion token ids (and the loss mask's `env_mask`) of `begin`'s
        rows."""
        ...

    def scored(self) -> ScoredBatch:
        """The batch the last rollout made, judged (after TRL called the reward functions)."""
        ...

    def sample(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        tasks: Sequence[TaskRow],
        *,
        n: int,
        temperature: float,
        max_new_tokens: int,
        seed: int,
        progress: str | None = None,
    ) -> ScoredBatch:
        """n samples of each task (a group each, in task order), judged: evaluation and the preflight."""
        ...


def session_task_dirs(config: TrainConfig, prepared: Prepared, tasks: Sequence[TaskRow]) -> list[str] | None:
    """The task folders an embedded service must be allowed to open, when the run's sessions live on it."""
    if config.env.sessions != "service" or not prepared.tool_format:
        return None
    from groupscore.train.env_tasks import task_dirs

    return task_dirs(list(tasks))


@contextmanager
def open_rollouts(config: TrainConfig, prepared: Prepared, scorer: ServiceScorer) -> Iterator[Rollouts]:
    """The run's rollouts: episodes against sessions on an environment taskset (in this process, or on the
    service at the scorer's address: `env.sessions`), else completions scored by the service. Every session they
    opened is closed when the run ends, however it ends."""
    if prepared.tool_format is None:
        from groupscore.train.completions import CompletionRollouts

        grpo = config.grpo
        yield CompletionRollouts(
            scorer,
            grpo.num_generations if grpo else 1,
            overlap=grpo.overlap_scoring if grpo else False,
            extra=list(prepared.reward_functions),
            service_weight=config.rewards.service_weight,
            task_columns={t.id: t.columns for t in prepared.train_tasks},  # the user's functions score training only
        )
        return
    from groupscore.train.episode_rollouts import EpisodeRollouts, open_episodes

    with open_episodes(config, prepared, scorer.urls) as runner:
        yield EpisodeRollouts(runner)
