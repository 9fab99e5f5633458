"""Multi-turn GRPO's step time and the share of it spent waiting on sessions (opening, tool calls, scoring,
closing), for the environment demo (`groupscore demo --env`) or any run folder of an environment taskset.

    flock /tmp/bench.lock .venv/bin/python bench/env_train_bench.py [--run-dir DIR] [--reuse] [--json out.json]

Without --reuse it runs the demo into DIR first; with it, it reads DIR's metrics.jsonl and summary.json as they are.
Per GRPO step, `reward_request_s` is the rollout's wall time and `reward_wait_s` the part of it the trainer waited on
sessions (train/episode_rollouts.py): generation is the rest of the rollout, the optimizer step the rest of
the step.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any


def summarize(run_dir: Path) -> dict[str, Any]:
    steps = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    summary = json.loads((run_dir / "summary.json").read_text())
    step_s = [s["step_time_s"] for s in steps]
    rollout_s = [s["reward_request_s"] for s in steps]
    sessions_s = [s["reward_wait_s"] for s in steps]
    return {
        "steps": len(steps),
        "step_time_s_median": round(statistics.median(step_s), 2),
        "rollout_s_median": round(statistics.median(rollout_s), 2),
        "sessions_wait_s_median": round(statistics.median(sessions_s), 2),
        "sessions_wait_share_of_step": round(sum(sessions_s) / sum(step_s), 3),
        "sessions_wait_share_of_rollout": round(sum(sessions_s) / sum(rollout_s), 3),
        "pass_at_1_before": summary.get("pass_at_1_before"),
        "pass_at_1_after": summary.get("pass_at_1_after"),
        "run_seconds": summary.get("seconds"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", type=Path, default=Path("runs/bench-env"))
    parser.add_argument("--reuse", action="store_true", help="read the run folder as it is; run nothing")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    started = time.perf_counter()
    if not args.reuse:
        from groupscore.demo import run_env_demo

        run_env_demo(args.run_dir)
    numbers = {
        **summarize(args.run_dir),
        "wall_s": round(time.perf_counter() - started, 1),
        "load_average": os.getloadavg(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
    }
    print(json.dumps(numbers, indent=2))
    if args.json:
        args.json.write_text(json.dumps(numbers, indent=2))


if __name__ == "__main__":
    main()
