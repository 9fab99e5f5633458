"""Hard wall-clock bounds for a function call: the call runs in a pool worker process that is killed when it overruns.

    from groupscore.verifiers.workers import BudgetExceeded, run_bounded

    try:
        equal = run_bounded(symbolic_equal, gold, predicted, timeout_s=2.0)
    except BudgetExceeded:
        ...  # score the item as a timeout

- `fn` must be a top-level function of an importable module (not of `__main__`: workers never run the caller's
  script, so an unguarded training script is not re-run in them); its arguments and return value must pickle.
- The budget covers everything the caller waits for: a free worker, the worker's start, the call itself. When it runs
  out, `BudgetExceeded` is raised, the worker doing the call is killed and a fresh one is started in its place.
- An exception raised by `fn` is re-raised in the caller (the worker's traceback is attached as `__cause__`);
  a worker that dies during a call (segfault, OOM kill) is replaced and the call raises `WorkerCrashed`.
- No signals are used in the caller, so this works from any thread, from asyncio (`run_bounded_async`) and from
  inside other processes (pool workers included). Each worker is a fresh interpreter (like multiprocessing's
  "spawn"): it shares no locks or threads with the caller, and a process forked from the caller makes its own pool.
- Workers' stdout goes to the caller's stderr, so nothing they print can corrupt the caller's output.
- The default pool holds `GROUPSCORE_BOUNDED_WORKERS` workers (default: min(cores, 4)), starts on the first call,
  and is shut down at exit. Each worker's address space is capped at `GROUPSCORE_WORKER_MEMORY_MB` (default 4096,
  0 = no cap), so a runaway computation fails with MemoryError instead of swapping the machine.
- The first call in a process pays for starting a worker (about a second with sympy); call `warm_up()` where that
  matters, e.g. at service start.
"""

from __future__ import annotations

import asyncio
import atexit
import importlib
import json
import multiprocessing
import os
import subprocess
import sys
import pickle
import resource
import signal
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable
from multiprocessing.connection import Connection
from typing import Any

SIZE_ENV = "GROUPSCORE_BOUNDED_WORKERS"
MEMORY_ENV = "GROUPSCORE_WORKER_MEMORY_MB"
WARM_UP_TIMEOUT_S = 120.0


class BudgetExceeded(TimeoutError):
    """The call did not finish within its wall-clock budget (the worker running it was killed)."""


class WorkerCrashed(RuntimeError):
    """The worker process died during the call; it has been replaced."""


class _RemoteTraceback(Exception):
    """Carries the worker's formatted traceback, shown as the cause of a re-raised exception."""

    def __str__(self) -> str:
        return str(self.args[0])


class _UnpicklableError(Exception):
    """Stands in for a worker-side exception (or result) that could not be sent back."""


def default_size() -> int:
    if SIZE_ENV in os.environ:
        return max(1, int(os.environ[SIZE_ENV]))
    return max(1, min(len(os.sched_getaffinity(0)), 4))


# ----------------------------------------------------------------------------------------------------------------------
# Worker side: runs in the child process.


