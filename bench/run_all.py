"""Run every benchmark in bench/, one after the other, each in its own process (`make bench`).

Each script prints its own numbers; those that can write their section of bench/RESULTS.md are asked to.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
RUNS = [
    ["math_bench.py"],
    ["workers_bench.py"],
    ["sandbox_bench.py", "--write"],
    ["humaneval_bench.py", "--write"],
    ["service_bench.py"],
    ["train_bench.py"],
]


def main() -> int:
    failed = []
    for script, *args in RUNS:
        print(f"\n===== {script} {' '.join(args)}", flush=True)
        started = time.perf_counter()
        code = subprocess.call([sys.executable, str(BENCH / script), *args], cwd=BENCH.parent)
        print(f"===== {script}: exit {code} after {time.perf_counter() - started:.0f} s", flush=True)
        if code:
            failed.append(script)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
