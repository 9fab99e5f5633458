"""Hard wall-clock bounds for a function call: the call runs in a pool worker process that is killed when it overruns.

    from groupscore.bounded.workers import BudgetExceeded, run_bounded

    try:
        comparison = run_bounded(symbolic_outcome, predicted, gold, 1e-6, timeout_s=2.0)
    except BudgetExceeded:
        ...  # score the item as a timeout

- `fn` must be a top-level function of an importable module (not of `__main__`: workers never run the caller's
  script, so an unguarded training script is not re-run in them); its arguments and return value must pickle.
- The budget covers waiting for a free worker and the call itself; a worker's start (a replacement forked after a
  kill) is given up to `WORKER_START_GRACE_S` more and its time is given back to the call, so one item's overrun never
  costs the next item its budget. When the budget runs out, `BudgetExceeded` is raised and the worker doing the call
  is killed and replaced at once.
- `WorkerUnavailable` (a BudgetExceeded) says the budget ran out before the call started: no worker was free or none
  started in time. Callers report that as an infrastructure failure, not as the call's own timeout.
- An exception raised by `fn` is re-raised in the caller (the worker's traceback is attached as `__cause__`);
  a worker that dies during a call (segfault, OOM kill) is replaced and the call raises `WorkerCrashed`.
- No signals are used in the caller, so this works from any thread, from asyncio (`run_bounded_async`) and from
  inside other processes (pool workers included). A process forked from the caller makes its own pool.
- How workers start (the forkserver idea): each pool starts one *template*, a fresh interpreter (as multiprocessing's
  "spawn" would) that imports the modules the calls need and then only forks workers on request. A replacement is
  ready in milliseconds with sympy already loaded, so killing a worker never starves the next call. The template runs
  no threads and shares nothing with the caller, so forking it is safe. Workers' stdout goes to the caller's stderr.
- The default pool holds `GROUPSCORE_BOUNDED_WORKERS` workers (default: min(cores, 4)), starts on the first call,
  and is shut down at exit. Each worker's address space is capped at `GROUPSCORE_WORKER_MEMORY_MB` (default 4096,
  0 = no cap; `cap_address_space`), so a runaway computation fails with MemoryError instead of swapping the machine.
- The first call in a process waits for the template to import its modules (about a second with sympy); call
  `warm_up(modules)` where that matters, e.g. at service start.

Why hand-written and not a library (measured against pebble 5.2.3's ProcessPool with per-task timeouts on a
forkserver context, `bench/pool_choice_bench.py`, bench/RESULTS.md "Runtime: which killable worker pool"): pebble
finds a timeout by polling every 0.1 s and stops the worker with SIGTERM, then waits up to 3 s before SIGKILL, so an
overrun inside one C call (a sympy big-integer step) held its worker 3.6 s against a 0.5 s budget and the next call
waited 3.1 s (here: SIGKILL at once, next call 9 ms); a replacement is a new multiprocessing process (110 ms, here a
fork of the template, 9 ms); every call passes a shared locked pipe and a manager thread (round trip 430 µs, here
116 µs), which cost 35% of the math RL batch's throughput and 0.3 s of a one-shot `groupscore score`; and the
forkserver re-imports the caller's `__main__` in each worker, so an unguarded training script broke the pool.
pebble was ahead only on the cold start (0.89 vs 1.06 s), and equal on memory caps and on budgets spent waiting.

One module because its two sides, the caller's pool and the template and workers it starts, speak one private
protocol (the boot line, the control socket, the ready/ok/err replies) and are only understood read together.
"""

from __future__ import annotations

import atexit
import importlib
import json
import multiprocessing
import os
import pickle
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable
from multiprocessing.connection import Connection
from typing import Any

# The settings (GROUPSCORE_BOUNDED_WORKERS, GROUPSCORE_WORKER_MEMORY_MB): read when a pool is made, and named here for
# the runtime, which sets the size for its batch workers' pools.
from groupscore.bounded.settings import MEMORY_ENV as MEMORY_ENV
from groupscore.bounded.settings import MIN_WORKER_MEMORY_MB as MIN_WORKER_MEMORY_MB
from groupscore.bounded.settings import SIZE_ENV as SIZE_ENV
from groupscore.bounded.settings import load as load_settings

