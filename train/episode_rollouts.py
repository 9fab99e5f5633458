"""The `Rollouts` of an environment taskset: batches of episodes (episodes.py) against the run's sessions, in this
process or on the service, each episode's reward its session's verdict."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from groupscore.train.batch import ScoredBatch, check_rows
from groupscore.train.episodes import Episode, EpisodeRunner, LocalSessions, ServiceSessions

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from groupscore.train.config import TrainConfig
    from groupscore.train.prepare import Prepared
    from groupscore.train.task import TaskRow


@contextmanager
def open_episodes(config: TrainConfig, prepared: Prepared, urls: Sequence[str] = ()) -> Iterator[EpisodeRunner]:
    """The run's episode runner on an environment taskset, its sessions in this process (`env.sessions: local`) or
    on the service at `urls` (`service`); every session it opened is closed when the run ends, however it ends."""
    if prepared.tool_format is None:
        raise ValueError("episodes need an environment taskset (its tasks' tools and their tool-call format)")
    from groupscore.train.models import load_tokenizer

    tasks = prepared.train_tasks + prepared.eval_tasks
    sessions: LocalSessions | ServiceSessions
    if config.env.sessions == "service":
        sessions = ServiceSessions(urls, token=config.service.token)
    else:
        sessions = LocalSessions()
    runner = EpisodeRunner(
        sessions,
        [t.env for t in tasks],
        load_tokenizer(prepared.model_path),
        prepared.tool_format,
        config.env,
        {t.id: t.prompt for t in tasks},
    )
    try:
        yield runner
    finally:
        runner.close()
        sessions.close_all()


class EpisodeRollouts:
    """The `Rollouts` of an environment taskset: a group is G sessions of one task, the reward each session's verdict
    (`infra_error`: None, masked). TRL trains on the tokens the rollout returns with the tools' tokens masked
    (`env_mask`), so the loss covers the model's own tokens only."""

    def __init__(self, runner: EpisodeRunner) -> None:
        self.runner = runner
        self._rows: Sequence[Mapping[str, Any]] | None = None
        self._batch: ScoredBatch | None = None

    def reward_funcs(self) -> list[Callable[..., Any]]:
        return [self.session_verdict]

    def session_verdict(self, prompts: list[Any], completions: list[Any], **_kwargs: Any) -> list[float | None]:
        """TRL's reward function: each episode's verdict (None: nothing judged it)."""
        if self._batch is None or len(self._batch.rewards) != len(prompts):
            raise RuntimeError("TRL asked for rewards of a batch the episodes did not make")
        return list(self._batch.rewards)

    def begin(self, rows: Sequence[Mapping[str, Any]]) -> None:
        self._rows, self._batch = rows, None

    def rollout(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        rows = check_rows(self._rows, prompts)
        model = trainer.accelerator.unwrap_model(trainer.model)
        group = int(trainer.num_generations or 1)
        episodes, batch = self._run(
            model, [row["task_id"] for row in rows], group, trainer.temperature, trainer.state.global_step
        )
        self._batch = batch
        pad = self._pad_id()
        return {
            "prompt_ids": [e.prompt_ids for e in episodes],
            # an episode that ended before its first token (a session that could not open) still needs one token
            "completion_ids": [e.completion_ids or [pad] for e in episodes],
            "env_mask": [e.env_mask or [0] for e in episodes],
            "logprobs": None,
        }

    def scored(self) -> ScoredBatch:
        if self._batch is None:
            raise RuntimeError("no scored batch: TRL did not call the rollout function for these rows")
        batch, self._batch = self._batch, None
        return batch

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
        """n whole episodes of each task (the token budget is env.max_tokens, not max_new_tokens)."""
        import torch

        with torch.random.fork_rng(devices=[model.device] if model.device.type == "cuda" else []):
            torch.manual_seed(seed)
            _, batch = self._run(model, [t.id for t in tasks for _ in range(n)], n, temperature, seed)
        return batch

    def _run(
        self, model: PreTrainedModel, task_ids: list[str], group: int, temperature: float, seed: int
    ) -> tuple[list[Episode], ScoredBatch]:
        runner = self.runner
        before = runner.timing.sessions_s
        started = time.perf_counter()
        episodes = runner.run(model, task_ids, temperature, seed=seed)
        wall_s, sessions_s = time.perf_counter() - started, runner.timing.sessions_s - before
        return episodes, episodes_batch(episodes, group, wait_s=sessions_s, request_s=wall_s)

    def _pad_id(self) -> int:
        tokenizer = self.runner.tokenizer
        return int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id)


def episodes_batch(episodes: Sequence[Episode], group: int, wait_s: float, request_s: float) -> ScoredBatch:
    """Episodes as a scored batch: each one's reward its session's verdict (None: infra_error), its trajectory the
    sample. `wait_s`: the time spent on sessions (opening, tool calls, scoring, closing) of `request_s` in all."""
    names = sorted({n for e in episodes if e.verdict and e.verdict.components for n in e.verdict.components})
    return ScoredBatch(
        [e.task_id for e in episodes],
        [e.prompt for e in episodes],
        [e.log() for e in episodes],
        rewards=[e.reward for e in episodes],
        group_size=group,
        statuses=[e.verdict.status.value if e.verdict else None for e in episodes],
        components={
            name: [
                (e.verdict.components or {}).get(name) if e.verdict and e.reward is not None else None for e in episodes
            ]
            for name in names
        },
        wait_s=wait_s,
        request_s=request_s,
        samples_key="trajectories",
    )
