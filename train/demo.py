"""The training half of `make demo`: cold start, preflight, GRPO through the service, evaluation, on 2 CPU cores."""

from __future__ import annotations

from pathlib import Path

from groupscore.train.config import load_config
from groupscore.train.pipeline import run

DEMO_CONFIG = Path(__file__).with_name("demo.yaml")


def run_training_demo(run_dir: Path | str) -> dict:
    """Run the bundled demo config into `run_dir`; returns the summary (also written to run_dir/summary.json)."""
    config = load_config(DEMO_CONFIG, overrides={"run_dir": str(Path(run_dir).resolve())})
    return run(config)
