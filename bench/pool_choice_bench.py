"""Which killable worker pool: the hand-written bounded pool against pebble's ProcessPool, side by side in one run.

    .venv/bin/pip install pebble   # not a dependency of groupscore: the measurement chose the hand-written pool
    .venv/bin/python bench/pool_choice_bench.py [--rounds 3] [--lines 64000] [--json out.json]

Both pools are measured on what the scoring runtime must meet (tests/bounded/test_bounded_workers.py and the runtime
benchmarks). "ours" is `WorkerPool` (a template process imports the modules once and forks workers on request;
SIGKILL on overrun). "pebble" is pebble's `ProcessPool` on a forkserver context (the forkserver preloads the same
modules; per-task `timeout`; the address-space cap set by its `initializer`), behind a thin adapter with the same
`run(fn, *args, timeout_s)` as ours (the budget covers the wait for a free worker: the caller's `result(timeout)`,
then `cancel()`, as pebble's own task timeout starts only when a worker takes the task). The batch engine
(`score_batch`, `groupscore score`) and math's nested symbolic pool are switched to the adapter by
$POOL_CHOICE_VARIANT=pebble, read when this module is imported (the forkserver preloads it, so every process of the
pebble variant uses pebble, the nested pools included).

Every case runs in a fresh child process (cold starts are measured cold, and one variant's forkserver or template
never serves the other), the two variants alternating case by case and round by round; the median of the rounds is
reported with the ratio pebble / ours (for times: > 1 means pebble is slower).

Cases:
- cold start: a 2-worker pool with the math verifier's modules preloaded, until a call has come back from each worker;
- round trip: a trivial call (p50/p99 of 2,000);
- overrun, Python-level and C-level (`sum(range(...))`, one C call that no signal handler interrupts, as a sympy
  big-integer step would be): budget 0.5 s on a 1-worker pool; when the caller gets BudgetExceeded, when the worker
  is gone, when the next call on the replacement is done;
- queue wait: a 1-worker pool busy for 2 s, a call with a 0.3 s budget must give up within its budget;
- worker crash (`os._exit`) and memory runaway (64 GB asked under the 4096 MB cap): the error the caller gets and the
  next call;
- an unguarded script (no `if __name__ == "__main__"`) that calls a bounded function, as a training script does
  through math's symbolic step;
- `groupscore score` on one numeric item (one-shot start) and on --lines RL-like lines with -j 1 and -j 2;
- `score_batch`: math's RL batch (200 x 16, 2 workers, best of 3 passes after a warm-up batch) and the service
  bench's numeric batches of 256 and 1024 items (median of 9).

One file because every child process imports it by name (the forkserver preloads it, the workers unpickle the cases'
functions from it, the pebble variant patches the pools when it is imported): the adapter, the cases and the driver
must be one importable module.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from common import roundtrip_us

BENCH = Path(__file__).resolve().parent
VARIANT_ENV = "POOL_CHOICE_VARIANT"
VARIANTS = ("ours", "pebble")
MATH_MODULES = ["groupscore.verifiers.math.verify", "groupscore.verifiers.math.symbolic"]
ME = "pool_choice_bench"  # this module's import name in the children (bench/ is on their path)


# ----------------------------------------------------------------------------------------------------------------------
# pebble behind the bounded pool's interface.


class PebblePool:
    """pebble.ProcessPool on a forkserver context, with `run`/`warm_up`/`shutdown`/`size` as WorkerPool has them."""

    def __init__(self, size: int | None = None) -> None:
        self.size = size or _workers().default_size()
        self._pool: Any = None

    def _started(self, preload: Iterable[str] = ()) -> Any:
        if self._pool is None:
            import multiprocessing

            from pebble import ProcessPool

            workers = _workers()
            context = multiprocessing.get_context("forkserver")
            # One forkserver per process, which reads its preload list when it starts: the first pool's list wins.
            context.set_forkserver_preload([ME, *preload])
            self._pool = ProcessPool(
                max_workers=self.size,
                context=context,
                initializer=workers.cap_address_space,
                initargs=(workers.worker_memory_mb(),),
            )
        return self._pool

    def run(self, fn: Callable[..., Any], *args: Any, timeout_s: float) -> Any:
        from concurrent.futures import TimeoutError as FutureTimeout

        from pebble import ProcessExpired

        workers = _workers()
        if timeout_s <= 0:
            raise workers.BudgetExceeded("no budget left")
        future = self._started().schedule(fn, args, timeout=timeout_s)
        try:
            return future.result(timeout=timeout_s)
        except FutureTimeout:
            future.cancel()  # a running task's worker is stopped by pebble's manager thread
            raise workers.BudgetExceeded(f"{fn} ran out of its budget") from None
        except ProcessExpired as exc:
            raise workers.WorkerCrashed(str(exc)) from exc

    def warm_up(self, modules: Iterable[str] = (), timeout_s: float = 120.0) -> None:
        # The forkserver imports the modules once; one call per worker waits until every worker has started.
        names = list(modules)
        pool = self._started(names)
        for future in [pool.schedule(_import_all, (names,)) for _ in range(self.size)]:
            future.result(timeout=timeout_s)

    def shutdown(self) -> None:
        if self._pool is not None:
            self._pool.stop()
            self._pool.join()


def _workers() -> Any:
    """The bounded pool's module: groupscore.bounded.workers, or before the layout move groupscore.verifiers.workers
    (so that the bench also runs on an earlier tree)."""
    try:
        from groupscore.bounded import workers
    except ImportError:
        from groupscore.verifiers import workers
    return workers


def _batch() -> Any:
    try:
        from groupscore.runtime import batch
    except ImportError:
        from groupscore.verifiers import batch
    return batch


def _import_all(names: list[str]) -> None:
    import importlib

    for name in names:
        importlib.import_module(name)


def use_pebble() -> None:
    """Make every WorkerPool the bounded pool module hands out a PebblePool: the default pool (math's symbolic step)
    and the batch engine's pools."""
    workers = _workers()
    workers.WorkerPool = PebblePool
    workers._default = workers.PerProcess(PebblePool)


if os.environ.get(VARIANT_ENV) == "pebble":
    use_pebble()


def make_pool(variant: str, size: int, preload: list[str]) -> Any:
    pool = PebblePool(size) if variant == "pebble" else _workers().WorkerPool(size)
    pool.warm_up([ME, *preload])
    return pool


# ----------------------------------------------------------------------------------------------------------------------
# What the workers run.


def add(a: int, b: int) -> int:
    return a + b


def pid() -> int:
    return os.getpid()


def nap(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def spin_py(pid_file: str, seconds: float) -> None:
    Path(pid_file).write_text(str(os.getpid()))
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def spin_c(pid_file: str, n: int) -> int:
    Path(pid_file).write_text(str(os.getpid()))
    return sum(range(n))  # one C call: a Python-level signal handler runs only when it returns


def die() -> None:
    os._exit(7)


def allocate(gigabytes: int) -> int:
    return len(bytearray(gigabytes << 30))


def _alive(pid_: int) -> bool:
    try:
        os.kill(pid_, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for our purpose (its parent has not reaped it yet)
        return Path(f"/proc/{pid_}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _gone_after(pid_: int, since: float, limit_s: float = 30.0) -> float:
    while _alive(pid_) and time.perf_counter() - since < limit_s:
        time.sleep(0.002)
    return time.perf_counter() - since


# ----------------------------------------------------------------------------------------------------------------------
# Cases: each runs in a fresh child (`--child VARIANT CASE`) and returns a dict of numbers.


def case_cold(variant: str) -> dict:
    started = time.perf_counter()
    pool = make_pool(variant, 2, MATH_MODULES)
    pool.run(add, 1, 1, timeout_s=60)
    cold = time.perf_counter() - started
    pool.shutdown()
    return {"cold_start_s": cold}


def case_roundtrip(variant: str) -> dict:
    pool = make_pool(variant, 2, [])
    p50, p99 = roundtrip_us(pool)
    pool.shutdown()
    return {"roundtrip_p50_us": p50, "roundtrip_p99_us": p99}


def _overrun(variant: str, fn: Callable[..., Any], arg: Any, prefix: str) -> dict:
    BudgetExceeded = _workers().BudgetExceeded

    pool = make_pool(variant, 1, [])
    raised, gone, nexts = [], [], []
    with tempfile.TemporaryDirectory() as folder:
        pid_file = Path(folder) / "pid"
        for _ in range(5):
            pid_file.unlink(missing_ok=True)
            t0 = time.perf_counter()
            try:
                pool.run(fn, str(pid_file), arg, timeout_s=0.5)
                raise AssertionError("the overrun was not stopped")
            except BudgetExceeded:
                raised.append(time.perf_counter() - t0)
            t1 = time.perf_counter()
            pool.run(add, 1, 1, timeout_s=60)
            nexts.append(time.perf_counter() - t1)
            gone.append(_gone_after(int(pid_file.read_text()), t0))
    pool.shutdown()
    return {
        f"{prefix}_raised_s": statistics.median(raised),
        f"{prefix}_worker_gone_s": statistics.median(gone),
        f"{prefix}_next_call_ms": 1e3 * statistics.median(nexts),
    }


def case_overrun_py(variant: str) -> dict:
    return _overrun(variant, spin_py, 30.0, "overrun_py")


def case_overrun_c(variant: str) -> dict:
    return _overrun(variant, spin_c, 10**10, "overrun_c")


def case_queue_wait(variant: str) -> dict:
    import threading

    BudgetExceeded = _workers().BudgetExceeded

    pool = make_pool(variant, 1, [])
    holder = threading.Thread(target=pool.run, args=(nap, 2.0), kwargs={"timeout_s": 10})
    holder.start()
    time.sleep(0.2)
    t0 = time.perf_counter()
    try:
        pool.run(add, 1, 1, timeout_s=0.3)
        outcome = "ran"
    except BudgetExceeded:
        outcome = "BudgetExceeded"
    waited = time.perf_counter() - t0
    holder.join()
    ok_after = pool.run(add, 1, 1, timeout_s=5) == 2
    pool.shutdown()
    return {"queue_wait_gave_up_s": waited, "queue_wait_outcome": outcome, "queue_wait_pool_ok_after": ok_after}


def case_crash_and_memory(variant: str) -> dict:
    pool = make_pool(variant, 1, [])
    result: dict[str, Any] = {}
    for name, fn, args in (("crash", die, ()), ("memory", allocate, (64,))):
        t0 = time.perf_counter()
        try:
            pool.run(fn, *args, timeout_s=20)
            result[f"{name}_error"] = "none"
        except Exception as exc:  # noqa: BLE001 - the type is the result
            result[f"{name}_error"] = type(exc).__name__
        result[f"{name}_raised_ms"] = 1e3 * (time.perf_counter() - t0)
        t1 = time.perf_counter()
        pool.run(add, 1, 1, timeout_s=60)
        result[f"{name}_next_call_ms"] = 1e3 * (time.perf_counter() - t1)
    pool.shutdown()
    return result


def case_unguarded_script(variant: str) -> dict:
    # As a user's training script would be: top-level code, no __main__ guard.
    pool_line = (
        "from pool_choice_bench import PebblePool as Pool"
        if variant == "pebble"
        else "from pool_choice_bench import _workers; Pool = _workers().WorkerPool"
    )
    script = textwrap.dedent(f"""
        import sys
        {pool_line}
        import pool_choice_bench as b
        pool = Pool(1)
        print("result", pool.run(b.add, 40, 2, timeout_s=20), flush=True)
        pool.shutdown()
    """)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "train.py"
        path.write_text(script)
        t0 = time.perf_counter()
        try:
            done = subprocess.run(
                [sys.executable, str(path)], capture_output=True, text=True, timeout=60, env=_child_env("ours")
            )  # the variant is chosen by the import line
            ok = "result 42" in done.stdout
            errors = [line for line in done.stderr.splitlines() if "Error" in line and not line.startswith(" ")]
            detail = "" if ok else (errors or ["?"])[-1][:120]
        except subprocess.TimeoutExpired:
            ok, detail = False, "hung for 60 s"
    return {"unguarded_script_ok": ok, "unguarded_script_s": time.perf_counter() - t0, "unguarded_script_error": detail}


def _rl_lines(count: int) -> list[str]:
    sys.path.insert(0, str(BENCH))
    from workers_bench import rl_lines

    return rl_lines(count)


def _cli(variant: str, source: Path, *extra: str) -> float:
    command = [
        sys.executable,
        "-c",
        f"import {ME}; from groupscore.cli import main; raise SystemExit(main())",
        "score",
        str(source),
        "-o",
        str(source.with_suffix(".out")),
        "--no-progress",
        *extra,
    ]
    t0 = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=_child_env(variant), timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"{variant}: groupscore score failed: {done.stderr[-800:]}")
    return time.perf_counter() - t0


def case_cli_one(variant: str) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "one.jsonl"
        source.write_text(
            json.dumps({"id": 1, "verifier": "math", "completion": "So the answer is \\boxed{42}.", "answer": "42"})
            + "\n"
        )
        return {"cli_one_numeric_s": _cli(variant, source)}


def case_cli_lines(variant: str) -> dict:
    lines = int(os.environ.get("POOL_CHOICE_LINES", "64000"))
    result = {}
    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "items.jsonl"
        source.write_text("\n".join(_rl_lines(lines)) + "\n")
        for j in (1, 2):
            result[f"cli_{lines}_lines_j{j}_s"] = _cli(variant, source, "-j", str(j))
    return result


def case_batches(variant: str) -> dict:
    sys.path.insert(0, str(BENCH))
    from math_bench import rl_batch
    from service_bench import math_items

    score_batch = _batch().score_batch

    score_batch([item.model_dump() for item in rl_batch(seed=99, problems=8)], workers=2)  # start the workers
    rl = [item.model_dump() for item in rl_batch()]
    passes = []
    for _ in range(3):
        t0 = time.perf_counter()
        score_batch(rl, workers=2)
        passes.append(time.perf_counter() - t0)
    result = {"rl_batch_2w_items_per_s": len(rl) / min(passes)}
    for size in (256, 1024):
        times = []
        for r in range(9):
            items = math_items(size, seed=997 * (r + 1))
            t0 = time.perf_counter()
            score_batch(items, workers=2)
            times.append(time.perf_counter() - t0)
        result[f"score_batch_{size}_ms"] = 1e3 * statistics.median(times)
    return result


CASES = {name[len("case_") :]: fn for name, fn in globals().items() if name.startswith("case_")}


# ----------------------------------------------------------------------------------------------------------------------
# Driver.


def _child_env(variant: str) -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(BENCH), os.environ.get("PYTHONPATH", "")]))
    return {**os.environ, "PYTHONPATH": path, VARIANT_ENV: variant}


