"""What GRPO keeps on disk between steps and after them: the best checkpoint so far (`checkpoints/`, `best.json`), the
held-out evaluations (`evals.jsonl`), TRL's resumable checkpoints (`grpo/checkpoint-N`: weights and optimizer state,
the newest `grpo.keep_checkpoints`, deleted once every step ran unless `grpo.keep_checkpoints_after_run`), and what a
resumed run reloads of the steps before its restart."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from groupscore.train.observe import keep_steps_upto
from groupscore.train.summary import EvalRecord, StepMetrics


@dataclass
class Checkpoint:
    step: int
    path: Path
    record: EvalRecord


BEST_FILE = "best.json"
EVALS_FILE = "evals.jsonl"  # every held-out evaluation during GRPO, one a line
FINISHED_FILE = "finished.json"  # under run_dir/grpo: GRPO ran all its steps (and what it kept)


def restored_best(run_dir: Path) -> Checkpoint | None:
    """The best checkpoint an interrupted run kept (its held-out numbers from best.json), if it is all there."""
    saved = run_dir / "checkpoints" / BEST_FILE
    if not saved.exists():
        return None
    record = json.loads(saved.read_text())
    path = Path(record.get("path") or run_dir / "checkpoints" / f"step-{record['step']:05d}")
    if path.is_relative_to(run_dir / "checkpoints") and not path.exists():  # else: the starting model (a hub id too)
        return None
    return Checkpoint(record["step"], path, EvalRecord.from_json(record))


@dataclass
class RunHistory:
    """What an interrupted run logged up to the checkpoint it resumes from; later records are dropped from the logs
    (the restarted steps write them again, once)."""

    metrics: list[StepMetrics]
    evals: list[EvalRecord]

    @classmethod
    def reload(cls, run_dir: Path, step: int, main: bool = True) -> RunHistory:
        logs = {name: run_dir / name for name in ("metrics.jsonl", "groups.jsonl", EVALS_FILE)}
        kept = {name: keep_steps_upto(path, step, rewrite=main) for name, path in logs.items()}
        return cls(
            metrics=[StepMetrics.from_json(r) for r in kept["metrics.jsonl"]],
            evals=[EvalRecord.from_json(r) for r in kept[EVALS_FILE]],
        )


def checkpoint_step(checkpoint: str) -> int:
    """The global step a TRL checkpoint folder was saved at."""
    state = Path(checkpoint) / "trainer_state.json"
    if state.exists():
        return int(json.loads(state.read_text())["global_step"])
    return int(Path(checkpoint).name.rsplit("-", 1)[1])


def drop_resumable_checkpoints(out_dir: Path) -> int:
    """Delete TRL's resumable checkpoints (weights, optimizer state, RNG) under out_dir; returns the bytes freed."""
    freed = 0
    for folder in sorted(out_dir.glob("checkpoint-*")):
        if folder.is_dir():
            freed += sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
            shutil.rmtree(folder, ignore_errors=True)
    return freed


def last_checkpoint(out_dir: Path) -> str | None:
    """TRL's newest resumable checkpoint (checkpoint-N) under the GRPO output folder."""
    from transformers.trainer_utils import get_last_checkpoint

    return get_last_checkpoint(str(out_dir)) if out_dir.is_dir() else None
