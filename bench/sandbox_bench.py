"""Sandbox throughput: isolated Python runs/s vs plain `subprocess` runs of the same program, same machine, same run.

    .venv/bin/python bench/sandbox_bench.py [--seconds 20] [--workers 2] [--write]

Both sides run the same interpreter (the one the jail uses) on the same small program with the same
parallelism; the sandbox side has the full policy (namespaces, mounts, seccomp, rlimits, cgroups).
`--write` replaces the "Sandbox" section of bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import resource
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from groupscore.sandbox import Limits, RunStatus, ensure_available, run, warm
from groupscore.sandbox import settings as sandbox_settings
from groupscore.sandbox.harness import cgroup_note
from groupscore.sandbox.toolchains import toolchain

PROGRAM = "import sys\nn = int(sys.stdin.readline())\nprint(sum(i * i for i in range(n)))\n"
STDIN = "1000\n"
EXPECTED = f"{sum(i * i for i in range(1000))}\n"


def plain_once(exe: str, path: str, *flags: str) -> None:
    out = subprocess.run([exe, *flags, path], input=STDIN.encode(), capture_output=True, timeout=10)
    assert out.stdout.decode() == EXPECTED, out


def plain_same_command(exe: str, path: str) -> None:
    plain_once(exe, path, "-s", "-B")  # what the jail runs


def plain_no_site(exe: str, path: str) -> None:
    # The host's site dirs (.pth files) are not mounted in the jail, which makes its interpreter start
    # cheaper; -S skips them on the host too, the stricter baseline.
    plain_once(exe, path, "-S", "-B")


def jailed_once(_: str, __: str) -> None:
    r = run({"main.py": PROGRAM}, stdin=STDIN, limits=Limits(wall_time_s=10))
    assert r.status is RunStatus.OK and r.stdout == EXPECTED, r


def with_warm(on: bool) -> None:
    os.environ["GROUPSCORE_SANDBOX_WARM"] = "1" if on else "0"
    sandbox_settings.reload()


def _cpu_s() -> float:
    """CPU seconds of this process and all reaped descendants (nsjail, the jail, the interpreter), and of the warm
    templates' runs (the templates' children, which the harness does not reap)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime + warm.cpu_seconds()


def rate(fn, exe: str, path: str, seconds: float, workers: int) -> tuple[float, float]:
    """(runs per second, CPU milliseconds per run)."""
    done, start, cpu0 = 0, time.monotonic(), _cpu_s()
    with ThreadPoolExecutor(workers) as ex:
        while time.monotonic() - start < seconds:
            list(ex.map(lambda _: fn(exe, path), range(workers * 4)))
            done += workers * 4
    return done / (time.monotonic() - start), (_cpu_s() - cpu0) * 1000 / done


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=12.0, help="per side, per round")
    ap.add_argument(
        "--workers",
        type=int,
        default=2 * (os.cpu_count() or 1),
        help="threads per side (default 2 per CPU: a jailed run spends part of its time waiting)",
    )
    ap.add_argument("--rounds", type=int, default=2, help="alternating rounds, to spread machine load over both")
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    ensure_available()
    exe = toolchain("python").executable
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "main.py")
        Path(path).write_text(PROGRAM)
        plain_runs, nosite_runs, jail_runs, nsjail_runs = [], [], [], []
        for _ in range(args.rounds):  # alternate, so a load spike on a shared machine hits every side
            plain_runs.append(rate(plain_same_command, exe, path, args.seconds, args.workers))
            nosite_runs.append(rate(plain_no_site, exe, path, args.seconds, args.workers))
            jail_runs.append(rate(jailed_once, exe, path, args.seconds, args.workers))
            with_warm(False)  # the path before warm runs: nsjail and a fresh interpreter each run
            nsjail_runs.append(rate(jailed_once, exe, path, args.seconds, args.workers))
            with_warm(True)

    def mean(xs: list[float]) -> float:
        return sum(xs) / len(xs)

    sides = (plain_runs, nosite_runs, jail_runs, nsjail_runs)
    plain, nosite, jailed, nsjailed = (mean([r for r, _ in runs]) for runs in sides)
    plain_cpu, nosite_cpu, jail_cpu, nsjail_cpu = (mean([c for _, c in runs]) for runs in sides)
    per_round = ", ".join(f"{j[0] / p[0]:.2f}" for j, p in zip(jail_runs, plain_runs, strict=True))
    load = os.getloadavg()[0]
    lines = [
        f"- machine: {platform.node()} ({platform.machine()}, {os.cpu_count()} CPUs, load avg {load:.1f} at end), "
        f"kernel {platform.release()}, cgroups: {cgroup_note()}",
        f"- program: small Python (read n, sum of squares), interpreter {exe}; {args.workers} workers, "
        f"{args.rounds} alternating rounds of {args.seconds:.0f}s per side",
        f"- runs/s: plain subprocess (same command) {plain:.1f}; plain with -S (no site dirs) {nosite:.1f}; "
        f"sandbox (full policy, warm Python runs: {warm.note()}) {jailed:.1f}; sandbox through nsjail "
        f"(GROUPSCORE_SANDBOX_WARM=0) {nsjailed:.1f}",
        f"- **ratio sandbox/plain {jailed / plain:.2f}** (per round {per_round}), sandbox/plain -S "
        f"{jailed / nosite:.2f} (target >= 0.80); through nsjail {nsjailed / plain:.2f} and {nsjailed / nosite:.2f}",
        f"- CPU per run (harness + every process it started, warm templates' runs included): plain {plain_cpu:.1f} ms, "
        f"plain -S {nosite_cpu:.1f} ms, sandbox {jail_cpu:.1f} ms, through nsjail {nsjail_cpu:.1f} ms (if CPU were "
        f"the only limit: ratios {plain_cpu / jail_cpu:.2f}, {nosite_cpu / jail_cpu:.2f}; through nsjail "
        f"{plain_cpu / nsjail_cpu:.2f})",
    ]
    print("\n".join(lines))
    if args.write:
        write_section("\n".join(lines))
    return 0


def write_section(body: str) -> None:
    path = Path(__file__).with_name("RESULTS.md")
    text = path.read_text() if path.exists() else "# Benchmark results\n"
    note = (
        "Why the jail can beat plain: the host interpreter's site dirs (here with .pth start-up hooks) are not "
        "mounted in the jail, so its interpreter starts cheaper; `-S` takes that away from the plain side, "
        "the stricter baseline. Runs overlap their waits (namespace and cgroup set-up), hence 2 workers per "
        "CPU for every side. The CPU line is what a saturated machine would see. Numbers from a shared, "
        "loaded machine: rerun on a quiet one."
    )
    section = f"## Sandbox\n\nCommand: `.venv/bin/python bench/sandbox_bench.py --write`\n\n{body}\n\n{note}\n"
    if re.search(r"^## Sandbox\n", text, flags=re.M):
        text = re.sub(r"^## Sandbox\n.*?(?=^## |\Z)", section + "\n", text, flags=re.M | re.S)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text)


if __name__ == "__main__":
    sys.exit(main())
