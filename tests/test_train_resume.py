"""Run control on a real (tiny) run: an interrupted run goes on from its last checkpoint with --resume (the cold start
reused, GRPO from its saved step, the logs continued), metrics reach tensorboard with report_to, and SFT, preflight
and evaluation show progress bars."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("trl")
pytest.importorskip("tensorboard")

from groupscore.train import grpo
from groupscore.train.commands import train_command

TASKSETS = Path(__file__).resolve().parent.parent / "train" / "tasks"
pytestmark = pytest.mark.service(workers=1)


def write_config(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(
        f"""
run_dir: {tmp_path / "run"}
threads: 1
report_to: tensorboard
model: {{tiny: {{}}}}
taskset: {{train: {TASKSETS}/arith/train.jsonl, eval: {TASKSETS}/arith/heldout.jsonl}}
service: {{urls: [{url}]}}
sft: {{max_steps: 20, batch_size: 16, learning_rate: 3.0e-3}}
preflight: {{generations: 4, max_prompts: 8}}
grpo: {{num_generations: 4, prompts_per_step: 4, max_steps: 4, max_completion_length: 6, eval_every: 2, save_every: 2}}
eval: {{samples: 2, k: [1, 2], max_prompts: 8}}
"""
    )
    return path


def steps(path: Path) -> list[int]:
    return [json.loads(line)["step"] for line in path.read_text().splitlines()]


def test_an_interrupted_run_resumes_from_its_last_checkpoint(url, tmp_path, monkeypatch, capfd):
    config = write_config(tmp_path, url)
    run_dir = tmp_path / "run"
    original = grpo.RunCallback.on_step_end

    def interrupted(self, args, state, control, **kwargs):
        if state.global_step == 3:  # after the step-2 checkpoint, before step 3 is saved
            raise KeyboardInterrupt
        return original(self, args, state, control, **kwargs)

    monkeypatch.setattr(grpo.RunCallback, "on_step_end", interrupted)
    with pytest.raises(KeyboardInterrupt):
        train_command(config)
    first = capfd.readouterr()
    assert (run_dir / "grpo" / "checkpoint-2").is_dir() and steps(run_dir / "metrics.jsonl") == [1, 2]
    assert (run_dir / "checkpoints" / "best.json").exists()
    for bar in ("sft:", "preflight:", "eval @ step 0:", "grpo:"):
        assert bar in first.err, bar  # tqdm bars go to stderr
    monkeypatch.setattr(grpo.RunCallback, "on_step_end", original)

    assert train_command(config, resume=True) == 0
    second = capfd.readouterr()
    assert "resume: the cold start of the interrupted run" in second.out
    assert "sft:" not in second.err  # not trained again
    assert steps(run_dir / "metrics.jsonl") == [1, 2, 3, 4]  # continued, not restarted
    groups = [json.loads(line)["step"] for line in (run_dir / "groups.jsonl").read_text().splitlines()]
    assert sorted(set(groups)) == [1, 2, 3, 4]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stages"]["grpo"]["selected_step"] in (0, 2, 4)
    events = list((run_dir / "grpo" / "runs").rglob("events.out.tfevents.*"))
    assert events and list((run_dir / "sft" / "runs").rglob("events.out.tfevents.*"))
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tags = set()
    for event_file in events:
        accumulator = EventAccumulator(str(event_file))
        accumulator.Reload()
        tags |= set(accumulator.Tags()["scalars"])
    assert "train/kl" in tags and "train/service/zero_variance_share" in tags, sorted(tags)
