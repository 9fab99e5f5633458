"""`groupscore eval`: a model over a taskset with the trainer's own evaluation; which tasks GRPO can learn from, every
rollout written, infra_error never counted as 0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import groupscore

from groupscore.train.batch import ScoredBatch
from groupscore.train.evaluate import summarize
from groupscore.train.task import TaskRow
from groupscore.train.taskset_eval import TasksetEval, report_text, task_verdict, write_outputs

DEMO_ENV = str(Path(__file__).resolve().parents[2] / "train" / "demo_env.yaml")


def test_a_task_is_learnable_only_when_its_judged_rollouts_differ():
    assert task_verdict([0.0, 1.0, None]) == "learnable"
    assert task_verdict([0.0, 0.0, None]) == "all-0"
    assert task_verdict([1.0, 1.0]) == "all-1"
    assert task_verdict([0.5, 0.5]) == "flat"
    assert task_verdict([None, None]) == "unjudged"
    assert task_verdict([0.3, 0.3 + 1e-12]) == "flat"  # float noise is no signal


def _batch() -> tuple[ScoredBatch, list[TaskRow]]:
    tasks = [TaskRow(f"t{i}", f"p{i}", None, {}) for i in range(3)]
    rewards = [1.0, 0.0, None, 0.0, 0.0, 0.0, 1.0, 1.0, None]
    statuses = [
        "correct",
        "incorrect",
        "infra_error",
        "incorrect",
        "incorrect",
        "incorrect",
        "correct",
        "correct",
        "infra_error",
    ]
    batch = ScoredBatch(
        [t.id for t in tasks for _ in range(3)],
        [t.prompt for t in tasks for _ in range(3)],
        [f"c{i}" for i in range(9)],
        rewards=rewards,
        group_size=3,
        statuses=statuses,
        components={"correct": rewards},
    )
    return batch, tasks


def test_the_outputs_keep_every_rollout_and_leave_infra_errors_out_of_the_numbers(tmp_path):
    batch, tasks = _batch()
    result = summarize(batch, tasks, 3, [1, 3])
    verdicts = {t.id: task_verdict(batch.rewards[rows]) for t, rows in zip(tasks, batch.groups())}
    report = TasksetEval(result, verdicts, [r for r in batch.rewards if r is not None], tmp_path / "out")
    write_outputs(report, batch, tasks)
    assert verdicts == {"t0": "learnable", "t1": "all-0", "t2": "all-1"}
    assert result.infra_errors == 2 and result.mean_reward == pytest.approx(3 / 7)
    assert result.pass_at[1] == pytest.approx((1 / 2 + 0 + 1) / 3)  # per task over its judged rollouts
    lines = [json.loads(line) for line in (tmp_path / "out" / "rollouts.jsonl").read_text().splitlines()]
    assert [(r["task_id"], r["rollout"], r["completion"], r["reward"], r["status"]) for r in lines[:3]] == [
        ("t0", 0, "c0", 1.0, "correct"),
        ("t0", 1, "c1", 0.0, "incorrect"),
        ("t0", 2, "c2", None, "infra_error"),
    ]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["infra_errors"] == 2 and summary["shares"]["learnable"] == pytest.approx(1 / 3)
    assert summary["per_task"][0] == {"id": "t0", "rewards": [1.0, 0.0, None], "verdict": "learnable"}
    assert (tmp_path / "out" / "learnable.txt").read_text() == "t0\n"
    text = report_text(report)
    assert "learnable 33%, all-0 33%, all-1 33%" in text and "infra_error rollouts: 2" in text
    assert "[0.0, 0.2) " in text and text.count("#") > 0


@pytest.mark.slow
def test_the_command_runs_a_model_over_an_environment_taskset_as_typed(tmp_path):
    out = tmp_path / "eval"
    done = groupscore("eval", DEMO_ENV, "--set", f"run_dir={tmp_path}", "-n", "3", "-k", "2", "--out", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "3 tasks x 2 rollouts: pass@1" in done.stdout and "for GRPO: learnable" in done.stdout
    lines = [json.loads(line) for line in (out / "rollouts.jsonl").read_text().splitlines()]
    assert len(lines) == 6 and all(line["trajectory"]["messages"] for line in lines)
    assert all(line["status"] for line in lines)  # every episode was judged by its session
    assert json.loads((out / "summary.json").read_text())["tasks"] == 3


def test_bad_arguments_are_one_line():
    done = groupscore("eval", DEMO_ENV, "-k", "0")
    assert done.returncode == 2 and done.stderr.strip() == "groupscore eval: --rollouts must be at least 1 (got 0)"
    done = groupscore("eval", "no/such/config.yaml")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and "no/such/config.yaml" in done.stderr


@pytest.mark.slow
def test_a_single_turn_taskset_writes_its_learnable_tasks_and_solved_rollouts_as_tasksets(tmp_path):
    from groupscore.train.taskset import load_tasks

    demo = str(Path(DEMO_ENV).with_name("demo.yaml"))
    out = tmp_path / "eval"
    done = groupscore("eval", demo, "--set", f"run_dir={tmp_path}", "-n", "6", "-k", "2", "--out", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [json.loads(line) for line in (out / "rollouts.jsonl").read_text().splitlines()]
    solved = [line for line in lines if line["reward"] == 1.0]
    accepted = load_tasks(out / "accepted.jsonl") if solved else []
    assert [t.id for t in accepted] == [f"{line['task_id']}/{line['rollout']}" for line in solved]
    assert [t.solution for t in accepted] == [line["completion"] for line in solved]
    learnable = (out / "learnable.txt").read_text().split()
    rows = [json.loads(line) for line in (out / "learnable.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == learnable and all(r["item"]["verifier"] == "math" for r in rows)
    assert all(r["prompt"].endswith("=") for r in rows)  # the taskset's own text, no template rendered into it