WARM_UP_TIMEOUT_S = 120.0
# How much longer than its budget a call may wait for its worker to *start* (a fork of the template: milliseconds on an
# idle machine, longer on a loaded one). A start is the pool's business, not the call's: after one item's overrun
# killed a worker, the next item must not lose its budget to the replacement's start and come back unscored.
WORKER_START_GRACE_S = 10.0


def worker_memory_mb() -> int:
    """$GROUPSCORE_WORKER_MEMORY_MB (default 4096; 0: no cap), checked as the service's settings check it."""
    return load_settings().worker_memory_mb


class BudgetExceeded(TimeoutError):
    """The call did not finish within its wall-clock budget (the worker running it was killed)."""


class WorkerUnavailable(BudgetExceeded):
    """The budget ran out before the call started (no free worker, or none started in time): nothing was computed,
    so this is the host's failure, not the call's."""


class WorkerCrashed(RuntimeError):
    """The worker process died during the call; it has been replaced."""


class _RemoteTraceback(Exception):
    """Carries the worker's formatted traceback, shown as the cause of a re-raised exception."""

    def __str__(self) -> str:
        return str(self.args[0])


class _UnpicklableError(Exception):
    """Stands in for a worker-side exception (or result) that could not be sent back."""


def default_size() -> int:
    return load_settings().bounded_workers or max(1, min(len(os.sched_getaffinity(0)), 4))


# ----------------------------------------------------------------------------------------------------------------------
# Template side: runs in the template process and, after a fork, in each worker.


def _template_main(control_fd: int, preload: list[str], memory_mb: int) -> None:
    """Import `preload`, then fork one worker per request until the caller closes the control socket."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C belongs to the caller, which then shuts us down
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps workers the caller kills
    control = socket.socket(fileno=control_fd)
    attempted: set[str] = set()
    _import_all(preload, attempted)
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(control, 1 << 16, 1)
        except OSError:
            message = b""
        if not message:
            os._exit(0)  # the caller is gone or shut us down; our workers notice and follow
        _import_all(json.loads(message), attempted)  # modules a newer call needs: forks after this inherit them
        if os.fork() == 0:
            control.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            try:
                _serve(Connection(fds[0]), memory_mb)
            finally:
                os._exit(0)
        os.close(fds[0])


def _serve(conn: Connection, memory_mb: int) -> None:
    """Worker main loop: say ready, then answer one call at a time until the pipe closes."""
    cap_address_space(memory_mb)
    _exit_when_orphaned()
    conn.send(("ready", os.getpid()))
    while True:
        try:
            payload = conn.recv_bytes()
        except (EOFError, OSError):
            return  # the caller closed the pipe or went away
        try:
            fn, args = pickle.loads(payload)
            reply: tuple[Any, ...] = ("ok", fn(*args))
        except BaseException as exc:  # noqa: BLE001 - everything goes back to the caller
            reply = ("err", exc, traceback.format_exc())
        try:
            conn.send(reply)
        except Exception as exc:  # noqa: BLE001 - the result or the exception does not pickle
            what = "result" if reply[0] == "ok" else f"exception {type(reply[1]).__name__}: {reply[1]}"
            conn.send(("err", _UnpicklableError(f"cannot send the {what} back: {exc}"), traceback.format_exc()))


def cap_address_space(memory_mb: int) -> None:
    """Cap this process's address space at `memory_mb` (0: no cap), so that a runaway allocation raises MemoryError
    in it instead of exhausting the host. Also used for the service's scoring processes.

    The soft limit only: nothing untrusted runs in these processes, and the jails they start (nsjail) must be free to
    set their own, possibly higher, limit. Address space counts what is reserved, not used, so malloc's per-thread
    arenas (64 MB each, up to 8 per core) are capped at a few first: a process running many sandbox threads would
    otherwise reserve gigabytes it never touches.
    """
    if memory_mb <= 0:
        return
    try:
        import ctypes

        ctypes.CDLL(None).mallopt(-8, 4)  # M_ARENA_MAX (glibc); elsewhere there is no such reservation to cap
    except (OSError, AttributeError):
        pass
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))


def _exit_when_orphaned() -> None:
    # A worker stuck in a long computation never sees its pipe close, so a thread watches its parent, the template
    # (which exits as soon as the caller does). PR_SET_PDEATHSIG is no help: it tracks a thread, not a process.
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="orphan-watch", daemon=True).start()


def _import_all(modules: Iterable[str], attempted: set[str] | None = None) -> None:
    for name in modules:
        if attempted is not None:
            if name in attempted:
                continue
            attempted.add(name)
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a module that fails here fails again, loudly, in the call that needs it
            pass


# ----------------------------------------------------------------------------------------------------------------------
# Caller side.

# The template's interpreter gets the caller's import path first, so that it finds the same modules.
_BOOT = (
    "import sys, json; sys.path[:] = json.loads(sys.argv[1]); from {module} import _template_main; "
    "_template_main(int(sys.argv[2]), json.loads(sys.argv[3]), int(sys.argv[4]))"
)


templates_started = 0  # templates this process has started (tests check that a cheap item starts none)


class _Template:
    """The caller's handle on a template process: asks it for workers over a Unix socket."""

    def __init__(self, preload: list[str], memory_mb: int | None = None) -> None:
        global templates_started
        templates_started += 1
        cap = str(worker_memory_mb() if memory_mb is None else memory_mb)  # a bad value fails here, in the caller
        self.control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    _BOOT.format(module=__name__),
                    json.dumps(sys.path),
                    str(theirs.fileno()),
                    json.dumps(preload),
                    cap,
                ],
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
                stdout=2,
            )
        finally:
            theirs.close()
        self._lock = threading.Lock()

    def alive(self) -> bool:
        return self.process.poll() is None

    def fork(self, preload: list[str]) -> Connection:
        """Ask for a worker; returns the caller's end of its pipe at once (the worker says "ready" when it runs)."""
        ours, theirs = multiprocessing.Pipe(duplex=True)
        try:
            with self._lock:
                socket.send_fds(self.control, [json.dumps(preload).encode()], [theirs.fileno()])
        finally:
            theirs.close()
        return ours

    def close(self) -> None:
        self.control.close()
        self.process.kill()
        self.process.wait()


