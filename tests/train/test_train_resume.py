"""Run control on a real (tiny) run: an interrupted run goes on from its last checkpoint with --resume (the cold start
reused, GRPO from its saved step) and leaves what an uninterrupted run leaves (the logs, plots and summary cover every
step once); ties in checkpoint selection go to the later step; a finished run keeps the selected weights, not the
optimizer state; metrics reach tensorboard with report_to, and SFT, preflight and evaluation show progress bars."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("trl")
pytest.importorskip("tensorboard")

from groupscore.cli import main
from groupscore.train import grpo, pipeline
from groupscore.train.commands import train_command

TASKSETS = Path(__file__).resolve().parents[2] / "train" / "tasks"
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
sft: {{max_steps: 20, batch_size: 16, learning_rate: 3.0e-3}}
preflight: {{generations: 4, max_prompts: 8}}
grpo: {{num_generations: 4, prompts_per_step: 4, max_steps: 4, max_completion_length: 6, eval_every: 2, save_every: 2}}
# one token cannot write the gated \\boxed{{N}}: every held-out evaluation scores 0, a tie at every step
eval: {{samples: 2, k: [1, 2], max_prompts: 8, max_completion_length: 1}}
service:
  urls: [{url}]
  reward:
    components:
      - {{name: correct, weight: 1.0}}
      - {{name: format, verifier: format, weight: 0.0, gate: true, params: {{regex: '\\\\boxed\\{{\\d+\\}}'}}}}
"""
    )
    return path


def steps(path: Path) -> list[int]:
    return [json.loads(line)["step"] for line in path.read_text().splitlines()]


def test_an_interrupted_run_resumes_from_its_last_checkpoint(url, tmp_path, monkeypatch, capfd):
    config = write_config(tmp_path, url)
    run_dir = tmp_path / "run"
    original = grpo.RunCallback.on_step_end
    plotted = []
    plot_run = pipeline.plot_run

    def interrupted(self, args, state, control, **kwargs):
        if state.global_step == 3:  # after the step-2 checkpoint, before step 3 is saved
            raise KeyboardInterrupt
        return original(self, args, state, control, **kwargs)

    def recorded_plot(run_dir, metrics, evals):
        plotted.append(([m.step for m in metrics], [e.step for e in evals]))
        return plot_run(run_dir, metrics, evals)

    monkeypatch.setattr(grpo.RunCallback, "on_step_end", interrupted)
    monkeypatch.setattr(pipeline, "plot_run", recorded_plot)
    with pytest.raises(KeyboardInterrupt):
        train_command(config)
    first = capfd.readouterr()
    assert [p.name for p in (run_dir / "grpo").glob("checkpoint-*")] == ["checkpoint-2"]  # keep_checkpoints: 1
    assert steps(run_dir / "metrics.jsonl") == [1, 2]
    assert (run_dir / "checkpoints" / "best.json").exists()
    assert not (run_dir / "checkpoints" / "step-00000").exists()  # the starting model is not copied
    assert steps(run_dir / "groups.jsonl") == [1] * 4 + [2] * 4 + [3] * 4  # step 3 ran, its checkpoint did not
    for bar in ("sft:", "preflight:", "eval @ step 0:", "grpo:"):
        assert bar in first.err, bar  # tqdm bars go to stderr
    monkeypatch.setattr(grpo.RunCallback, "on_step_end", original)

    assert train_command(config, resume=True) == 0
    second = capfd.readouterr()
    assert "resume: the cold start of the interrupted run" in second.out
    assert "sft:" not in second.err  # not trained again
    # what an uninterrupted run leaves: every step and evaluation once, before the restart too
    assert steps(run_dir / "metrics.jsonl") == [1, 2, 3, 4]
    assert steps(run_dir / "groups.jsonl") == [1] * 4 + [2] * 4 + [3] * 4 + [4] * 4  # step 3 replaced, not twice
    assert steps(run_dir / "evals.jsonl") == [0, 2, 4]
    assert plotted == [([1, 2, 3, 4], [0, 2, 4])]
    summary = json.loads((run_dir / "summary.json").read_text())
    stage = summary["stages"]["grpo"]
    assert stage["steps"] == 4 and [e["step"] for e in stage["evals"]] == [0, 2, 4]
    # every evaluation ties at 0: the later step, as the summary says
    assert {e["pass@1"] for e in stage["evals"]} == {0.0} and stage["selected_step"] == 4
    assert "then to the later step" in stage["selected_by"]
    assert "(tied on held-out pass@1 with steps 0, 2)" in (run_dir / "summary.md").read_text()
    # disk: the selected weights and the logs; no resumable checkpoint (optimizer state) once every step ran
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["best.json", "step-00004"]
    assert list((run_dir / "grpo").glob("checkpoint-*")) == [] and (run_dir / "grpo" / "finished.json").exists()
    assert "deleted the resumable checkpoints" in second.out
    events = list((run_dir / "grpo" / "runs").rglob("events.out.tfevents.*"))
    assert events and list((run_dir / "sft" / "runs").rglob("events.out.tfevents.*"))
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tags = set()
    for event_file in events:
        accumulator = EventAccumulator(str(event_file))
        accumulator.Reload()
        tags |= set(accumulator.Tags()["scalars"])
    assert "train/kl" in tags and "train/service/zero_variance_share" in tags, sorted(tags)

    # a finished run has nothing left to resume from: one line saying so
    assert main(["train", str(config), "--resume"]) == 2
    assert "ran all its steps and kept no resumable checkpoint" in capfd.readouterr().err
