"""The scoring runtime, this checkout against an earlier commit, paired batch by batch in one run (A/B).

    .venv/bin/python bench/runtime_ab.py --base /tmp/base [--rounds 31]

`--base` is a checkout of the earlier commit (`git worktree add /tmp/base <commit>`). Two long-lived child processes
hold the runtime warm, one per tree: the base child imports the earlier tree (its editable install's mapping pointed
there by a sitecustomize on its PYTHONPATH, the package names of either layout mapped to their folders), the head
child this checkout. Every round sends the same fresh batch to both, in alternating order, and each child times only
its own scoring call, so the two times of a round see the same load on a shared machine; the median over rounds of
each, and the median of the per-round ratios (head / base: > 1 means slower now), are reported.

Batches: the service's in-process path (the service bench's numeric math batches of 256 and 1024 items, scored by
the service's engine as `/v1/score` would, 2 workers); `score_batch` on the same batches and on math's RL batch
(200 problems x 16 completions, 2 workers), as the CLI and the math bench use it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORKERS = 2

SITECUSTOMIZE = """
import os
tree = os.environ.get("GROUPSCORE_AB_TREE")
if tree:
    import __editable___groupscore_0_1_0_finder as finder
    names = {"groupscore": "cli"}
    for folder in os.listdir(tree):
        if os.path.isfile(os.path.join(tree, folder, "__init__.py")) and folder != "cli":
            names["groupscore." + folder] = folder
    finder.MAPPING.clear()
    finder.MAPPING.update({name: os.path.join(tree, folder) for name, folder in names.items()})
"""


# ----------------------------------------------------------------------------------------------------------------------
# Child: one tree's runtime, warm, answering "score this batch" lines on stdin with the call's wall time.


class ServicePath:
    """The service's scoring path without HTTP: the engine (head) or the ScoringPool (an earlier tree)."""

    def __init__(self) -> None:
        import asyncio
        import threading

        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        try:
            from groupscore.runtime.engine import EngineConfig, ScoringEngine

            self.scorer = ScoringEngine(EngineConfig(workers=WORKERS))
        except ImportError:  # before the runtime had the service's engine
            from groupscore.service.metrics import ServiceMetrics
            from groupscore.service.pool import ScoringPool
            from groupscore.service.settings import Settings

            self.scorer = ScoringPool(
                Settings(workers=WORKERS, max_items=1 << 20, max_queue_items=1 << 20), ServiceMetrics()
            )
        self._run(self.scorer.start())

    def _run(self, coroutine):
        import asyncio

        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def score(self, items: list) -> list:
        return self._run(self.scorer.score(items, None, self.loop.time() + 600))


def child() -> None:
    sys.path.insert(0, str(Path.cwd() / "bench"))  # the tree's own benches (its item generators, its imports)
    from math_bench import rl_batch
    from service_bench import math_items

    from groupscore.runtime.batch import score_batch

    service = ServicePath()
    rl = [item.model_dump() for item in rl_batch()]
    score_batch(math_items(64, seed=-1), workers=WORKERS)  # the batch pool started outside the clock
    print("ready", flush=True)
    for line in sys.stdin:
        kind, size, seed = line.split()
        items = math_items(int(size), seed=int(seed)) if kind != "rl" else rl
        started = time.perf_counter()
        verdicts = service.score(items) if kind == "service" else score_batch(items, workers=WORKERS)
        elapsed = time.perf_counter() - started
        assert len(verdicts) == len(items)
        print(json.dumps(elapsed), flush=True)


# ----------------------------------------------------------------------------------------------------------------------
# Driver.


def start(tree: Path | None, site: Path) -> subprocess.Popen:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(site)}
    if tree is not None:
        env["GROUPSCORE_AB_TREE"] = str(tree)
    # This script runs both children (an earlier tree may have no copy of it); each imports its own tree's benches.
    process = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--child"],
        cwd=tree or ROOT,
        env=env,
        text=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stdout.readline().strip() == "ready"
    return process


def ask(process: subprocess.Popen, kind: str, size: int, seed: int) -> float:
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(f"{kind} {size} {seed}\n")
    process.stdin.flush()
    return float(process.stdout.readline())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, help="a checkout of the earlier commit")
    parser.add_argument("--rounds", type=int, default=31)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child()
        return
    cases = [("service", 256), ("service", 1024), ("batch", 256), ("batch", 1024), ("rl", 3200)]
    with tempfile.TemporaryDirectory() as site:
        (Path(site) / "sitecustomize.py").write_text(SITECUSTOMIZE)
        load = os.getloadavg()[0]
        children = {"base": start(args.base.resolve(), Path(site)), "head": start(None, Path(site))}
        times: dict[tuple[str, int, str], list[float]] = {}
        try:
            for r in range(args.rounds):
                order = ("base", "head") if r % 2 == 0 else ("head", "base")
                for kind, size in cases:
                    for name in order:
                        times.setdefault((kind, size, name), []).append(ask(children[name], kind, size, 997 * r + 1))
        finally:
            for process in children.values():
                process.kill()
        print(f"load average {load:.1f} -> {os.getloadavg()[0]:.1f}; {args.rounds} paired rounds, {WORKERS} workers")
        print("| batch | base median | head median | head / base, medians | per-round ratio, median |")
        print("| --- | --- | --- | --- | --- |")
        for kind, size in cases:
            base, head = times[(kind, size, "base")], times[(kind, size, "head")]
            ratios = [h / b for h, b in zip(head, base)]
            label = {"service": "service engine, in-process", "batch": "score_batch", "rl": "score_batch, RL"}[kind]
            print(
                f"| {label}, {size} items | {1e3 * statistics.median(base):.1f} ms | "
                f"{1e3 * statistics.median(head):.1f} ms | {statistics.median(head) / statistics.median(base):.3f} | "
                f"{statistics.median(ratios):.3f} |"
            )


if __name__ == "__main__":
    main()