class _Worker:
    """One worker process, as seen through its pipe."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.pid: int | None = None  # known once the worker says "ready"
        self._pidfd: int | None = None

    def call(self, payload: bytes, deadline: float, what: str) -> tuple[Any, ...]:
        """Send one pickled call and wait for its reply until `deadline` (raises BudgetExceeded or WorkerCrashed)."""
        self.send(payload, what)
        return self._receive(deadline, what)

    def send(self, payload: bytes, what: str) -> None:
        """Send one pickled call; its reply is read by `receive`."""
        try:
            self.conn.send_bytes(payload)
        except OSError:
            raise self._crashed(what) from None

    def receive(self, deadline: float, what: str) -> tuple[Any, ...]:
        """The reply to the call `send` sent, waited for until `deadline`."""
        return self._receive(deadline, what)

    def wait_ready(self, deadline: float, what: str) -> bool:
        """Wait for the worker's "ready" until `deadline`; False if it has not come yet."""
        if self.pid is None:
            if not self.conn.poll(max(0.0, deadline - time.monotonic())):
                return False
            _, self.pid = self._receive(deadline, what)
            try:  # a pidfd cannot point at another process later, as a recycled pid could
                self._pidfd = os.pidfd_open(self.pid)
            except (AttributeError, OSError):
                self._pidfd = None
        return True

    def idle_and_alive(self) -> bool:
        # A started worker between calls has nothing to say: anything readable is the end of its pipe.
        return self.pid is None or not self.conn.poll(0)

    def _receive(self, deadline: float, what: str) -> tuple[Any, ...]:
        if not self.conn.poll(max(0.0, deadline - time.monotonic())):
            raise BudgetExceeded(f"{what} ran out of its budget")
        try:
            reply: tuple[Any, ...] = self.conn.recv()
            return reply
        except (EOFError, OSError):
            raise self._crashed(what) from None

    def _crashed(self, what: str) -> WorkerCrashed:
        return WorkerCrashed(f"bounded worker pid {self.pid} died during {what}")

    def kill(self) -> None:
        # Closing the pipe is enough for a worker that has not started yet: it finds the pipe closed and exits.
        self.conn.close()
        try:
            if self._pidfd is not None:
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
            elif self.pid is not None:
                os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # it had already died
        finally:
            if self._pidfd is not None:
                os.close(self._pidfd)
                self._pidfd = None


