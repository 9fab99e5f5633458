"""The training half of `make demo`: cold start, preflight, GRPO through the service, evaluation, on 2 CPU cores; and
of `groupscore demo --env`: the same stages on episodes with tools (a calculator class in each session's jail)."""

from __future__ import annotations

from pathlib import Path

from groupscore.train.config import load_config
from groupscore.train.pipeline import run
from groupscore.train.summary import RunSummary

DEMO_CONFIG = Path(__file__).with_name("demo.yaml")
ENV_DEMO_CONFIG = Path(__file__).with_name("demo_env.yaml")  # `groupscore demo --env`: tools, multi-turn episodes
TASKSETS = Path(__file__).with_name("tasks")  # the bundled tasksets (package data), arith/ for this demo


def run_training_demo(run_dir: Path | str, service_urls: list[str] | None = None) -> RunSummary:
    """Run the bundled demo config into `run_dir`; returns the summary (also written to run_dir/summary.json).

    `service_urls`: score through these running services instead of starting one embedded for the run.
    """
    config = load_config(DEMO_CONFIG, overrides={"run_dir": str(Path(run_dir).resolve())})
    if service_urls:
        config = config.model_copy(update={"service": config.service.model_copy(update={"urls": list(service_urls)})})
    return run(config)


def run_env_training_demo(run_dir: Path | str) -> RunSummary:
    """Run the environment demo config into `run_dir`; returns the summary (also in run_dir/summary.json)."""
    return run(load_config(ENV_DEMO_CONFIG, overrides={"run_dir": str(Path(run_dir).resolve())}))
