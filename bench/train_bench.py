"""Trainer benchmark: the share of GRPO step time spent waiting for rewards, with and without overlapped scoring.

The service runs embedded on loopback (its own processes). One tiny model is cold-started once; GRPO then runs
the same seeded steps twice: scoring started right after generation (overlapping the reference forward pass, the
default) and scoring started only when TRL calls the reward function. Steps 2.. are counted (step 1 warms up).

    .venv/bin/python bench/train_bench.py [--steps 30]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):  # the bench never needs the hub
        os.environ.setdefault(var, "1")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    from groupscore.service.embedded import start_embedded
    from groupscore.train.completions import CompletionRollouts
    from groupscore.train.config import load_config
    from groupscore.train.grpo import run_grpo
    from groupscore.train.observe import Monitor
    from groupscore.train.prepare import prepare
    from groupscore.train.scoring import ServiceScorer
    from groupscore.train.sft import cold_start

    scratch = Path(tempfile.mkdtemp(prefix="train-bench-"))
    config = load_config(ROOT / "train" / "demo.yaml", overrides={"run_dir": str(scratch), "threads": args.threads})
    prepared = prepare(config)  # builds the tiny model under run_dir/cache
    hardware, train_tasks, eval_tasks = prepared.hardware, prepared.train_tasks, prepared.eval_tasks
    model_path = str(cold_start(prepared.model_path, train_tasks, config.sft, hardware, scratch / "sft", config.seed))
    rows = []
    with start_embedded(port=0) as url:
        scorer = ServiceScorer([url], reward=config.service.reward)
        for overlap in (True, False):
            cfg = config.grpo.model_copy(update={"overlap_scoring": overlap, "eval_every": 10**6})
            started = time.perf_counter()
            outcome = run_grpo(
                model_path,
                train_tasks,
                eval_tasks,
                cfg,
                config.eval,
                hardware,
                CompletionRollouts(scorer, cfg.num_generations, overlap=overlap),
                scratch / f"grpo-{overlap}",
                config.seed,
                Monitor(config.monitor, emit=lambda _m: None),
                max_steps=args.steps,
            )
            steps = outcome.metrics[1:]
            step_s = sum(m.step_time_s for m in steps)
            rows.append(
                {
                    "mode": "overlapped (default)" if overlap else "not overlapped",
                    "steps": len(steps),
                    "step_s": statistics.median(m.step_time_s for m in steps),
                    "wait_share": sum(m.batch.reward_wait_s for m in steps) / step_s,
                    "wait_ms": 1000 * statistics.median(m.batch.reward_wait_s for m in steps),
                    "request_ms": 1000 * statistics.median(m.batch.reward_request_s for m in steps),
                    "wall_s": time.perf_counter() - started,
                }
            )
        scorer.close()
    load = os.getloadavg()[0]
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, load avg {load:.1f}; torch threads {args.threads}; "
        f"demo config: {config.grpo.prompts_per_step} prompts x {config.grpo.num_generations} generations per step, "
        f"composite reward (correct + format gate), service embedded on loopback"
    )
    print("| scoring | steps | median step | reward wait / step time | median wait | median request |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(
            f"| {r['mode']} | {r['steps']} | {r['step_s'] * 1000:.0f} ms | {r['wait_share']:.1%} | "
            f"{r['wait_ms']:.1f} ms | {r['request_ms']:.1f} ms |"
        )


if __name__ == "__main__":
    main()
