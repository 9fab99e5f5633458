"""Where Serve's HTTP ingress spends its time (issue 15): per-request milliseconds that Serve's HTTP path adds to the
plain service for a request with no body (GET /healthz), a one-item batch (a small POST body: the replica pulls it
back from the proxy) and a 256-item math batch (a 261 kB body), and what the replica itself took for them (Serve's
replica access log), so the extra splits into the replica's side and the proxy's.

One local Ray node, one replica of 2 CPUs (2 scoring processes) against the plain service (2 scoring processes); each
round times every path on the same request, the order rotating. The ingress is the one `groupscore serve --ray`
starts (HAProxy where its binary is found) unless RAY_SERVE_ENABLE_HA_PROXY says otherwise:

    flock /tmp/bench.lock .venv/bin/python bench/ray_hops_bench.py [--rounds 15]                  # HAProxy
    RAY_SERVE_ENABLE_HA_PROXY=0 flock /tmp/bench.lock .venv/bin/python bench/ray_hops_bench.py   # proxy actor
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import orjson
import ray
from ray import serve

sys.path.insert(0, str(Path(__file__).parent))
from ray_bench import RAY_NICENESS, loadavg, math_batch

from groupscore.client.serve_handle import ServeHandleClient
from groupscore.service.embedded import free_port, start_embedded
from groupscore.service.ray_app import application
from groupscore.service.ray_deploy import HAPROXY_FLAG, RayTarget, haproxy_binary, start_proxy

ONE = [{"verifier": "math", "completion": "\\boxed{2}", "answer": "2", "id": 0}]


def replica_log_ms(app: str, path: str) -> list[float]:
    """The replica's own time for each POST to `path`, from Serve's replica access logs (in log order)."""
    pattern = re.compile(rf"POST (?:/{app})?{re.escape(path)} 200 ([0-9.]+)ms")
    found: list[float] = []
    for log in sorted(glob.glob(f"/tmp/ray/session_latest/logs/serve/replica_{app}_*.log")):
        found += [
            float(m.group(1)) for m in map(pattern.search, Path(log).read_text(errors="replace").splitlines()) if m
        ]
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument(
        "--replica-env",
        type=json.loads,
        default=None,
        metavar="JSON",
        help="environment for the replica (its runtime_env's env_vars), a JSON object",
    )
    args = parser.parse_args()
    haproxy = os.environ.get(HAPROXY_FLAG, "1" if haproxy_binary() else "0") == "1"  # as start_proxy decides
    load_start = loadavg()
    with start_embedded(workers=2) as plain_url:
        os.environ.setdefault(RAY_NICENESS, "0")  # as bench/ray_bench.py: the replica at the plain service's priority
        ray.init(address="local", num_cpus=3, include_dashboard=False, log_to_driver=False)  # never a stray cluster
        try:
            port = free_port()
            start_proxy(RayTarget(http_port=port))  # the ingress RAY_SERVE_ENABLE_HA_PROXY says (HAProxy if unset)
            runtime_env = {"env_vars": args.replica_env} if args.replica_env else None
            serve.run(application(num_replicas=1, num_cpus=2, runtime_env=runtime_env), name="w2", route_prefix="/w2")
            rows = measure(plain_url, f"http://127.0.0.1:{port}/w2", ServeHandleClient("w2", shards=1), args.rounds)
            replica = replica_log_ms("w2", "/v1/score")
        finally:
            serve.shutdown()
            ray.shutdown()
    ingress = "HAProxy (RAY_SERVE_ENABLE_HA_PROXY=1)" if haproxy else "Serve's proxy actor"
    extra = f", replica env {json.dumps(args.replica_env)}" if args.replica_env else ""
    load = f"load {load_start} -> {loadavg()}"
    print(f"`bench/ray_hops_bench.py --rounds {args.rounds}`, ingress: {ingress}{extra}; {load}")
    print()
    print("| request | plain HTTP | Serve HTTP | Serve handle | Serve HTTP - plain (per round) | handle - plain |")
    print("| --- | --- | --- | --- | --- | --- |")
    for label, t in rows.items():
        cells = [f"{statistics.median(t[k]) * 1e3:.1f} ms" for k in ("plain", "http", "handle") if k in t]
        if "handle" not in t:
            cells.append("")
        diffs = [statistics.median(s - p for s, p in zip(t[k], t["plain"])) * 1e3 for k in ("http", "handle") if k in t]
        diff_cells = [f"{d:+.1f} ms" for d in diffs] + [""] * (2 - len(diffs))
        print(f"| {label} | {' | '.join(cells)} | {' | '.join(diff_cells)} |")
    if replica:  # the warm-up requests come first: the last ones are the rounds', one-item and 256-item alternating
        ones, batches = replica[-2 * args.rounds :: 2], replica[-2 * args.rounds + 1 :: 2]
        print()
        print(
            f"Replica's own time (its access log, medians): one item {statistics.median(ones):.1f} ms, "
            f"256 items {statistics.median(batches):.1f} ms"
        )
    return 0


def measure(plain_url: str, serve_url: str, handle: ServeHandleClient, rounds: int) -> dict[str, dict[str, list]]:
    client = httpx.Client(timeout=120)

    def get(url: str) -> Callable[[], object]:
        return lambda: client.get(f"{url}/healthz").raise_for_status()

    def post(url: str, body: bytes) -> Callable[[], object]:
        headers = {"content-type": "application/json"}
        return lambda: client.post(f"{url}/v1/score", content=body, headers=headers).raise_for_status()

    one = orjson.dumps({"items": ONE})
    for _ in range(3):  # warm every path
        for call in (get(plain_url), get(serve_url), post(plain_url, one), post(serve_url, one)):
            call()
        handle.score_raw(ONE)
    rows: dict[str, dict[str, list]] = {
        label: {k: [] for k in keys}
        for label, keys in (
            ("GET /healthz (no body)", ("plain", "http")),
            ("1 math item", ("plain", "http", "handle")),
            ("256 math items (261 kB body)", ("plain", "http", "handle")),
        )
    }
    for r in range(rounds):
        items = math_batch(256, 800 + r)
        big = orjson.dumps({"items": items})
        for label, calls in (
            ("GET /healthz (no body)", {"plain": get(plain_url), "http": get(serve_url)}),
            (
                "1 math item",
                {"plain": post(plain_url, one), "http": post(serve_url, one), "handle": lambda: handle.score_raw(ONE)},
            ),
            (
                "256 math items (261 kB body)",
                {
                    "plain": post(plain_url, big),
                    "http": post(serve_url, big),
                    "handle": lambda batch=items: handle.score_raw(batch),
                },
            ),
        ):
            names = list(calls)
            for name in names[r % len(names) :] + names[: r % len(names)]:
                start = time.perf_counter()
                calls[name]()
                rows[label][name].append(time.perf_counter() - start)
    return rows


if __name__ == "__main__":
    raise SystemExit(main())
