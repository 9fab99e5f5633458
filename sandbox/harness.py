"""One run's harness, whichever launcher starts its jail: the run directory, the cgroup slot, the output caps, the wall
clock, and the raw outcome (`RawRun`) that `classify` turns into a status.

Two launchers start jails beside it, as peers: nsjail_launcher.py (nsjail itself: every language and command) and
warm_launcher.py (a fork of a warm Python template, warm.py). Both apply one `Policy` (policy.py) and neither holds a
limit of its own. `execute` is how every run goes: its host dir with its files and its own host ids, a place among the
jails alive at once, the launcher's run (started in the run's cgroup slot, its output read up to the caps, killed at the
wall clock, reaped), and the files it was asked to collect.
"""

from __future__ import annotations

import contextlib
import os
import select
import selectors
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO, Literal, Protocol

from groupscore.sandbox import settings as sandbox_settings
from groupscore.sandbox.cgroups import Slot, SlotPool
from groupscore.sandbox.errors import SandboxUnavailable
from groupscore.sandbox.policy import Policy, host_cgroups
from groupscore.sandbox.uids import id_pool, per_jail_ids
from groupscore.sandbox.workdir import RunDir, read_collected

LauncherName = Literal["nsjail", "warm"]
Pipe = IO[bytes]
Kill = Callable[[], float]  # ends a run (its whole jail) and says when
DRAIN_AFTER_KILL_S = 2.0


@dataclass
class RawRun:
    """What one run did, as the harness and its launcher saw it (raw; `classify` reads it)."""

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
    launcher_time_limit: bool = False  # the launcher's own time limit ended the run (nsjail's backstop)
    log: str = ""
    peak_memory_bytes: int | None = None
    oom_killed: bool = False
    pids_limit_hit: bool = False
    survivors_killed: int = 0


class Launcher(Protocol):
    """Starts one run's jail under a policy, in the run's cgroup slot (`prepared_slot`), reads its output through
    `collect_output`, holds it to the wall clock, reaps it and fills a RawRun (`finish_slot` for the slot's numbers)."""

    name: LauncherName
    run_dir_parent: str | None  # where the run's host dir goes (None: workdir.run_base())
    run_dir_owner: int  # the host uid owning that dir, as root

    def launch(self, policy: Policy, rundir: RunDir, argv: list[str], stdin: bytes, as_init: bool) -> RawRun: ...


def execute(
    launcher: Launcher,
    policy: Policy,
    files: dict[str, bytes],
    argv: list[str],
    stdin: bytes,
    collect: list[str],
    executable: frozenset[str] = frozenset(),
    as_init: bool = False,
) -> tuple[RawRun, dict[str, bytes], list[str]]:
    """Run argv in a fresh jail that `launcher` starts under `policy`, with `files` in its work dir.

    Returns the outcome, the collected files and the names of those cut at the policy's size cap.
    """
    parent, owner = launcher.run_dir_parent, launcher.run_dir_owner
    with run_dir(policy, files, collect, executable, parent=parent, owner=owner) as rundir:
        with concurrent_jails():
            out = launcher.launch(policy, rundir, argv, stdin, as_init)
        got, truncated = read_collected(rundir, policy.collected_file_bytes)
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
) -> Iterator[RunDir]:
    """A run's host dir holding `files` and empty `collect` files, owned by the run's own host id (as root; else the
    policy's ids).

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
        yield rundir
    finally:
        rundir.remove()
        if host_id is not None:
            id_pool().release(host_id)


# -- jails alive at once, and their cgroup slots ---------------------------------------------------------------------


def _max_jails() -> int:
    """Jails alive at once in this process, whoever calls: $GROUPSCORE_SANDBOX_MAX_JAILS, else 4 per CPU."""
    return sandbox_settings.current().max_jails or 4 * max(1, len(os.sched_getaffinity(0)))


_JAILS: threading.BoundedSemaphore | None = None
_JAILS_LOCK = threading.Lock()
_POOL: SlotPool | None = None
_POOL_LOCK = threading.Lock()


def concurrent_jails() -> threading.BoundedSemaphore:
    """The places for jails alive at once in this process: a run holds one from its start to its reaping."""
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


def prepared_slot(policy: Policy, own_tasks: int | None = None) -> Slot | None:
    """A cgroup slot with the policy's cgroup limits set (None when the host has no usable cgroups). own_tasks: our
    processes besides the program's, plus the slot's parked thread if any (default: nsjail, the init shell, the
    launcher thread).

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
            slot.prepare((policy.cgroup_memory_mb or 0) << 20, (policy.cgroup_max_pids or 0) + ours)
            return slot
        except OSError as exc:
            error = exc
            slot.remove()
    raise SandboxUnavailable(f"cannot set cgroup limits for a run: {error}")


def finish_slot(slot: Slot, out: RawRun) -> None:
    """After the run: its numbers from the slot (peak memory, OOM kill, pids limit), anything left in it killed, and the
    slot back to the pool."""
    stats = slot.finish()
    out.peak_memory_bytes, out.oom_killed = stats.peak_memory_bytes, stats.oom_killed
    out.pids_limit_hit, out.survivors_killed = stats.pids_limit_hit, stats.survivors_killed
    slot_pool().release(slot)


# -- output caps and the wall clock ----------------------------------------------------------------------------------


def collect_output(
    stdout: Pipe, stderr: Pipe, out: RawRun, policy: Policy, start: float, kill: Kill, stderr_prefix_bytes: int = 0
) -> None:
    """Read both pipes into `out` up to the policy's caps until both close; `kill` ends the run (wall clock, output
    cap). stderr_prefix_bytes: bytes the launcher writes to stderr before the program (cut later), which the stderr
    cap leaves room for."""
    caps = {"stdout": policy.max_output_bytes, "stderr": policy.max_output_bytes + stderr_prefix_bytes}
    sel = selectors.DefaultSelector()
    sel.register(stdout, selectors.EVENT_READ, "stdout")
    sel.register(stderr, selectors.EVENT_READ, "stderr")
    deadline = start + policy.wall_time_s
    killed_at: float | None = None
    while sel.get_map():
        now = time.monotonic()
        if killed_at is None and now >= deadline:
            out.timed_out = True
            killed_at = kill()
        if killed_at is not None and now - killed_at > DRAIN_AFTER_KILL_S:
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


def await_pidfd(fd: int, out: RawRun, deadline: float) -> None:
    """Wait for the process behind pidfd `fd` to exit; past the deadline, mark the run timed out."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)  # readable once the process has exited
    if not poller.poll(max(0.0, deadline - time.monotonic()) * 1000):
        out.timed_out = True


def decode(b: bytearray) -> str:
    return bytes(b).decode("utf-8", errors="replace")


def peak_mb(out: RawRun) -> float | None:
    if out.peak_memory_bytes is not None:
        return round(out.peak_memory_bytes / (1 << 20), 2)
    return round(out.maxrss_kb / 1024, 2) if out.maxrss_kb else None