def _serve(fd: int) -> None:
    """Worker main loop: read its settings, import the preload modules, say ready, then answer calls one at a time."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C belongs to the caller, which then shuts us down
    _exit_when_orphaned()
    conn = Connection(fd)
    preload, memory_mb = conn.recv()
    if memory_mb > 0:
        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    _import_all(preload)
    conn.send(("ready", None))
    while True:
        try:
            payload = conn.recv_bytes()
        except (EOFError, OSError):
            return  # the caller closed the pipe or went away
        try:
            fn, args = pickle.loads(payload)
            reply = ("ok", fn(*args))
        except BaseException as exc:  # noqa: BLE001 - everything goes back to the caller
            reply = ("err", exc, traceback.format_exc())
        try:
            conn.send(reply)
        except Exception as exc:  # the result or the exception does not pickle
            what = "result" if reply[0] == "ok" else f"exception {type(reply[1]).__name__}: {reply[1]}"
            conn.send(("err", _UnpicklableError(f"cannot send the {what} back: {exc}"), traceback.format_exc()))


def _exit_when_orphaned() -> None:
    # A worker stuck in a long computation never sees the pipe close, so a thread watches for the caller's death.
    # (PR_SET_PDEATHSIG would fire when the *thread* that started us exits, which any short-lived caller thread does.)
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="orphan-watch", daemon=True).start()


def _import_all(modules: Iterable[str]) -> None:
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a module that fails here fails again, loudly, in the call that needs it
            pass


# ----------------------------------------------------------------------------------------------------------------------
# Caller side.


# The worker's interpreter gets the caller's import path first, so that it finds the same modules.
_BOOT = "import sys, json; sys.path[:] = json.loads(sys.argv[1]); from {m} import _serve; _serve(int(sys.argv[2]))"


class _Worker:
    """One worker process and the caller's end of its pipe."""

    def __init__(self, preload: list[str]) -> None:
        self.conn, theirs = multiprocessing.Pipe(duplex=True)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-c", _BOOT.format(m=__name__), json.dumps(sys.path), str(theirs.fileno())],
                pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, stdout=2)
        finally:
            theirs.close()
        self.conn.send((preload, int(os.environ.get(MEMORY_ENV, "4096"))))
        self.ready = False

    def call(self, payload: bytes, deadline: float, what: str) -> tuple:
        """Send one pickled call and wait for its reply until `deadline` (raises BudgetExceeded or WorkerCrashed)."""
        if not self.ready:
            self._receive(deadline, what)  # the "ready" message
            self.ready = True
        try:
            self.conn.send_bytes(payload)
        except OSError:
            raise self._crashed(what) from None
        return self._receive(deadline, what)

    def _receive(self, deadline: float, what: str) -> tuple:
        if not self.conn.poll(max(0.0, deadline - time.monotonic())):
            raise BudgetExceeded(f"{what} ran out of its budget")
        try:
            return self.conn.recv()
        except (EOFError, OSError):
            raise self._crashed(what) from None

    def _crashed(self, what: str) -> WorkerCrashed:
        try:
            code = self.process.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            code = None
        return WorkerCrashed(f"bounded worker pid {self.process.pid} died (exit code {code}) during {what}")

    def kill(self) -> None:
        self.conn.close()
        self.process.kill()  # a no-op if it has already exited
        self.process.wait()