class WorkerPool:
    """A fixed number of worker processes, forked on demand from a template; a killed worker is replaced at once.

    memory_mb: each worker's address-space cap (default: $GROUPSCORE_WORKER_MEMORY_MB, see `worker_memory_mb`)."""

    def __init__(self, size: int | None = None, memory_mb: int | None = None) -> None:
        self.size = size or default_size()
        self.memory_mb = memory_mb
        self._started: set[_Worker] = set()  # forked and not killed, idle or busy (for `pids`)
        self._cond = threading.Condition()
        self._idle: deque[_Worker] = deque()  # most recently used on the right: its caches are warm
        self._live = 0  # started and not killed, idle or busy
        self._preload: dict[str, None] = {}  # modules that calls have used; the template imports them before forking
        self._template: _Template | None = None
        self._closed = False
        self._warm_up_lock = threading.Lock()  # two warm-ups each holding half the workers would wait for each other

    def run(self, fn: Callable[..., Any], *args: Any, timeout_s: float) -> Any:
        """Run fn(*args) in a worker and return its value, within timeout_s seconds of wall-clock time."""
        deadline = time.monotonic() + timeout_s
        what = f"{getattr(fn, '__qualname__', fn)!s}()"
        if timeout_s <= 0:
            raise BudgetExceeded(f"{what} had no budget left")
        payload = pickle.dumps((fn, args), protocol=pickle.HIGHEST_PROTOCOL)  # fails here, before a worker is touched
        self._remember(getattr(fn, "__module__", None) or "builtins")
        worker = self._acquire(deadline, what)
        try:
            waited_from = time.monotonic()
            ready = worker.wait_ready(max(deadline, waited_from) + WORKER_START_GRACE_S, what)
            if ready:
                deadline += time.monotonic() - waited_from  # the start's time is given back to the call
                reply = worker.call(payload, deadline, what)
        except BaseException:  # over budget, dead, or the caller was interrupted: the worker's state is unknown
            self._replace(worker)
            raise
        if not ready:
            self._release(worker)  # still starting, which is not its fault: keep it for the next call
            raise WorkerUnavailable(f"{what} ran out of its budget waiting for a worker to start")
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
        self.run_on_each(_import_all, names, timeout_s=timeout_s)

    def run_on_each(self, fn: Callable[..., Any], *args: Any, timeout_s: float = WARM_UP_TIMEOUT_S) -> list[Any]:
        """Start every worker and run fn(*args) once in each (a start-up step, such as loading what its calls need);
        their values, one per worker. A failure of any of them is raised and every worker taken is replaced."""
        deadline = time.monotonic() + timeout_s
        payload = pickle.dumps((fn, args), protocol=pickle.HIGHEST_PROTOCOL)
        what = f"{getattr(fn, '__qualname__', fn)!s}() on every worker"
        if not self._warm_up_lock.acquire(timeout=timeout_s):
            raise BudgetExceeded(f"{what} ran out of its budget waiting for another warm-up")
        taken: list[_Worker] = []
        replies: list[tuple[Any, ...]] = []
        try:
            for _ in range(self.size):  # all at once, so that each worker runs it
                taken.append(self._acquire(deadline, what))
            for worker in taken:  # every worker gets the call before any reply is awaited: they run it side by side
                if not worker.wait_ready(deadline, what):
                    raise BudgetExceeded(f"{what} ran out of its budget waiting for the workers to start")
                worker.send(payload, what)
            replies = [worker.receive(deadline, what) for worker in taken]
        except BaseException:
            for worker in taken:
                self._replace(worker)
            raise
        finally:
            self._warm_up_lock.release()
        for worker in taken:
            self._release(worker)
        for reply in replies:
            if reply[0] != "ok":
                _, exc, remote_traceback = reply
                raise (
                    exc if isinstance(exc, Exception) else RuntimeError(f"{what} raised {exc!r}")
                ) from _RemoteTraceback(remote_traceback)
        return [reply[1] for reply in replies]

    def pids(self) -> list[int]:
        """Pids of the started workers, idle or busy (one still starting has none yet)."""
        with self._cond:
            return sorted(worker.pid for worker in self._started if worker.pid is not None)

    def shutdown(self) -> None:
        """Kill every worker and the template; busy workers die when their call returns. No more calls after this."""
        with self._cond:
            self._closed = True
            idle, self._idle = list(self._idle), deque()
            self._live -= len(idle)
            template, self._template = self._template, None
            self._cond.notify_all()
        for worker in idle:
            self._kill(worker)
        if template is not None:
            template.close()

    def _remember(self, *modules: str) -> None:
        with self._cond:
            for name in modules:
                self._preload.setdefault(name)

    def _acquire(self, deadline: float, what: str) -> _Worker:
        with self._cond:
            while True:
                if self._closed:
                    raise RuntimeError("the worker pool has been shut down")
                while self._idle:
                    worker = self._idle.pop()
                    if worker.idle_and_alive():
                        return worker
                    self._kill(worker)  # died while idle (its template died, or the OOM killer came): drop it
                    self._live -= 1
                if self._live < self.size:
                    self._live += 1
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise WorkerUnavailable(f"{what} ran out of its budget waiting for a free worker")
                self._cond.wait(remaining)
        try:
            return self._fork()
        except BaseException:
            with self._cond:
                self._live -= 1
                self._cond.notify()
            raise

    def _fork(self) -> _Worker:
        with self._cond:
            if self._template is None or not self._template.alive():
                if self._template is not None:
                    self._template.close()
                self._template = _Template(list(self._preload), self.memory_mb)
            template, preload = self._template, list(self._preload)
        try:
            worker = _Worker(template.fork(preload))
        except OSError:  # the template died since we looked: start another once
            with self._cond:
                if self._template is template:
                    template.close()
                    self._template = _Template(list(self._preload), self.memory_mb)
                template = self._template
            worker = _Worker(template.fork(preload))
        with self._cond:
            self._started.add(worker)
        return worker

    def _kill(self, worker: _Worker) -> None:
        with self._cond:
            self._started.discard(worker)
        worker.kill()

    def _release(self, worker: _Worker) -> None:
        with self._cond:
            if not self._closed:
                self._idle.append(worker)
                self._cond.notify()
                return
            self._live -= 1
        self._kill(worker)

    def _replace(self, worker: _Worker) -> None:
        self._kill(worker)
        with self._cond:
            if self._closed:
                self._live -= 1
                return
        try:
            fresh = self._fork()  # forked now, not on the next call: it is ready by the time anyone needs it
        except BaseException:
            with self._cond:
                self._live -= 1
                self._cond.notify()
            raise
        with self._cond:
            self._idle.appendleft(fresh)  # used last: the others have warm caches
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
    import asyncio  # here, not at the top: a one-shot `groupscore score` never needs it (~0.1 s of imports)

    return await asyncio.to_thread(run_bounded, fn, *args, timeout_s=timeout_s)


