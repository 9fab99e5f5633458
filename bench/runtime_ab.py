"""The scoring runtime, this checkout against an earlier commit, paired batch by batch in one run (A/B).

    .venv/bin/python bench/runtime_ab.py --base /tmp/base [--rounds 31]

`--base` is a checkout of the earlier commit (`git worktree add /tmp/base <commit>`). Two long-lived child processes
hold the runtime warm, one per tree: the base child imports the earlier tree (its editable install's mapping pointed
there by a sitecustomize on its PYTHONPATH, the package names of either layout mapped to their folders), the head
child this checkout. Every round sends the same fresh batch to both, in alternating order, and each child times only
its own scoring call, so the two times of a round see the same load on a shared machine; the median over rounds of
each, and the median of the per-round ratios (head / base: > 1 means slower now), are reported.

With --http: two real `groupscore serve` (one per tree, 2 workers) driven over loopback the same way (numeric math
batches of 256 and 1024 items), then a sustained load of 2 client threads sending 256-item batches in alternating
8 s windows (--windows per tree), items per second per window.

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


def http_ab(base: Path, site: Path, rounds: int, windows: int) -> None:
    import threading

    sys.path.insert(0, str(ROOT / "bench"))
    from service_bench import math_items

    from groupscore.client.http import ScoreClient
    from groupscore.service.embedded import start_embedded

    os.environ["PYTHONPATH"] = str(site)  # both servers: the sitecustomize reads GROUPSCORE_AB_TREE, set for base only
    with (
        start_embedded(workers=WORKERS, env={"GROUPSCORE_AB_TREE": str(base)}) as base_url,
        start_embedded(workers=WORKERS) as head_url,
    ):
        urls = {"base": base_url, "head": head_url}
        clients = {name: ScoreClient(url) for name, url in urls.items()}
        for client in clients.values():
            client.score_raw(math_items(256, seed=-5))
        times: dict[tuple[str, int], list[float]] = {}
        for r in range(rounds):
            for name in ("base", "head") if r % 2 == 0 else ("head", "base"):
                for size in (256, 1024):
                    items = math_items(size, seed=997 * r + size)
                    started = time.perf_counter()
                    clients[name].score_raw(items)
                    times.setdefault((name, size), []).append(time.perf_counter() - started)
        for size in (256, 1024):
            b, h = times[("base", size)], times[("head", size)]
            print(
                f"| HTTP, {size} items | {1e3 * statistics.median(b):.1f} ms | {1e3 * statistics.median(h):.1f} ms | "
                f"{statistics.median(h) / statistics.median(b):.3f} | "
                f"{statistics.median([y / x for x, y in zip(b, h)]):.3f} |"
            )
        rates: dict[str, list[float]] = {"base": [], "head": []}
        for w in range(windows):
            for name in ("base", "head") if w % 2 == 0 else ("head", "base"):
                done = [0]
                stop = time.monotonic() + 8.0

                def drive(seed: int, url: str = urls[name], stop: float = stop, done: list[int] = done) -> None:
                    with ScoreClient(url) as client:
                        k = 0
                        while time.monotonic() < stop:
                            k += 1
                            client.score_raw(math_items(256, seed=seed * 1000 + k))
                            done[0] += 256

                threads = [threading.Thread(target=drive, args=(w * 10 + i,)) for i in range(2)]
                started = time.monotonic()
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
                rates[name].append(done[0] / (time.monotonic() - started))
        b, h = statistics.median(rates["base"]), statistics.median(rates["head"])
        print(
            f"| sustained, 2 clients x 256 items, {windows} windows of 8 s | {b:.0f} items/s | {h:.0f} items/s | "
            f"{h / b:.3f} | |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, help="a checkout of the earlier commit")
    parser.add_argument("--rounds", type=int, default=31)
    parser.add_argument("--http", action="store_true", help="two real servers over loopback instead")
    parser.add_argument("--windows", type=int, default=10, help="--http: sustained-load windows per tree")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child()
        return
    cases = [("service", 256), ("service", 1024), ("batch", 256), ("batch", 1024), ("rl", 3200)]
    with tempfile.TemporaryDirectory() as site:
        (Path(site) / "sitecustomize.py").write_text(SITECUSTOMIZE)
        if args.http:
            print(f"load average {os.getloadavg()[0]:.1f}; {args.rounds} paired rounds, {WORKERS} workers per server")
            http_ab(args.base.resolve(), Path(site), args.rounds, args.windows)
            print(f"load average at the end {os.getloadavg()[0]:.1f}")
            return
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
