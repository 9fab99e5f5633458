"""The status of a run, from what the harness and its launcher reported (RawRun): exit, signal, limits hit."""

from __future__ import annotations

import signal

from groupscore.sandbox.harness import RawRun
from groupscore.sandbox.limits import Limits
from groupscore.sandbox.result import RunStatus

# How the other runtimes say they ran out of memory (the JVM's heap, V8's heap, Go's runtime, Rust's allocator, bash):
# a stack trace or a native backtrace may follow, hence a search of the stderr's tail rather than its last line.
_OWN_OOM = (
    "java.lang.OutOfMemoryError",
    "JavaScript heap out of memory",
    "runtime: out of memory",
    "Array buffer allocation failed",
    "memory allocation of ",
    "xmalloc: cannot allocate",
)


def _tail(text: str, n: int = 400) -> str:
    return text[-n:]


def classify(out: RawRun, limits: Limits) -> tuple[RunStatus, str | None]:
    # An OOM kill recorded in the run's own slot comes first, even when nsjail left no exit status: the slot holds
    # nothing but this run, so the run charged that memory (memfd or tmpfs pages count in no process's RSS, and the
    # kernel may then pick nsjail itself as the largest process). A sandbox error here would be a masked infra_error
    # that a program could choose to get instead of its 0.
    if out.oom_killed:  # also before timeout: an OOM kill explains a run that then hung on its dead children
        return RunStatus.MEMORY_LIMIT, f"cgroup memory limit {limits.memory_mb} MB"
    if out.setup_failed:
        errs = [ln for ln in out.log.splitlines() if ln.startswith(("[E]", "[F]", "[W]"))]
        return RunStatus.SANDBOX_ERROR, "jail setup failed: " + (
            " | ".join(errs)[-800:] or f"nsjail status {out.nsjail_status}"
        )
    if out.output_limit:
        return RunStatus.OUTPUT_LIMIT, f"output passed {limits.max_output_bytes} bytes; run stopped"
    if out.timed_out:
        return RunStatus.TIMEOUT, f"wall clock limit {limits.wall_time_s}s"
    # SIGXCPU at the soft limit; SIGKILL at the hard one (soft + 1 s) if the program ignored SIGXCPU.
    # The kernel's CPU clock for rlimits runs a little ahead of wait4's accounting, hence the margin.
    if out.signal == signal.SIGXCPU or (out.signal == signal.SIGKILL and out.cpu_time_s >= limits.cpu_seconds * 0.9):
        return RunStatus.TIMEOUT, f"cpu time limit {limits.cpu_seconds}s"
    if out.launcher_time_limit:
        return RunStatus.TIMEOUT, "nsjail time limit"
    if out.exit_code not in (None, 0) or out.signal is not None:
        tail = _tail(out.stderr.decode(errors="replace")).rstrip().splitlines()
        last = tail[-1] if tail else ""
        runtime_said = _tail(out.stderr.decode(errors="replace"), 8192)
        if "unable to create native thread" in runtime_said:  # the JVM's word for the pids limit
            return RunStatus.RUNTIME_ERROR, f"process limit {limits.max_processes} reached"
        if last.startswith("MemoryError") or "std::bad_alloc" in last or any(m in runtime_said for m in _OWN_OOM):
            return RunStatus.MEMORY_LIMIT, f"out of memory (address space {limits.address_space_mb} MB)"
        if out.signal == signal.SIGXFSZ:
            return RunStatus.RUNTIME_ERROR, f"file size limit {limits.max_file_bytes} bytes"
        if out.pids_limit_hit:
            return RunStatus.RUNTIME_ERROR, f"process limit {limits.max_processes} reached"
        return RunStatus.RUNTIME_ERROR, None
    return RunStatus.OK, None