def run_child(variant: str, case: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", f"import {ME}; {ME}.child({variant!r}, {case!r})"],
        capture_output=True,
        text=True,
        env=_child_env(variant),
        timeout=1200,
    )
    if done.returncode != 0:
        return {"failed": (done.stderr.strip().splitlines() or ["?"])[-1][:200]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def child(variant: str, case: str) -> None:
    print(json.dumps(CASES[case](variant)), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--lines", type=int, default=64_000)
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    os.environ["POOL_CHOICE_LINES"] = str(args.lines)
    import pebble

    load = os.getloadavg()[0]
    print(
        f"machine: {platform.machine()}, {len(os.sched_getaffinity(0))} usable cores, Python "
        f"{platform.python_version()}, pebble {pebble.__version__}; load average {load:.1f}",
        flush=True,
    )
    runs: dict[str, dict[str, list]] = {variant: {} for variant in VARIANTS}
    for case in args.cases.split(","):
        for r in range(args.rounds):
            for variant in VARIANTS if r % 2 == 0 else VARIANTS[::-1]:
                for key, value in run_child(variant, case).items():
                    runs[variant].setdefault(key, []).append(value)
        print(f"  {case} done (load {os.getloadavg()[0]:.1f})", file=sys.stderr, flush=True)

    def summary(values: list) -> Any:
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            return statistics.median(values)
        return sorted(set(map(str, values)))[0] if len(set(map(str, values))) == 1 else sorted(set(map(str, values)))

    keys = list(dict.fromkeys(k for variant in VARIANTS for k in runs[variant]))
    table = {key: {variant: summary(runs[variant].get(key, ["-"])) for variant in VARIANTS} for key in keys}
    print(f"\nload average {load:.1f} -> {os.getloadavg()[0]:.1f}; median of {args.rounds} rounds per case\n")
    print("| measure | ours | pebble | pebble / ours |")
    print("| --- | --- | --- | --- |")
    for key, cells in table.items():
        a, b = cells["ours"], cells["pebble"]
        number = isinstance(a, float) and isinstance(b, float)
        ratio = f"{b / a:.2f}" if number and a else ""
        print(f"| {key} | {_cell(a)} | {_cell(b)} | {ratio} |")
    if args.json:
        args.json.write_text(json.dumps({"runs": runs, "table": table}, indent=2))


def _cell(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


if __name__ == "__main__":
    main()
