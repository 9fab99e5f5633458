"""The one-shot `groupscore score`: wall time on tiny inputs, this checkout side by side with an earlier commit.

    .venv/bin/python bench/cli_bench.py [--runs 5] [--baseline be62d36]

Cases: an empty file; one numeric math item (the fast path decides it, so no sympy is needed); one symbolic math item
(`\\lfloor 3.5 \\rfloor` against 3: the sympy step runs); one format item. Each run is `python -m groupscore score
FILE -o OUT --no-progress`. Both trees are copies (the baseline `git archive`d, this checkout's package folders
copied), put first on PYTHONPATH through a `groupscore` package folder of links that mirrors pyproject's package-dir
(the venv's editable install finds /work/main only after PYTHONPATH). Each tree is timed twice: with its modules
compiled (`compileall`, as an installed package has them) and without (this environment sets
PYTHONDONTWRITEBYTECODE=1, so `.venv/bin/groupscore` compiles groupscore's sources on every run: that is how the
issue's "~1.0 s and ~1.7 s" were measured). All four variants run interleaved, case by case, so the machine's load
hits them alike; the median of --runs is reported. Last, which heavy modules the CLI's own process imports.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {
    "verifiers": "verifiers",
    "sandbox": "sandbox",
    "service": "service",
    "train": "train",
    "testing": "testing",
}  # groupscore.<name> -> folder; groupscore itself is cli/
HEAVY = ("sympy", "latex2sympy2_extended", "fastapi", "uvicorn", "torch", "transformers", "numpy")
CASES = {
    "empty file": [],
    "1 numeric math item": [
        {"id": 1, "verifier": "math", "completion": "So the answer is \\boxed{42}.", "answer": "42"}
    ],
    "1 symbolic math item": [
        {"id": 1, "verifier": "math", "completion": "\\boxed{\\lfloor 3.5 \\rfloor}", "answer": "3", "timeout_s": 60}
    ],
    "1 format item": [
        {"id": 1, "verifier": "format", "completion": "<think>4</think><answer>4</answer>", "tags": ["think", "answer"]}
    ],
}


def package_tree(source: Path, into: Path) -> Path:
    """A folder to put on PYTHONPATH whose `groupscore` package is `source`'s cli/ with the other parts beside it."""
    pkg = into / "groupscore"
    pkg.mkdir(parents=True)
    for entry in (source / "cli").iterdir():
        (pkg / entry.name).symlink_to(entry)
    for name, folder in PACKAGES.items():
        (pkg / name).symlink_to(source / folder)
    return into


def archive(rev: str, into: Path) -> Path:
    data = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", rev], capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into


def copy_checkout(into: Path) -> Path:
    """This checkout's package folders as they are now (uncommitted edits included), without compiled files."""
    for folder in ("cli", *PACKAGES.values()):
        shutil.copytree(ROOT / folder, into / folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return into


def compiled(source: Path, into: Path) -> Path:
    """A copy of `source` with every module byte-compiled."""
    shutil.copytree(source, into, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(into)], check=True)
    return into


def time_once(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}): {done.stderr[-500:]}")
    return elapsed


def heavy_imports(env: dict[str, str], items: Path, out: Path) -> list[str]:
    """Heavy top-level packages the CLI's own process imported while scoring `items`."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "groupscore", "score", str(items), "-o", str(out), "--no-progress"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    names = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    return [name for name in HEAVY if name in names]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--baseline", default="be62d36", help="commit to compare with (default: before lazy start)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="groupscore-clibench-") as scratch_dir:
        scratch = Path(scratch_dir)
        sources = {
            f"baseline {args.baseline}": archive(args.baseline, scratch / "base"),
            "this checkout": copy_checkout(scratch / "head"),
        }
        trees = {}
        for n, (name, source) in enumerate(sources.items()):
            trees[f"{name}, compiled"] = package_tree(compiled(source, scratch / f"c{n}"), scratch / f"cpkg{n}")
            trees[f"{name}, no .pyc"] = package_tree(source, scratch / f"pkg{n}")
        envs = {
            name: {**os.environ, "PYTHONPATH": str(path), "PYTHONDONTWRITEBYTECODE": "1"}
            for name, path in trees.items()
        }
        files = {}
        for case, items in CASES.items():
            files[case] = scratch / f"{len(files)}.jsonl"
            files[case].write_text("".join(json.dumps(item) + "\n" for item in items))
        out = scratch / "out.jsonl"

        load_before = os.getloadavg()[0]
        times: dict[tuple[str, str], list[float]] = {}
        for case, path in files.items():
            for _ in range(args.runs):
                for name, env in envs.items():
                    command = [sys.executable, "-m", "groupscore", "score", str(path), "-o", str(out), "--no-progress"]
                    times.setdefault((case, name), []).append(time_once(command, env))
        load_after = os.getloadavg()[0]

        print(
            f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
            f"load average {load_before:.1f} -> {load_after:.1f}; median of {args.runs} runs, interleaved"
        )
        print()
        names = list(trees)
        print("| case | " + " | ".join(names) + " | ratio, compiled | ratio, no .pyc |")
        print("| --- " * (len(names) + 3) + "|")
        for case in CASES:
            medians = [statistics.median(times[(case, name)]) for name in names]
            cells = " | ".join(f"{m:.2f} s" for m in medians)
            print(f"| {case} | {cells} | {medians[0] / medians[2]:.1f}x | {medians[1] / medians[3]:.1f}x |")
        print()
        for name, env in envs.items():
            if name.endswith("compiled"):
                heavy = heavy_imports(env, files["1 numeric math item"], out)
                print(
                    f"heavy modules imported by the CLI process ({name}, 1 numeric item): {', '.join(heavy) or 'none'}"
                )


if __name__ == "__main__":
    main()