class WorkerPool:
    """A fixed number of worker processes, started on demand; a killed or dead worker is replaced at once."""

    def __init__(self, size: int | None = None) -> None:
        self.size = size or default_size()
        self._cond = threading.Condition()
        self._idle: deque[_Worker] = deque()  # most recently used on the right: its caches are warm
        self._live = 0  # started and not killed, idle or busy
        self._preload: dict[str, None] = {}  # modules that calls have used; new workers import them before "ready"
        self._closed = False
        self._warm_up_lock = threading.Lock()  # two warm-ups each holding half the workers would wait for each other

    def run(self, fn: Callable[..., Any], *args: Any, timeout_s: float) -> Any:
        """Run fn(*args) in a worker and return its value, within timeout_s seconds of wall-clock time."""
        deadline = time.monotonic() + timeout_s
        what = f"{getattr(fn, '__qualname__', fn)!s}()"
        payload = pickle.dumps((fn, args), protocol=pickle.HIGHEST_PROTOCOL)  # fails here, before a worker is touched
        self._remember(getattr(fn, "__module__", None) or "builtins")
        worker = self._acquire(deadline, what)
        try:
            reply = worker.call(payload, deadline, what)
        except BaseException:  # over budget, dead, or the caller interrupted: the worker's state is unknown
            self._replace(worker)
            raise
        self._release(worker)
        if reply[0] == "ok":
            return reply[1]
        _, exc, remote_traceback = reply
        if not isinstance(exc, Exception):  # SystemExit or the like must not end the caller
            exc = RuntimeError(f"{what} raised {exc!r}")
        raise exc from _RemoteTraceback(remote_traceback)

    def warm_up(self, modules: Iterable[str] = (), timeout_s: float = WARM_UP_TIMEOUT_S) -> None:
        """Start every worker and have each import `modules` (and so will their replacements); wait until done."""
        names = list(modules)
        self._remember(*names)
        deadline = time.monotonic() + timeout_s
        payload = pickle.dumps((_import_all, (names,)))
        taken: list[_Worker] = []
        if not self._warm_up_lock.acquire(timeout=timeout_s):
            raise BudgetExceeded("warm-up ran out of its budget waiting for another warm-up")
        try:
            for _ in range(self.size):  # all at once, so that each worker gets the imports
                taken.append(self._acquire(deadline, "warm-up"))
            for worker in taken:
                worker.call(payload, deadline, "warm-up")
        except BaseException:
            for worker in taken:
                self._replace(worker)
            raise
        finally:
            self._warm_up_lock.release()
        for worker in taken:
            self._release(worker)

    def shutdown(self) -> None:
        """Kill every worker; busy ones are killed when their call returns. The pool accepts no more calls."""
        with self._cond:
            self._closed = True
            idle, self._idle = list(self._idle), deque()
            self._live -= len(idle)
            self._cond.notify_all()
        for worker in idle:
            worker.kill()

    def _remember(self, *modules: str) -> None:
        with self._cond:
            for name in modules:
                self._preload.setdefault(name)

    def _acquire(self, deadline: float, what: str) -> _Worker:
        with self._cond:
            while True:
                if self._closed:
                    raise RuntimeError("the worker pool has been shut down")
                if self._idle:
                    return self._idle.pop()
                if self._live < self.size:
                    self._live += 1
                    preload = list(self._preload)
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise BudgetExceeded(f"{what} ran out of its budget waiting for a free worker")
                self._cond.wait(remaining)
        try:
            return _Worker(preload)
        except BaseException:
            with self._cond:
                self._live -= 1
                self._cond.notify()
            raise

    def _release(self, worker: _Worker) -> None:
        with self._cond:
            if not self._closed:
                self._idle.append(worker)
                self._cond.notify()
                return
            self._live -= 1
        worker.kill()

    def _replace(self, worker: _Worker) -> None:
        worker.kill()
        with self._cond:
            if self._closed:
                self._live -= 1
                return
            preload = list(self._preload)
        # Start the replacement now, not on the next call, so that its start-up overlaps other work.
        try:
            fresh = _Worker(preload)
        except BaseException:
            with self._cond:
                self._live -= 1
                self._cond.notify()
            raise
        with self._cond:
            self._idle.appendleft(fresh)  # used last: it may still be importing
            self._cond.notify()


# ----------------------------------------------------------------------------------------------------------------------
# One pool per process.


class PerProcess:
    """Holds one lazily made pool per process: a forked child makes its own rather than use its parent's workers.

    The pool is shut down at exit.
    """

    def __init__(self, make: Callable[[], WorkerPool]) -> None:
        self._make = make
        self._lock = threading.Lock()
        self._pool: WorkerPool | None = None
        os.register_at_fork(after_in_child=self._forget)
        atexit.register(self.close)

    def get(self) -> WorkerPool:
        with self._lock:
            if self._pool is None:
                self._pool = self._make()
            return self._pool

    def close(self) -> None:
        """Shut the pool down; the next `get` makes a new one."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown()

    def _forget(self) -> None:
        # After fork, in the child: the inherited workers belong to the parent; leave them alone.
        self._lock = threading.Lock()  # another thread may have held it at the fork
        self._pool = None


_default = PerProcess(WorkerPool)


def run_bounded(fn: Callable[..., Any], *args: Any, timeout_s: float) -> Any:
    """Run fn(*args) in a worker process of the default pool; raise BudgetExceeded after timeout_s seconds."""
    return _default.get().run(fn, *args, timeout_s=timeout_s)


async def run_bounded_async(fn: Callable[..., Any], *args: Any, timeout_s: float) -> Any:
    """`run_bounded` for event loops: waits in a thread, so the loop keeps running."""
    return await asyncio.to_thread(run_bounded, fn, *args, timeout_s=timeout_s)


def warm_up(modules: Iterable[str] = (), timeout_s: float = WARM_UP_TIMEOUT_S) -> None:
    """Start the default pool now and import `modules` in each worker, so that no later call pays for it."""
    _default.get().warm_up(modules, timeout_s)


def shutdown() -> None:
    """Kill the default pool's workers (a later call starts a new pool)."""
    _default.close()
