"""GRPO on environment episodes: TRL's GRPOTrainer with our multi-turn rollouts (episodes.py) as its rollout function,
and held-out pass@1 over whole episodes.

A group is G sessions of one task; the reward is each session's verdict. TRL trains on the tokens the rollout returns
with the tools' tokens masked (`env_mask`), so the loss covers the model's own tokens only. Advantages are the
group's, computed over the judged episodes as the service computes them; an `infra_error` episode gets advantage 0
and no loss at all, as a single item's infra_error does. Each trajectory goes to groups.jsonl.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

import torch
from trl import GRPOTrainer

from groupscore.train.episodes import Episode, EpisodeRunner
from groupscore.train.observe import JsonlWriter
from groupscore.train.summary import BatchStats, Spread
from groupscore.train.user_rewards import group_advantages


def session_verdict(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
    """TRL's reward function: each episode's verdict, carried in from the rollout (None: infra_error, masked)."""
    rewards: list[float | None] = kwargs.get("episode_reward") or [None] * len(prompts)
    return rewards


class EnvGRPOTrainer(GRPOTrainer):
    """GRPOTrainer whose rollouts are episodes against sessions and whose advantages are the groups' verdicts'."""

    def __init__(self, *args: Any, runner: EpisodeRunner, group_log: JsonlWriter, **kwargs: Any) -> None:
        os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # its rollout function is how episodes plug in
        # TRL's annotations leave out that the rollout function may be a bound method
        super().__init__(*args, reward_funcs=[session_verdict], rollout_func=self._rollout, **kwargs)  # type: ignore[misc]
        self.runner = runner
        self.group_log = group_log
        self.last_batch_stats: BatchStats | None = None
        self._task_ids: list[str] = []
        self._episodes: list[Episode] = []

    def _rollout(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        model = self.accelerator.unwrap_model(self.model)
        before = self.runner.timing.sessions_s
        started = time.perf_counter()
        episodes = self.runner.run(model, self._task_ids, self.temperature, seed=self.state.global_step)
        self._episodes = episodes
        self._timing = (time.perf_counter() - started, self.runner.timing.sessions_s - before)
        return {
            "prompt_ids": [e.prompt_ids for e in episodes],
            # an episode that ended before its first token (a session that could not open) still needs one token
            "completion_ids": [e.completion_ids or [self._pad_id()] for e in episodes],
            "env_mask": [e.env_mask or [0] for e in episodes],
            "logprobs": None,
            "episode_reward": [e.reward for e in episodes],
        }

    def _pad_id(self) -> int:
        tokenizer = self.runner.tokenizer
        return int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id)

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        self._task_ids = [row["task_id"] for row in inputs]
        output = super()._generate_and_score_completions(inputs)
        g = int(self.num_generations or 1)
        rewards = [e.reward for e in self._episodes]
        groups = [group_advantages(rewards[i : i + g]) for i in range(0, len(rewards), g)]
        advantages = [a for values, _ in groups for a in values]
        output["advantages"] = torch.tensor(
            advantages, dtype=output["advantages"].dtype, device=output["advantages"].device
        )
        keep = torch.tensor([0 if r is None else 1 for r in rewards], device=output["completion_mask"].device)
        output["completion_mask"] = output["completion_mask"] * keep.to(output["completion_mask"].dtype).unsqueeze(1)
        loss_mask = (
            output["completion_mask"] * output["tool_mask"] if "tool_mask" in output else output["completion_mask"]
        )
        output["num_items_in_batch"] = self.accelerator.gather(loss_mask.sum()).sum()
        step = self.state.global_step + 1
        if self.accelerator.is_main_process:
            write_episode_log(self.group_log, step, self._episodes, g, advantages, [flat for _, flat in groups])
        wall_s, sessions_s = self._timing
        self.last_batch_stats = episode_stats(self._episodes, [flat for _, flat in groups], wall_s, sessions_s)
        return output


def write_episode_log(
    log: JsonlWriter, step: int, episodes: list[Episode], g: int, advantages: list[float], flat: list[bool]
) -> None:
    """One line per group: the task, its prompt, each trajectory (messages, tool calls, observations, reward,
    components, status) and the advantages trained on."""
    for index in range(0, len(episodes), g):
        group = episodes[index : index + g]
        judged = [e.reward for e in group if e.reward is not None]
        log.write(
            {
                "step": step,
                "group": index // g,
                "task_id": group[0].task_id,
                "prompt": group[0].prompt,
                "trajectories": [e.log() for e in group],
                "rewards": [e.reward for e in group],
                "statuses": [e.verdict.status.value if e.verdict else None for e in group],
                "mean": statistics.fmean(judged) if judged else None,
                "std": statistics.stdev(judged) if len(judged) > 1 else 0.0,
                "advantages": advantages[index : index + g],
                "zero_variance": flat[index // g],
                "infra_errors": len(group) - len(judged),
            }
        )


def episode_stats(episodes: list[Episode], flat: list[bool], wall_s: float, sessions_s: float) -> BatchStats:
    """The batch's reward spread over judged episodes, per checker too; `reward_wait_s` is the time the rollout
    waited on sessions (opening, tool calls, scoring, closing), `reward_request_s` the rollout's wall time."""
    judged = [e for e in episodes if e.reward is not None]
    rewards = [e.reward for e in judged if e.reward is not None]
    names = sorted({name for e in judged if e.verdict and e.verdict.components for name in e.verdict.components})
    components = {
        name: _spread([e.verdict.components[name] for e in judged if e.verdict and e.verdict.components])
        for name in names
    }
    infra = len(episodes) - len(judged)
    spread = _spread(rewards)
    return BatchStats(
        reward_mean=spread.mean,
        reward_std=spread.std,
        zero_variance_share=sum(flat) / len(flat) if flat else 0.0,
        infra_errors=infra,
        infra_error_share=infra / len(episodes) if episodes else 0.0,
        reward_wait_s=round(sessions_s, 3),
        reward_request_s=round(wall_s, 3),
        components=components,
    )


def _spread(values: list[float]) -> Spread:
    return Spread(statistics.fmean(values), statistics.pstdev(values)) if values else Spread(float("nan"), float("nan"))
