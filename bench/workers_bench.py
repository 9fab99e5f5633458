"""The runtime around the verifiers: bounded-call overhead, kill-and-replace, pool start, and `groupscore score`.

    .venv/bin/python bench/workers_bench.py [--lines 64000]

- run_bounded round trip for a trivial function (the fixed cost the math verifier pays per sympy step);
- a call that overruns: how long until the next call succeeds on the replacement worker;
- a cold pool: template start with the math verifier's modules, then a worker forked from it;
- the CPU cost of one JSONL line in a batch worker (parse, validate, score, write its record);
- `groupscore score` on a generated JSONL of RL-batch items (1 and 2 workers): wall time with start-up, and the
  steady rate the command reports.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import roundtrip_us

from groupscore.bounded.workers import BudgetExceeded, WorkerPool

MATH_MODULES = ["groupscore.verifiers.math.verify", "groupscore.verifiers.math.symbolic"]


def rl_lines(count: int, seed: int = 3) -> list[str]:
    """GRPO-like items: 16 completions per problem, integer answers, repeats within a group."""
    rng = random.Random(seed)
    lines = []
    while len(lines) < count:
        gold = rng.randint(2, 9999)
        finals = [gold, gold, gold + 1, gold - 1, 2 * gold, f"{gold:,}"]
        for k in range(16):
            final = rng.choice(finals)
            completion = "Let me work through this step by step. " * 20 + (
                f"So the answer is $\\boxed{{{final}}}$." if k % 2 else f"#### {final}"
            )
            lines.append(
                json.dumps({"id": len(lines), "verifier": "math", "completion": completion, "answer": str(gold)})
            )
    return lines[:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=64_000)
    args = parser.parse_args()
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"load average {os.getloadavg()[0]:.1f}"
    )

    started = time.perf_counter()
    pool = WorkerPool(size=2)
    pool.warm_up(MATH_MODULES)
    print(f"cold pool (template imports the math verifier, 2 workers forked): {time.perf_counter() - started:.2f} s")

    p50, p99 = roundtrip_us(pool)
    print(f"run_bounded round trip: p50 {p50:.0f} us, p99 {p99:.0f} us")

    recoveries = []
    for _ in range(10):
        try:
            pool.run(time.sleep, 10.0, timeout_s=0.1)
        except BudgetExceeded:
            t0 = time.perf_counter()
            pool.run(abs, -1, timeout_s=5)
            recoveries.append(time.perf_counter() - t0)
    print(
        f"after a kill, next call done in: median {1e3 * statistics.median(recoveries):.1f} ms, "
        f"max {1e3 * max(recoveries):.1f} ms"
    )
    pool.shutdown()

    # CPU per item of what a batch worker does for one JSONL line (parse, validate, score, write the record): on a
    # shared machine this is steadier than wall time, which depends on the share of a core the process gets.
    from groupscore import score as score_cli

    lines = [(number, line.encode()) for number, line in enumerate(rl_lines(6400, seed=4), start=1)]
    score_cli._score_lines(None, lines[:16])  # loads the verifier (and starts its bounded pool) outside the clock
    cpu_started, wall_started = time.process_time(), time.perf_counter()
    score_cli._score_lines(None, lines)
    cpu_us = 1e6 * (time.process_time() - cpu_started) / len(lines)
    wall_us = 1e6 * (time.perf_counter() - wall_started) / len(lines)
    print(
        f"one JSONL line through a batch worker: {cpu_us:.0f} us CPU, {wall_us:.0f} us wall "
        f"({1e6 / cpu_us:.0f} lines/s per core if the core were ours)"
    )

    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "items.jsonl"
        source.write_text("\n".join(rl_lines(args.lines)) + "\n")
        for workers in (1, 2):
            t0 = time.perf_counter()
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "groupscore",
                    "score",
                    str(source),
                    "-o",
                    str(Path(folder) / "out.jsonl"),
                    "-j",
                    str(workers),
                    "--no-progress",
                ],
                capture_output=True,
                text=True,
            )
            wall = time.perf_counter() - t0
            print(
                f"groupscore score, {args.lines} lines, -j {workers}: {wall:.1f} s wall with start-up "
                f"({args.lines / wall:.0f} items/s); {done.stderr.strip().splitlines()[-1]}"
            )


if __name__ == "__main__":
    main()
