"""The bounded worker pool: values and exceptions come back, overruns are killed and replaced, from any caller."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from groupscore.bounded import workers
from groupscore.bounded.workers import BudgetExceeded, WorkerCrashed, WorkerPool, run_bounded, run_bounded_async

SLACK_S = 1.0  # scheduling noise on a loaded 2-core machine; a hang would blow far past it


# Top-level, so that workers can import them by name.
def add(a, b):
    return a + b


def worker_pid():
    return os.getpid()


def spin(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    return "finished"


def nap(seconds):
    time.sleep(seconds)
    return seconds


def die(code):
    os._exit(code)


def fail(message):
    raise ValueError(message)


def leave():
    raise SystemExit(3)


def allocate(gigabytes):
    return len(bytearray(gigabytes * 1024**3))


def nested_bounded(a, b):
    return run_bounded(add, a, b, timeout_s=30)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_gone(pid: int, within_s: float) -> bool:
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return not alive(pid)


@pytest.fixture
def pool():
    p = WorkerPool(size=2)
    p.warm_up([__name__])
    yield p
    p.shutdown()


def test_returns_the_value_and_reuses_workers(pool):
    assert pool.run(add, 2, 3, timeout_s=5) == 5
    pids = {pool.run(worker_pid, timeout_s=5) for _ in range(10)}
    assert len(pids) == 1  # the most recently used worker is reused: its caches are warm
    assert os.getpid() not in pids


def test_worker_exception_is_reraised_with_its_traceback(pool):
    with pytest.raises(ValueError, match="no such answer") as info:
        pool.run(fail, "no such answer", timeout_s=5)
    assert "in fail" in str(info.value.__cause__)
    assert pool.run(add, 1, 1, timeout_s=5) == 2


def test_system_exit_in_the_worker_does_not_end_the_caller(pool):
    with pytest.raises(RuntimeError, match="SystemExit"):
        pool.run(leave, timeout_s=5)


def test_overrun_raises_within_budget_and_the_worker_is_killed_and_replaced(pool):
    busy_pid = pool.run(worker_pid, timeout_s=5)
    started = time.monotonic()
    with pytest.raises(BudgetExceeded):
        pool.run(spin, 30, timeout_s=0.5)
    assert time.monotonic() - started < 0.5 + SLACK_S
    assert wait_gone(busy_pid, within_s=2.0)
    pids = {pool.run(worker_pid, timeout_s=10) for _ in range(4)}
    assert busy_pid not in pids
    assert pool.run(spin, 0.01, timeout_s=5) == "finished"


def test_sleeping_call_inside_budget_returns(pool):
    assert pool.run(nap, 0.2, timeout_s=5) == 0.2


def test_dead_worker_raises_clearly_and_is_replaced(pool):
    with pytest.raises(WorkerCrashed, match="died during die"):
        pool.run(die, 7, timeout_s=5)
    assert pool.run(add, 4, 4, timeout_s=10) == 8


def test_unpicklable_function_fails_in_the_caller_and_leaves_the_pool_intact(pool):
    with pytest.raises((pickle.PicklingError, AttributeError, TypeError)):
        pool.run(lambda: 1, timeout_s=5)
    assert pool.run(add, 1, 2, timeout_s=5) == 3


def test_waiting_for_a_free_worker_counts_against_the_budget():
    single = WorkerPool(size=1)
    try:
        single.warm_up([__name__])
        holder = threading.Thread(target=lambda: single.run(nap, 2.0, timeout_s=10))
        holder.start()
        time.sleep(0.2)
        started = time.monotonic()
        with pytest.raises(BudgetExceeded, match="waiting for a free worker"):
            single.run(add, 1, 1, timeout_s=0.3)
        assert time.monotonic() - started < 0.3 + SLACK_S
        holder.join()
        assert single.run(add, 1, 1, timeout_s=5) == 2
    finally:
        single.shutdown()


def test_a_slow_worker_start_is_not_taken_from_the_calls_budget(monkeypatch):
    # After one call's overrun kills its worker, the next call gets the replacement, which may still be starting on a
    # loaded machine. That start is the pool's time: the call keeps its whole budget and is scored, never refused as
    # "no worker started in time" (an infra_error the trainer masks, so one overrun would mask the items after it).
    single = WorkerPool(size=1)
    real_wait_ready = workers._Worker.wait_ready

    def slow_start(self, deadline, what):
        if self.pid is None:
            time.sleep(0.6)
        return real_wait_ready(self, deadline, what)

    try:
        single.warm_up([__name__])
        with pytest.raises(BudgetExceeded):
            single.run(nap, 5.0, timeout_s=0.3)  # overruns: its worker is killed and replaced
        monkeypatch.setattr(workers._Worker, "wait_ready", slow_start)
        assert single.run(add, 1, 1, timeout_s=0.3) == 2
        with pytest.raises(BudgetExceeded) as overrun:  # the budget still binds the call itself
            single.run(nap, 5.0, timeout_s=0.3)
        assert not isinstance(overrun.value, workers.WorkerUnavailable)
    finally:
        single.shutdown()


def test_memory_runaway_is_a_memory_error_not_a_swapping_machine(pool):
    with pytest.raises(MemoryError):
        pool.run(allocate, 64, timeout_s=10)


def test_many_threads_each_get_their_own_bound(pool):
    results: list[object] = []

    def call(i):
        try:
            results.append(pool.run(spin, 30, timeout_s=0.5) if i % 2 else pool.run(add, i, 0, timeout_s=10))
        except BudgetExceeded:
            results.append("timeout")

    started = time.monotonic()
    threads = [threading.Thread(target=call, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert time.monotonic() - started < 10
    assert sorted(r for r in results if r != "timeout") == [0, 2, 4]
    assert results.count("timeout") == 3
    assert pool.run(add, 1, 2, timeout_s=10) == 3


def test_default_pool_from_an_event_loop_keeps_the_loop_running():
    workers.warm_up([__name__])

    async def main():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.05)
                ticks += 1

        tick_task = asyncio.create_task(ticker())
        started = time.monotonic()
        outcomes = await asyncio.gather(
            run_bounded_async(nap, 0.3, timeout_s=5), run_bounded_async(spin, 30, timeout_s=0.5), return_exceptions=True
        )
        elapsed = time.monotonic() - started
        tick_task.cancel()
        return outcomes, elapsed, ticks

    (value, overrun), elapsed, ticks = asyncio.run(main())
    assert value == 0.3
    assert isinstance(overrun, BudgetExceeded)
    assert elapsed < 0.5 + SLACK_S
    assert ticks >= 4  # the loop was never blocked


def test_bounded_call_may_itself_use_a_pool():
    assert run_bounded(nested_bounded, 20, 22, timeout_s=60) == 42


def _call_from_spawned_process(queue):
    queue.put(run_bounded(add, 40, 2, timeout_s=60))


def test_works_inside_a_multiprocessing_child():
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    child = context.Process(target=_call_from_spawned_process, args=(queue,))
    child.start()
    assert queue.get(timeout=60) == 42
    child.join(timeout=30)
    assert child.exitcode == 0


def test_forked_child_gets_its_own_pool():
    parent_worker = run_bounded(worker_pid, timeout_s=30)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: must not talk to the parent's workers
        try:
            child_worker = run_bounded(worker_pid, timeout_s=30)
            os.write(write_end, str(child_worker).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    child_worker = int(os.read(read_end, 64) or b"0")
    os.close(read_end)
    os.waitpid(pid, 0)
    assert child_worker not in (0, parent_worker)
    assert run_bounded(worker_pid, timeout_s=30) == parent_worker  # the parent's pool is untouched


def _run_script(body: str, timeout_s: float = 60) -> subprocess.CompletedProcess:
    script = textwrap.dedent(body)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent)}
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout_s, env=env)


def test_workers_are_gone_after_the_caller_exits():
    done = _run_script("""
        from groupscore.bounded.workers import WorkerPool, run_bounded
        import test_bounded_workers as t
        print(run_bounded(t.worker_pid, timeout_s=30))
    """)
    assert done.returncode == 0, done.stderr
    assert wait_gone(int(done.stdout.split()[-1]), within_s=3.0)


def test_worker_busy_when_its_caller_is_killed_exits_on_its_own():
    caller = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent("""
        import threading
        from groupscore.bounded.workers import run_bounded
        import test_bounded_workers as t
        print(run_bounded(t.worker_pid, timeout_s=30), flush=True)
        run_bounded(t.spin, 60, timeout_s=120)
    """),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parent)},
    )
    try:
        busy_pid = int(caller.stdout.readline())
        time.sleep(0.3)
        caller.send_signal(signal.SIGKILL)
        caller.wait(timeout=10)
        assert wait_gone(busy_pid, within_s=5.0)
    finally:
        caller.kill()
        caller.wait()


def test_worker_output_goes_to_stderr_not_the_callers_stdout():
    done = _run_script("""
        from groupscore.bounded.workers import run_bounded
        run_bounded(print, "from the worker", timeout_s=30)
        print("from the caller")
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "from the caller"
    assert "from the worker" in done.stderr


