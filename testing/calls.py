"""Calling a target under a hard wall-clock bound, without SIGALRM, and recording what came back.

The default caller runs the target in a worker process (`groupscore.testing.worker`) and waits for its answer with
`select` and a deadline; a call that overruns is reported as a hang and the worker's whole process group is killed
and replaced. This holds even for hangs that never release the GIL (a catastrophic regex, a huge integer power),
which no in-process timeout can interrupt. Targets that cannot be rebuilt in another process (lambdas, closures)
fall back to a daemon thread per call: a hang is still reported on time, but the stuck thread is left behind.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from groupscore.testing.call_result import CallResult, run_call
from groupscore.testing.cases import Case
from groupscore.testing.targets import Target, TargetError, TargetSpec


class Caller(ABC):
    """Runs calls of one target with a time bound."""

    isolation: str

    @abstractmethod
    def call(self, cases: Sequence[Case], timeout_s: float) -> CallResult: ...

    @abstractmethod
    def call_in_threads(self, cases: Sequence[Case], threads: int, timeout_s: float) -> list[CallResult]:
        """The same batch from `threads` threads at once (all started together)."""

    def close(self) -> None:
        pass

    def __enter__(self) -> Caller:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _hang(timeout_s: float) -> CallResult:
    return CallResult(None, f"no answer within {timeout_s:g} s", timeout_s, hang=True)


class ThreadCaller(Caller):
    """Each call in a daemon thread, waited on with a deadline. A hung call is reported and abandoned."""

    isolation = "thread"

    def __init__(self, target: Target):
        self.target = target
        self.fallback_reason = ""  # why calls run in threads rather than in a worker process, when not asked for

    def call(self, cases: Sequence[Case], timeout_s: float) -> CallResult:
        return self.call_in_threads(cases, 1, timeout_s)[0]

    def call_in_threads(self, cases: Sequence[Case], threads: int, timeout_s: float) -> list[CallResult]:
        results: list[CallResult | None] = [None] * threads
        barrier = threading.Barrier(threads)

        def work(slot: int) -> None:
            barrier.wait()
            results[slot] = run_call(self.target, cases)

        workers = [
            threading.Thread(target=work, args=(i,), daemon=True, name=f"groupscore-check-{i}") for i in range(threads)
        ]
        for worker in workers:
            worker.start()
        deadline = time.monotonic() + timeout_s
        for worker in workers:
            worker.join(max(0.0, deadline - time.monotonic()))
        out = []
        for worker, result in zip(workers, results):
            if worker.is_alive() or result is None:
                out.append(_hang(timeout_s))
            else:
                out.append(result)
        return out


class _WorkerGone(Exception):
    pass


class _Overran(Exception):
    pass


class ProcessCaller(Caller):
    """Calls in a worker process rebuilt from the target's spec; killed and replaced when a call overruns.

    `hash_seed` pins the worker's PYTHONHASHSEED, so that workers with different seeds expose rewards that depend on
    set or dict-of-str iteration order.
    """

    isolation = "process"

    def __init__(self, spec: TargetSpec, *, hash_seed: int = 1, startup_timeout_s: float = 120.0):
        self.spec = spec
        self.hash_seed = hash_seed
        self.startup_timeout_s = startup_timeout_s
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: Any = None

    # -- life cycle ---------------------------------------------------------------------------------------------
    def start(self) -> None:
        if self._proc is not None:
            return
        env = dict(os.environ, PYTHONHASHSEED=str(self.hash_seed), PYTHONUNBUFFERED="1")
        # The worker must import what this process imports (a reward module found through the current directory).
        env["PYTHONPATH"] = os.pathsep.join(p or os.getcwd() for p in sys.path)
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - the worker's for its whole life; _kill closes it
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "groupscore.testing.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
            bufsize=0,
            start_new_session=True,  # own process group: a kill takes the reward's children too
        )
        try:
            reply = self._request(("build", self.spec), time.monotonic() + self.startup_timeout_s)
        except _Overran:
            self._kill()
            raise TargetError(
                f"the target did not load within {self.startup_timeout_s:g} s in a worker process"
            ) from None
        except _WorkerGone as exc:
            self._kill()
            raise TargetError(f"the worker process died while loading the target: {exc}") from None
        if reply[0] != "ok":
            self._kill()
            raise TargetError(str(reply[1]))

    def close(self) -> None:
        self._kill()

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    stream.close()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def _stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0, os.SEEK_END)
        size = self._stderr.tell()
        self._stderr.seek(max(0, size - 600))
        return self._stderr.read().decode("utf-8", "replace").strip()

    # -- protocol: 8-byte length, then a pickle ------------------------------------------------------------------
    def _request(self, message: Any, deadline: float) -> Any:
        assert self._proc is not None and self._proc.stdin is not None and self._proc.stdout is not None
        payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            self._proc.stdin.write(struct.pack("!Q", len(payload)) + payload)
        except (BrokenPipeError, OSError):
            raise _WorkerGone(self._death_note()) from None
        size = struct.unpack("!Q", self._read_exact(8, deadline))[0]
        return pickle.loads(self._read_exact(size, deadline))

    def _read_exact(self, size: int, deadline: float) -> bytes:
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        buf = bytearray()
        while len(buf) < size:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _Overran()
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                raise _Overran()
            chunk = os.read(fd, min(size - len(buf), 1 << 20))
            if not chunk:
                raise _WorkerGone(self._death_note())
            buf += chunk
        return bytes(buf)

    def _death_note(self) -> str:
        assert self._proc is not None
        try:
            code = self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        tail = self._stderr_tail()
        return how + (f"; stderr: {tail[-300:]}" if tail else "")

    # -- calls --------------------------------------------------------------------------------------------------
    def _exchange(self, message: Any, timeout_s: float, expected: int) -> list[CallResult]:
        self.start()
        try:
            reply = self._request(message, time.monotonic() + timeout_s)
        except _Overran:
            self._kill()
            return [_hang(timeout_s)] * expected
        except _WorkerGone as exc:
            self._kill()
            return [CallResult(None, f"the process running the reward died ({exc})", 0.0)] * expected
        return reply[1]

    def call(self, cases: Sequence[Case], timeout_s: float) -> CallResult:
        return self._exchange(("call", list(cases)), timeout_s, 1)[0]

    def call_in_threads(self, cases: Sequence[Case], threads: int, timeout_s: float) -> list[CallResult]:
        return self._exchange(("threads", list(cases), threads), timeout_s, threads)


def make_caller(target: Target, isolation: str = "auto", hash_seed: int = 1) -> Caller:
    """A process caller when the target can be rebuilt elsewhere (and isolation allows), else a thread caller.

    With "auto", a target that loads here but not in a fresh process (it relies on state set up at run time) falls
    back to threads; the thread caller's `fallback_reason` says why.
    """
    if isolation not in ("auto", "process", "thread"):
        raise ValueError(f"isolation must be auto, process or thread, not {isolation!r}")
    spec = target.spec()
    if isolation == "process" and spec is None:
        raise TargetError(f"{target.description} cannot be rebuilt in a worker process (define it at module level)")
    if isolation in ("auto", "process") and spec is not None:
        caller = ProcessCaller(spec, hash_seed=hash_seed)
        try:
            caller.start()
        except TargetError as exc:
            if isolation == "process":
                raise
            fallback = ThreadCaller(target)
            fallback.fallback_reason = f"it did not load in a worker process ({exc})"
            return fallback
        return caller
    fallback = ThreadCaller(target)
    if spec is None:
        fallback.fallback_reason = "it cannot be rebuilt in a worker process (a lambda, a closure or __main__)"
    return fallback
