"""End to end on the CPU: a tiny Llama cold-started by SFT, then GRPO through a real scoring service on loopback.

One seeded run (module fixture) is shared by the tests below; it takes about a minute on two cores.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

pytest.importorskip("trl")

from groupscore.service.embedded import start_embedded
from groupscore.train.commands import dry_run_report
from groupscore.train.config import TrainConfig
from groupscore.train.pipeline import run

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "tasks"  # deliberately bad rows
TASKSETS = Path(__file__).resolve().parents[2] / "train" / "tasks"  # the bundled tasksets
STEPS, PROMPTS, G = 20, 16, 8


def config_for(run_dir: Path, url: str, **changes) -> TrainConfig:
    raw = {
        "run_dir": run_dir,
        "seed": 0,
        "threads": 1,
        "model": {"tiny": {}},
        "taskset": {"train": TASKSETS / "arith" / "train.jsonl", "eval": TASKSETS / "arith" / "heldout.jsonl"},
        "service": {"urls": [url]},
        "sft": {"max_steps": 300, "batch_size": 32, "learning_rate": 3e-3},
        "preflight": {"generations": G, "max_prompts": 32},
        "grpo": {
            "num_generations": G,
            "prompts_per_step": PROMPTS,
            "beta": 0.04,
            "temperature": 0.9,
            "learning_rate": 3e-4,
            "max_steps": STEPS,
            "max_completion_length": 8,
            "eval_every": 10,
        },
        "eval": {"samples": 8, "k": [1, 4, 8], "temperature": 0.9},
        "merge": {"ratio": 0.7},
    }
    raw.update(changes)
    return TrainConfig.model_validate(raw)


@pytest.fixture(scope="module")
def service_url():
    with start_embedded(port=0, workers=1) as url:
        yield url


@pytest.fixture(scope="module")
def trained(service_url, tmp_path_factory):
    """The run folder and its summary.json (which the run's typed summary must equal)."""
    run_dir = tmp_path_factory.mktemp("train-run")
    summary = run(config_for(run_dir, service_url))
    text = (run_dir / "summary.json").read_text()
    assert text == json.dumps(summary.as_json(), indent=2)
    return run_dir, json.loads(text)


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_training_reward_rises_through_the_service(trained):
    run_dir, _ = trained
    rewards = [m["reward_mean"] for m in read_jsonl(run_dir / "metrics.jsonl")]
    assert len(rewards) == STEPS
    first, last = sum(rewards[:5]) / 5, sum(rewards[-5:]) / 5
    assert last > first + 0.05, (first, last)


def test_held_out_pass_at_1_rises_and_is_reported(trained):
    run_dir, summary = trained
    on_disk = json.loads((run_dir / "summary.json").read_text())
    assert on_disk["pass_at_1_before"] == summary["pass_at_1_before"]
    assert summary["pass_at_1_after"] > summary["pass_at_1_before"] + 0.03, summary["eval"]
    after = summary["eval"]["after"]
    assert after["pass@1"] <= after["pass@4"] <= after["pass@8"] <= 1.0  # pass@k grows with k


def test_group_logs_hold_advantages_equal_to_normalised_group_rewards(trained):
    run_dir, _ = trained
    groups = read_jsonl(run_dir / "groups.jsonl")
    assert len(groups) == STEPS * PROMPTS
    assert sorted({g["step"] for g in groups}) == list(range(1, STEPS + 1))
    for g in groups:
        assert len(g["rewards"]) == len(g["completions"]) == len(g["advantages"]) == G
        rewards = [r for r in g["rewards"] if r is not None]  # null: nothing judged it (infra_error), advantage 0
        n = len(rewards)
        assert g["infra_errors"] == G - n and all(a == 0.0 for r, a in zip(g["rewards"], g["advantages"]) if r is None)
        if n < 2:
            continue
        mean = sum(rewards) / n
        std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / (n - 1))  # the service's (and TRL's) sample std
        assert g["mean"] == pytest.approx(mean) and g["std"] == pytest.approx(std)
        judged = [a for r, a in zip(g["rewards"], g["advantages"]) if r is not None]
        assert judged == pytest.approx([(r - mean) / (std + 1e-4) for r in rewards], abs=1e-9)
        assert g["zero_variance"] == (max(rewards) == min(rewards))
        assert isinstance(g["prompt"], str) and g["task_id"].startswith("add-")


def test_metrics_plots_and_selection_are_written(trained):
    run_dir, summary = trained
    metrics = read_jsonl(run_dir / "metrics.jsonl")
    for key in ("reward_mean", "reward_std", "zero_variance_share", "kl", "completion_length", "reward_wait_s"):
        assert all(m[key] is not None for m in metrics), key
    assert metrics[-1]["kl"] > 0  # the policy moved away from the reference
    for name in ("reward", "kl", "pass_at_1"):
        png = Path(summary["plots"][name])
        assert png.parent == run_dir and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    grpo = summary["stages"]["grpo"]
    best = max(e["pass@1"] for e in grpo["evals"])
    assert [e["step"] for e in grpo["evals"]] == [0, 10, 20]
    assert next(e for e in grpo["evals"] if e["step"] == grpo["selected_step"])["pass@1"] == best
    assert (Path(summary["selected_model"]) / "config.json").exists()
    assert (Path(summary["stages"]["merge"]["model"]) / "config.json").exists()
    assert summary["stages"]["preflight"]["ok"] is True
    assert "held-out pass@1" in (run_dir / "summary.md").read_text()


def test_dry_run_checks_references_and_estimates_from_measured_steps(service_url, tmp_path, capsys):
    report = dry_run_report(config_for(tmp_path / "dry", service_url, merge=None), timing=True)
    out = capsys.readouterr().out
    assert report.ok and report.reference_failures == []
    assert report.rollouts == STEPS * PROMPTS * G and f"= {STEPS * PROMPTS * G}" in out
    assert report.estimate_s is not None and report.estimate_s > 0 and "estimated run time" in out


def test_dry_run_reports_a_reference_that_does_not_score_1(service_url, tmp_path, capsys):
    bad = FIXTURES / "wrong_reference.jsonl"
    config = config_for(tmp_path / "dry", service_url, taskset={"train": bad, "eval": bad})
    assert config.grpo is not None  # two rows: a step of two prompts, or prepare refuses the taskset as too small
    config = config.model_copy(update={"grpo": config.grpo.model_copy(update={"prompts_per_step": 2})})
    report = dry_run_report(config)
    assert not report.ok
    assert any(f.startswith("wrong: reference scored 0.0") for f in report.reference_failures)
    assert not any(f.startswith("right") for f in report.reference_failures)


def test_code_taskset_references_pass_their_hidden_tests_through_the_service(service_url):
    from groupscore.client.http import ScoreClient
    from groupscore.train.commands import check_references
    from groupscore.train.scoring import ServiceScorer, wire_group
    from groupscore.train.taskset import load_tasks

    with ScoreClient(service_url) as client:
        code = next(v for v in client.verifiers()["verifiers"] if v["name"] == "code")
    if not code["available"]:
        pytest.skip(f"code verifier unavailable here: {code['problem']}")
    tasks = load_tasks(TASKSETS / "code" / "train.jsonl") + load_tasks(TASKSETS / "code" / "heldout.jsonl")
    scorer = ServiceScorer([service_url])
    try:
        assert check_references(tasks, scorer) == []
        wrong = scorer.score_groups(
            [wire_group(t.id, t.item, ["```python\ndef f(x):\n    return None\n```"]) for t in tasks]
        )
        assert all(g.total.rewards[0] < 1.0 for g in wrong)
    finally:
        scorer.close()