def test_replacements_are_ready_at_once_after_every_kill(pool):
    for _ in range(5):
        with pytest.raises(BudgetExceeded):
            pool.run(spin, 30, timeout_s=0.2)
        # Forked from the template with every module already imported: no start-up to wait for.
        assert pool.run(add, 1, 1, timeout_s=0.5) == 2


def test_a_dead_template_is_restarted(pool):
    template = pool._template.process
    template.kill()
    template.wait()
    time.sleep(1.5)  # the workers forked from it notice within half a second and exit
    # Dead idle workers are dropped before any call is sent to them; a new template forks their replacements.
    assert [pool.run(add, 2, 2, timeout_s=60) for _ in range(4)] == [4, 4, 4, 4]
    assert pool._template.process.pid != template.pid


def test_a_spent_budget_fails_at_once_without_killing_anyone(pool):
    pid = pool.run(worker_pid, timeout_s=5)
    with pytest.raises(BudgetExceeded, match="no budget left"):
        pool.run(add, 1, 1, timeout_s=0)
    assert pool.run(worker_pid, timeout_s=5) == pid


def test_a_bad_memory_setting_is_a_clear_error_in_the_caller(monkeypatch):
    monkeypatch.setenv(workers.MEMORY_ENV, "lots")
    fresh = WorkerPool(size=1)
    with pytest.raises(ValueError, match="lots"):
        fresh.run(add, 1, 1, timeout_s=5)
    fresh.shutdown()


