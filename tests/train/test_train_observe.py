"""Run health warnings fire when a failure mode starts (once), and the plots are real PNG files."""

from __future__ import annotations

import pytest

from groupscore.schema.wire import GroupResult
from groupscore.train.batch import batch_stats
from groupscore.train.completions import scored_groups
from groupscore.train.config import MonitorConfig
from groupscore.train.observe import Monitor, plot_run
from groupscore.train.summary import BatchStats, EvalRecord, EvalResult, StepMetrics


def monitor():
    messages = []
    return Monitor(
        MonitorConfig(kl_spike=1.0, kl_floor=1e-6, zero_variance_share=0.8, saturation=0.95, warmup_steps=2),
        emit=messages.append,
    ), messages


def test_kl_spike_warns_when_it_starts_and_again_after_it_cleared():
    m, messages = monitor()
    for step, kl in enumerate([0.1, 2.0, 3.0, 0.2, 1.5], 1):
        m.check(step, kl=kl)
    assert [w["step"] for w in m.warnings if w["kind"] == "kl_spike"] == [2, 5]
    assert len(messages) == 2 and "drifting" in messages[0]


def test_kl_collapse_is_only_a_problem_after_warm_up():
    m, _ = monitor()
    for step in (1, 2, 3):
        m.check(step, kl=0.0)
    assert [(w["kind"], w["step"]) for w in m.warnings] == [("kl_collapse", 3)]


def test_flat_groups_and_saturated_reward_warn():
    m, _ = monitor()
    m.check(1, zero_variance_share=0.5, reward_mean=0.5)
    assert m.warnings == []
    m.check(2, zero_variance_share=0.9, reward_mean=0.97)
    assert sorted(w["kind"] for w in m.warnings) == ["saturation", "zero_variance"]


def test_batch_stats_per_component():
    def stats(rewards, zero_variance=False):
        return {"rewards": rewards, "mean": 0.0, "std": 0.0, "advantages": [0.0] * 2, "zero_variance": zero_variance}

    groups = [
        GroupResult.model_validate(
            {
                "results": [{"reward": r, "status": s} for r, s in zip(rewards, statuses)],
                "total": stats(rewards, zero_variance=len(set(rewards)) == 1),
                "components": {"correct": stats(correct), "format": stats(format_)},
            }
        )
        for rewards, correct, format_, statuses in [
            ([1.0, 0.0], [1.0, 0.0], [1.0, 1.0], ["correct", "incorrect"]),
            ([0.0, 0.0], [0.0, 0.0], [1.0, 0.0], ["incorrect"] * 2),
        ]
    ]
    stats = batch_stats(scored_groups(groups, ["a", "a", "b", "b"], ["p"] * 4, ["c"] * 4))
    assert stats.reward_mean == 0.25 and stats.zero_variance_share == 0.5
    assert stats.components["correct"].mean == 0.25 and stats.components["format"].mean == 0.75
    flat = stats.as_json()  # metrics.jsonl's flat shape
    assert flat["reward_mean"] == 0.25 and flat["component/correct/mean"] == 0.25
    assert flat["component/format/std"] == pytest.approx(3**0.5 / 4)  # population std of 1, 1, 1, 0


def test_plots_are_png_files_in_the_run_folder(tmp_path):
    def batch(reward):
        return BatchStats(
            reward_mean=reward,
            reward_std=0.0,
            zero_variance_share=0.0,
            infra_errors=0,
            infra_error_share=0.0,
            reward_wait_s=0.0,
            reward_request_s=0.0,
        )

    def result(pass_at_1):
        return EvalResult(
            n=1, pass_at={1: pass_at_1}, mean_reward=pass_at_1, solvable_share=0.0, zero_variance_share=0.0
        )

    metrics = [StepMetrics(step=s, step_time_s=1.0, batch=batch(s / 10), kl=s / 100) for s in range(1, 6)]
    paths = plot_run(tmp_path, metrics, [EvalRecord(0, result(0.3)), EvalRecord(5, result(0.5))])
    assert set(paths) == {"reward", "kl", "pass_at_1"}
    for path in paths.values():
        assert path.startswith(str(tmp_path))
        with open(path, "rb") as png:
            assert png.read(8) == b"\x89PNG\r\n\x1a\n"


def test_every_process_part_joins_into_one_log_and_one_step_statistic():
    """Under several processes each holds whole groups; the group log and the step's statistics are of all of them."""
    from groupscore.train.batch import ScoredBatch, group_records

    def part(task: str, rewards: list) -> ScoredBatch:
        return ScoredBatch([task] * 2, ["p"] * 2, ["c"] * 2, rewards=rewards, group_size=2, components={"x": rewards})

    whole = ScoredBatch.joined([part("a", [1.0, 0.0]), part("b", [None, 1.0])])
    records = group_records(3, whole)
    assert [(r["group"], r["task_id"], r["rewards"]) for r in records] == [(0, "a", [1.0, 0.0]), (1, "b", [None, 1.0])]
    stats = batch_stats(whole)
    assert stats.reward_mean == pytest.approx(2 / 3) and stats.infra_errors == 1 and stats.zero_variance_share == 0.5
