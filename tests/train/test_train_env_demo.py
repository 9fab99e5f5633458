"""`groupscore demo --env` end to end on the CPU: the tiny model learns to use a calculator's tools through
multi-turn GRPO on sessions (a cold start on reference episodes, then GRPO on whole episodes), and held-out pass@1
rises; groups.jsonl holds each trajectory."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("trl")

from groupscore.cli import main


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("demo-env")
    assert main(["demo", "--env", "--run-dir", str(run_dir)]) == 0
    return run_dir


def test_held_out_pass_at_1_rises_clearly(demo):
    summary = json.loads((demo / "summary.json").read_text())
    assert summary["pass_at_1_after"] >= summary["pass_at_1_before"] + 0.1, summary


def test_each_trajectory_is_logged_with_its_calls_results_and_verdict(demo):
    group = json.loads((demo / "groups.jsonl").read_text().splitlines()[0])
    trajectory = group["trajectories"][0]
    assert len(group["trajectories"]) == 8 and group["task_id"] and group["prompt"].startswith("<|user|>")
    assert {"messages", "tool_calls", "reward", "status", "components", "ended"} <= set(trajectory)
    roles = [m["role"] for g in [group] for t in g["trajectories"] for m in t["messages"]]
    assert "tool" in roles and "assistant" in roles


def test_the_step_metrics_say_how_long_the_sessions_took(demo):
    steps = [json.loads(line) for line in (demo / "metrics.jsonl").read_text().splitlines()]
    assert steps and all(0 < s["reward_wait_s"] <= s["reward_request_s"] for s in steps)