@pytest.mark.parametrize("value,words", [("100", "below 512"), ("lots", "not an integer")])
def test_a_bad_worker_memory_cap_fails_in_the_caller_in_one_line(monkeypatch, value, words):
    # The service's settings refuse these at start-up; the bounded workers read the same variable with the same check
    # (a cap of 100 MB once started every worker to die, each call then reported as no worker available).
    monkeypatch.setenv(workers.MEMORY_ENV, value)
    with pytest.raises(ValueError, match=words):
        workers.worker_memory_mb()
    monkeypatch.setenv(workers.MEMORY_ENV, "0")
    assert workers.worker_memory_mb() == 0


def test_pids_and_a_start_up_step_on_every_worker():
    fresh = WorkerPool(size=2, memory_mb=0)
    try:
        assert fresh.pids() == []
        started = fresh.run_on_each(worker_pid, timeout_s=60)
        assert sorted(started) == fresh.pids() and len(set(started)) == 2
        with pytest.raises(BudgetExceeded):
            fresh.run(spin, 30, timeout_s=0.3)
        [killed] = set(started) - set(fresh.pids())  # the overrun's worker, no longer listed
        assert wait_gone(killed, within_s=2.0)
        fresh.run_on_each(add, 1, 1, timeout_s=60)  # the replacement says "ready" when first used
        assert len(fresh.pids()) == 2 and killed not in fresh.pids()
        with pytest.raises(ValueError, match="on every worker"):
            fresh.run_on_each(fail, "on every worker", timeout_s=30)
    finally:
        fresh.shutdown()
    assert fresh.pids() == []


def test_a_start_up_step_runs_on_every_worker_at_once():
    # The service warms each worker this way (its scorers, sympy): one after another, start-up grew with the cores.
    fresh = WorkerPool(size=3, memory_mb=0)
    try:
        fresh.run_on_each(add, 1, 1, timeout_s=60)  # the workers are started, outside the clock
        started = time.monotonic()
        assert fresh.run_on_each(nap, 1.0, timeout_s=60) == [1.0, 1.0, 1.0]
        assert time.monotonic() - started < 2.5  # side by side ~1 s; one after another 3 s
    finally:
        fresh.shutdown()


def test_a_pools_own_memory_cap_wins_over_the_environment(monkeypatch):
    monkeypatch.setenv(workers.MEMORY_ENV, "0")
    capped = WorkerPool(size=1, memory_mb=1024)
    try:
        with pytest.raises(MemoryError):
            capped.run(allocate, 2, timeout_s=30)
    finally:
        capped.shutdown()
