"""Sandbox throughput per language: isolated runs/s against a plain subprocess of the same toolchain, same program,
same machine, same parallelism, alternating rounds.

    .venv/bin/python bench/language_bench.py [--seconds 5] [--rounds 2] [--workers 4] [--languages go,java,...]

Both sides run the same command (the jail's default: node's heap flag, the JVM's settings, the compiled program) on
the same small program (read n, print the sum of squares below it). Compiled languages are compiled once before
timing on both sides (the sandbox's compile cache, and one host compile): the rate is of runs, as a code item's tests
see them. Prints a Markdown table (bench/RESULTS.md "Sandbox: per language").
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from groupscore.sandbox import Limits, RunStatus, ensure_available, policy_for, run
from groupscore.sandbox.harness import cgroup_note
from groupscore.sandbox.languages import MAIN_FILE, SPECS, TS_GLOBALS, run_argv
from groupscore.sandbox.toolchains import toolchain

N = 1000
EXPECTED = f"{sum(i * i for i in range(N))}\n"
PROGRAMS = {
    "python": "import sys\nn = int(sys.stdin.readline())\nprint(sum(i * i for i in range(n)))\n",
    "c": '#include <stdio.h>\nint main(void){long n,s=0;scanf("%ld",&n);\n'
    'for(long i=0;i<n;i++)s+=i*i;printf("%ld\\n",s);}\n',
    "javascript": "const n = Number(require('fs').readFileSync(0, 'utf8'));\nlet s = 0;\n"
    "for (let i = 0; i < n; i++) s += i * i;\nconsole.log(s);\n",
    "typescript": "const n: number = Number(require('fs').readFileSync(0, 'utf8'));\nlet s = 0;\n"
    "for (let i = 0; i < n; i++) s += i * i;\nconsole.log(s);\n",
    "java": "import java.util.Scanner;\npublic class Main { public static void main(String[] a) {\n"
    "  long n = new Scanner(System.in).nextLong(), s = 0; for (long i = 0; i < n; i++) s += i * i;\n"
    "  System.out.println(s); } }\n",
    "go": 'package main\nimport "fmt"\nfunc main() { var n, s int64; fmt.Scan(&n)\n'
    "  for i := int64(0); i < n; i++ { s += i * i }\n  fmt.Println(s) }\n",
    "rust": "use std::io::Read;\nfn main() { let mut t = String::new();\n"
    "  std::io::stdin().read_to_string(&mut t).unwrap();\n"
    '  let n: i64 = t.trim().parse().unwrap(); let s: i64 = (0..n).map(|i| i * i).sum(); println!("{}", s); }\n',
    "bash": "read -r n\ns=0\nfor ((i = 0; i < n; i++)); do s=$((s + i * i)); done\necho $s\n",
}
# How the plain side builds the same artifact on the host (the jail's compile commands write to /work).
HOST_BUILD = {
    "c": lambda d: ["gcc", "-O2", "-o", f"{d}/prog", f"{d}/main.c"],
    "typescript": lambda d: [
        "tsc",
        "--target",
        "es2022",
        "--lib",
        "es2022",
        "--outDir",
        d,
        f"{d}/main.ts",
        f"{d}/g.ts",
    ],
    "java": lambda d: ["sh", "-c", f"cd {d} && javac -d classes Main.java && jar cf prog.jar -C classes ."],
    "go": lambda d: ["sh", "-c", f"cd {d} && GOCACHE={d}/.gocache go build -o prog main.go"],
    "rust": lambda d: ["/usr/bin/rustc", "-O", "-o", f"{d}/prog", f"{d}/main.rs"],
}


def plain_argv(language: str, folder: str) -> list[str]:
    argv = run_argv(toolchain(language), MAIN_FILE[language], Limits())
    # The jail's command, with the work dir's files found in `folder` (cwd) instead.
    return [a.replace("/work/", f"{folder}/") for a in argv]


def plain_env(language: str, folder: str) -> dict[str, str]:
    """The jail's environment (not ours: NODE_EXTRA_CA_CERTS alone makes every node start read a CA bundle)."""
    pairs = (e.split("=", 1) for e in policy_for(language).env)
    return {k: v.replace("/work", folder) for k, v in pairs}


def plain_once(argv: list[str], folder: str, env: dict[str, str]) -> None:
    out = subprocess.run(argv, input=f"{N}\n".encode(), capture_output=True, timeout=30, cwd=folder, env=env)
    assert out.stdout.decode() == EXPECTED, (argv, out)


def jailed_once(language: str) -> None:
    r = run({MAIN_FILE[language]: PROGRAMS[language]}, language=language, stdin=f"{N}\n", limits=Limits(wall_time_s=30))
    assert r.status is RunStatus.OK and r.stdout == EXPECTED, r


def rate(fn, seconds: float, workers: int) -> float:
    done, start = 0, time.monotonic()
    with ThreadPoolExecutor(workers) as ex:
        while time.monotonic() - start < seconds:
            list(ex.map(lambda _: fn(), range(workers * 2)))
            done += workers * 2
    return done / (time.monotonic() - start)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5.0, help="per side, per round")
    ap.add_argument("--rounds", type=int, default=2, help="alternating rounds")
    ap.add_argument("--workers", type=int, default=2 * (os.cpu_count() or 1))
    ap.add_argument("--languages", default=",".join(PROGRAMS))
    args = ap.parse_args()
    ensure_available()
    rows = []
    for language in args.languages.split(","):
        with tempfile.TemporaryDirectory() as folder:
            Path(folder, MAIN_FILE[language]).write_text(PROGRAMS[language])
            Path(folder, "g.ts").write_text(TS_GLOBALS)
            if language in HOST_BUILD:
                subprocess.run(HOST_BUILD[language](folder), check=True, capture_output=True)
            jailed_once(language)  # the sandbox's compile, cached from here on
            argv, env = plain_argv(language, folder), plain_env(language, folder)
            plain_once(argv, folder, env)
            plains, jails = [], []
            for _ in range(args.rounds):
                plains.append(rate(lambda a=argv, f=folder, e=env: plain_once(a, f, e), args.seconds, args.workers))
                jails.append(rate(lambda lang=language: jailed_once(lang), args.seconds, args.workers))
        plain, jail = sum(plains) / len(plains), sum(jails) / len(jails)
        compiled = "yes (cached)" if SPECS[language].compiled else "no"
        rows.append(f"| {language} | {compiled} | {plain:.1f} | {jail:.1f} | **{jail / plain:.2f}** |")
        print(rows[-1], flush=True)
    print(
        f"\n{platform.node()} ({platform.machine()}, {os.cpu_count()} CPUs, load avg {os.getloadavg()[0]:.1f} at end), "
        f"cgroups: {cgroup_note()}; {args.workers} workers, {args.rounds} alternating rounds of {args.seconds:.0f}s "
        f"per side; tools: {shutil.which('node')}, {toolchain('java').version}, {toolchain('go').version}, "
        f"{toolchain('rust').version}"
    )
    print("| language | compile step | plain runs/s | sandbox runs/s | ratio |")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