def warm_up(modules: Iterable[str] = (), timeout_s: float = WARM_UP_TIMEOUT_S) -> None:
    """Start the default pool now and import `modules` in each worker, so that no later call pays for it."""
    _default.get().warm_up(modules, timeout_s)


_started_lock = threading.Lock()
_started: set[tuple[int, str]] = set()  # (pid, module): a forked child has a pool of its own to start


def start_once(modules: Iterable[str], timeout_s: float = WARM_UP_TIMEOUT_S) -> None:
    """Before the first `run_bounded` that needs `modules`: start the default pool with them imported, once per
    process, outside any call's budget (a cold start, about a second with sympy, is not the item's fault).

    For callers that need a worker only for some items (math's symbolic step): nothing starts until such an item
    comes, and a process that never sees one never starts a pool. A failed start is not retried here; the calls
    that follow start their workers inside their own budgets."""
    pid = os.getpid()
    with _started_lock:
        missing = [name for name in modules if (pid, name) not in _started]
        _started.update((pid, name) for name in missing)
    if missing:
        try:
            warm_up(missing, timeout_s)
        except Exception:  # noqa: BLE001 - see above
            pass


def shutdown() -> None:
    """Kill the default pool's workers (a later call starts a new pool)."""
    with _started_lock:
        _started.clear()
    _default.close()
