"""cgroup memory and pids limits per run: detect v1 or v2, keep a pool of reusable per-run cgroups.

Every process of a run is charged to its slot: on v1 nsjail is started from a thread of ours that lives in the slot
(a child is born in its parent thread's cgroups), so no process has to be moved; elsewhere the harness moves nsjail
into the slot before nsjail clones the jail (nsjail waits on a pipe for its config, which is written only after its
pid is in cgroup.procs). After the run the slot tells the whole-tree peak memory, whether the OOM killer or the pids
limit fired, and which processes (none, normally) are still in it; those are killed before the slot is reused.

Why a thread: moving a process between cgroups takes the kernel's global cgroup lock and, with migrations ~30 ms
apart, waits out an RCU grace period each time: ~9 ms per run here, two moves (memory, pids) serialised across all
runs of the machine. A v1 slot's thread joins it once, when the slot is made.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures.thread import BrokenThreadPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from groupscore.sandbox import settings as sandbox_settings

T = TypeVar("T")

CONTROLLERS = ("memory", "pids")


@dataclass(frozen=True)
class CgroupSupport:
    """What the host offers. `version` is None when neither controller can be used; `reason` says why."""

    version: str | None  # "v1", "v2" or None
    memory: bool
    pids: bool
    roots: dict[str, str] = field(default_factory=dict)  # controller -> dir under which our cgroups go
    reason: str = ""

    def describe(self) -> str:
        if not self.version:
            return f"none: {self.reason}"
        have = "+".join(c for c in CONTROLLERS if getattr(self, c))
        return f"{self.version} {have}" + (f" ({self.reason})" if self.reason else "")


def _parse_mountinfo(text: str) -> list[tuple[str, str, str, set[str]]]:
    """(mount root, mount point, fstype, super options) for each cgroup/cgroup2 mount."""
    mounts = []
    for line in text.splitlines():
        left, _, right = line.partition(" - ")
        fields, rfields = left.split(), right.split()
        if len(fields) < 5 or len(rfields) < 3 or rfields[0] not in ("cgroup", "cgroup2"):
            continue
        mounts.append((fields[3], fields[4], rfields[0], set(rfields[2].split(","))))
    return mounts


def _parse_self_cgroup(text: str) -> dict[str, str]:
    """controller -> our cgroup path; the v2 entry is under key ''."""
    paths = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            for ctrl in parts[1].split(",") if parts[1] else [""]:
                paths[ctrl] = parts[2]
    return paths


def _under(mount_point: str, mount_root: str, own_path: str) -> str:
    rel = os.path.relpath(own_path, mount_root) if own_path.startswith(mount_root) else "."
    return os.path.normpath(os.path.join(mount_point, rel))


def detect_cgroups(
    mountinfo: str | None = None, self_cgroup: str | None = None, *, v2_parent: str | None = None
) -> CgroupSupport:
    """Find where memory and pids cgroups can be made: v1 controller mounts first, else the v2 tree.

    v1: our cgroups go below our own cgroup in each hierarchy (so host-level limits on us still apply).
    v2: below `v2_parent` (GROUPSCORE_CGROUP_PARENT, e.g. a systemd-delegated dir) or the v2 root.
    Writability is checked by the pool when it makes its first slot, not here.
    """
    if mountinfo is None:
        mountinfo = Path("/proc/self/mountinfo").read_text()
    if self_cgroup is None:
        self_cgroup = Path("/proc/self/cgroup").read_text()
    mounts, own = _parse_mountinfo(mountinfo), _parse_self_cgroup(self_cgroup)
    v1 = {}
    for root, point, fstype, opts in mounts:
        for ctrl in CONTROLLERS:
            if fstype == "cgroup" and ctrl in opts and ctrl not in v1 and ctrl in own:
                v1[ctrl] = _under(point, root, own[ctrl])
    if v1:
        return CgroupSupport(
            "v1",
            "memory" in v1,
            "pids" in v1,
            v1,
            "" if len(v1) == 2 else f"no v1 {'pids' if 'memory' in v1 else 'memory'} controller",
        )
    for _root, point, fstype, _ in mounts:
        if fstype != "cgroup2":
            continue
        try:
            available = set(Path(point, "cgroup.controllers").read_text().split())
        except OSError:
            continue
        have = [c for c in CONTROLLERS if c in available]
        if not have:
            continue
        parent = v2_parent or sandbox_settings.current().cgroup_parent or point
        return CgroupSupport(
            "v2",
            "memory" in have,
            "pids" in have,
            {c: parent for c in have},
            "" if len(have) == 2 else f"v2 lacks {'pids' if 'memory' in have else 'memory'}",
        )
    return CgroupSupport(None, False, False, {}, "no cgroup v1 memory/pids mount and no v2 controllers")


@dataclass
class SlotStats:
    peak_memory_bytes: int | None
    oom_killed: bool
    pids_limit_hit: bool
    survivors_killed: int


def _write(path: Path | str, value: str) -> None:
    Path(path).write_text(value)


def _read(path: Path | str) -> str:
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return ""


def _counter(text: str, key: str) -> int:
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == key:
            return int(parts[1])
    return 0


class _Launcher:
    """A thread of ours that lives in one slot's cgroups and runs the calls that start a run's processes there.

    v1 places each thread on its own (a `tasks` file takes a thread id); the process's memory stays charged where its
    main thread is, while anything the thread forks is born in the slot with its own memory. The memcg OOM killer
    weighs only thread-group leaders, so a run that hits its limit can never get this (larger) process killed."""

    def __init__(self, dirs: list[Path]):
        self._thread = ThreadPoolExecutor(
            1, thread_name_prefix="sandbox-slot", initializer=_join_thread, initargs=(dirs,)
        )
        try:
            self._thread.submit(lambda: None).result()  # starts the thread, which joins the slot first
        except BrokenThreadPool as exc:
            self._thread.shutdown()
            raise OSError(f"a thread cannot join the slot: {exc.__cause__ or exc}") from exc

    def call(self, fn: Callable[[], T]) -> T:
        return self._thread.submit(fn).result()

    def stop(self) -> None:
        """End the thread (which leaves the slot's cgroups with it)."""
        self._thread.shutdown(wait=True)


def _join_thread(dirs: list[Path]) -> None:
    tid = str(threading.get_native_id())
    for d in dirs:
        _write(d / "tasks", tid)


class Slot:
    """One cgroup (one dir per controller in v1, one dir in v2) holding one run at a time."""

    # Tasks of ours that a slot holds besides the run's: its launcher thread (v1).
    OWN_TASKS = 1

    def __init__(self, support: CgroupSupport, dirs: dict[str, Path]):
        self.support, self.dirs = support, dirs
        self._launcher: _Launcher | None = None
        self._launch_refused = False
        self._files: dict[tuple[str, str], str] = {}  # (controller, file) -> path: runs read the same few each time
        # v2 has one dir for both controllers; v1 one per hierarchy.
        self._procs_files = sorted({str(d / "cgroup.procs") for d in dirs.values()})
        self._oom_before = self._pids_before = self._baseline = 0
        # What the last run of a reused (v1) slot left: its limits, and its event counters as read at its finish.
        # Only this process writes the slot's files, and a slot is reused only once found empty, so nothing can
        # change them in between: the next run skips rewriting equal limits and rereading the counters.
        self._limits: tuple[int, int] | None = None
        self._counters_after: tuple[int, int] | None = None
        self.found_empty = False  # set by finish() when nothing of the run was left in the slot

    @property
    def parked_tasks(self) -> int:  # ours in the slot now (its launcher, once used), counted in pids.max
        return int(self._launcher is not None)

    @property
    def procs_files(self) -> list[str]:
        return self._procs_files

    @property
    def join_files(self) -> list[str]:
        """Where a process writes "0" to move itself in: v1's `tasks` (no global lock for a task moving itself)."""
        v1 = self.support.version == "v1"
        return sorted({str(d / "tasks") for d in self.dirs.values()}) if v1 else self.procs_files

    def _file(self, controller: str, name: str) -> str:
        path = self._files.get((controller, name))
        if path is None:
            path = self._files[(controller, name)] = str(self.dirs[controller] / name)
        return path

    @property
    def can_launch(self) -> bool:
        """Whether runs can be started inside the slot, with no process moved in (v1: threads join cgroups singly)."""
        return self.support.version == "v1" and not self._launch_refused

    def launch(self, start: Callable[[], T]) -> T:
        """Call `start` on the slot's own thread, so that what it forks (nsjail) is born in the slot.

        Raises OSError when no thread can join the slot (then can_launch turns False); the caller moves the process
        in instead."""
        if self._launcher is None:
            try:
                self._launcher = _Launcher(sorted(set(self.dirs.values())))
            except OSError:
                self._launch_refused = True
                raise
        return self._launcher.call(start)

    def prepare(self, memory_bytes: int, max_pids: int) -> None:
        """Set this run's limits and zero the counters a reused slot carries over."""
        v1 = self.support.version == "v1"
        same_limits, counters = self._limits == (memory_bytes, max_pids), self._counters_after
        self._limits, self._counters_after, self.found_empty = None, None, False  # until this prepare succeeds
        if "memory" in self.dirs:
            mem = self.dirs["memory"]
            if v1:
                _write(self._file("memory", "memory.max_usage_in_bytes"), "0")
                if not same_limits:
                    self._set_v1_limit(mem, memory_bytes)
                self._oom_before = (
                    counters[0] if counters else _counter(_read(self._file("memory", "memory.oom_control")), "oom_kill")
                )
                # A reused slot still carries page cache charged by earlier runs (reclaimable, so it does
                # not eat into the limit); the reset peak starts there, so report the growth above it.
                usage = _read(self._file("memory", "memory.usage_in_bytes")).strip()
                self._baseline = int(usage) if usage.isdigit() else 0
            else:
                _write(mem / "memory.max", str(memory_bytes))
                if (mem / "memory.swap.max").exists():
                    _write(mem / "memory.swap.max", "0")
                self._oom_before = _counter(_read(mem / "memory.events"), "oom_kill")
        if "pids" in self.dirs:
            if not same_limits:
                _write(self.dirs["pids"] / "pids.max", str(max_pids))
            self._pids_before = counters[1] if counters else _counter(_read(self._file("pids", "pids.events")), "max")
        self._limits = (memory_bytes, max_pids)

    @staticmethod
    def _set_v1_limit(mem: Path, memory_bytes: int) -> None:
        """memory.limit_in_bytes (and memsw, which must stay >= it) to this run's value, or raise."""
        names = [n for n in ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes") if (mem / n).exists()]
        for attempt in range(2):
            for order in (names, names[::-1]):  # raising or lowering decides which goes first
                try:
                    for name in order:
                        _write(mem / name, str(memory_bytes))
                    return
                except OSError:
                    continue
            if attempt == 0 and not _read(mem / "cgroup.procs").split():
                # Lowering below what earlier runs left charged (page cache) can fail; drop it and retry.
                try:
                    _write(mem / "memory.force_empty", "0")
                except OSError:
                    pass
        raise OSError(f"cannot set the memory limit of {mem}")

    def pids(self) -> list[int]:
        """The processes in the slot, this one excluded (its launcher thread makes v1 list it)."""
        out = []
        for f in self.procs_files:
            out += [int(p) for p in _read(f).split()]
        return sorted(set(out) - {os.getpid()})

    def finish(self) -> SlotStats:
        """Read the run's numbers, then kill anything still in the slot (nothing of a run may survive it)."""
        killed = self.kill_all()
        peak, oom_kills = None, self._oom_before
        if "memory" in self.dirs:
            mem = self.dirs["memory"]
            if self.support.version == "v1":
                raw = _read(self._file("memory", "memory.max_usage_in_bytes")).strip()
                oom_kills = _counter(_read(self._file("memory", "memory.oom_control")), "oom_kill")
            else:
                raw = _read(mem / "memory.peak").strip()
                oom_kills = _counter(_read(mem / "memory.events"), "oom_kill")
            peak = max(0, int(raw) - self._baseline) if raw.isdigit() else None
        pids_max_events = _counter(_read(self._file("pids", "pids.events")), "max") if "pids" in self.dirs else 0
        if self.found_empty:
            self._counters_after = (oom_kills, pids_max_events)
        return SlotStats(peak, oom_kills > self._oom_before, pids_max_events > self._pids_before, killed)

    def kill_all(self, deadline_s: float = 5.0) -> int:
        killed, end = 0, time.monotonic() + deadline_s
        # A run's SysV shared memory stays charged until its IPC namespace is freed, after its last process (MiB).
        stat = self._file("memory", "memory.stat") if self.support.version == "v1" and "memory" in self.dirs else ""
        # cgroup.kill ends every task of the cgroup: never with a thread of ours in it (only v1 slots have one).
        if self.support.version == "v2" and self._launcher is None:
            kill_file = next(iter(self.dirs.values())) / "cgroup.kill"
            if kill_file.exists() and (pids := self.pids()):
                _write(kill_file, "1")  # v2 (Linux >= 5.14): the kernel kills the whole cgroup at once
                killed = len(pids)
        while ((pids := self.pids()) or (stat and _counter(_read(stat), "shmem") >> 20)) and time.monotonic() < end:
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed += 1
                except ProcessLookupError:
                    pass
            time.sleep(0.01)
        self.found_empty = not pids and not (stat and _counter(_read(stat), "shmem") >> 20)
        return killed

    def remove(self) -> None:
        if self._launcher is not None:
            self._launcher.stop()
            self._launcher = None
        for d in self.dirs.values():
            with contextlib.suppress(OSError):
                d.rmdir()


def _parent_name(pid: int | None = None) -> str:
    """Our per-process parent cgroup's name. The pid namespace is part of it: a pid is only known dead
    (and its dir safe to clean) within the namespace it belongs to."""
    try:
        pidns = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        pidns = 0
    return f"groupscore-sandbox-{pidns}-{os.getpid() if pid is None else pid}"


def _remove_stale(root: Path) -> None:
    """Remove empty slot dirs left by harness processes (of our pid namespace) that died without cleanup."""
    prefix = _parent_name(0)[:-1]  # "groupscore-sandbox-<pidns>-"
    for parent in root.glob(prefix + "*"):
        pid = parent.name[len(prefix) :]
        if not pid.isdigit() or os.path.exists(f"/proc/{pid}"):
            continue
        for slot in parent.glob("slot-*"):
            with contextlib.suppress(OSError):  # fails (and is kept) while it still holds processes
                slot.rmdir()
        with contextlib.suppress(OSError):
            parent.rmdir()


class SlotPool:
    """Reusable slots under one per-process parent (v1: reset and reuse; v2: a fresh dir per run,
    because memory.peak cannot be reset on older kernels)."""

    def __init__(self, support: CgroupSupport):
        self.support = support
        self._free: list[Slot] = []
        self._lock = threading.Lock()
        self._count = 0
        self._parents: dict[str, Path] = {}
        self._pid = os.getpid()
        self.broken: str | None = None
        if support.version:
            atexit.register(self.close)

    def _parent(self, ctrl: str) -> Path:
        if ctrl not in self._parents:
            _remove_stale(Path(self.support.roots[ctrl]))
            p = Path(self.support.roots[ctrl]) / _parent_name()
            p.mkdir(exist_ok=True)
            if self.support.version == "v2":
                # Controllers must be enabled on every level down to our slots.
                for level in (p.parent, p):
                    ctl = level / "cgroup.subtree_control"
                    enabled = set(_read(ctl).split())
                    want = [c for c in CONTROLLERS if getattr(self.support, c) and c not in enabled]
                    if want:
                        _write(ctl, " ".join("+" + c for c in want))
            self._parents[ctrl] = p
        return self._parents[ctrl]

    def acquire(self) -> Slot | None:
        """A slot, or None when cgroups are unavailable (the caller reports why)."""
        if not self.support.version or self.broken:
            return None
        with self._lock:
            if self._free:
                return self._free.pop()
            self._count += 1
            n = self._count
        try:
            dirs = {}
            for ctrl in CONTROLLERS:
                if getattr(self.support, ctrl):
                    d = self._parent(ctrl) / f"slot-{n}"
                    d.mkdir(exist_ok=True)
                    dirs[ctrl] = d
            return Slot(self.support, dirs)
        except OSError as exc:
            self.broken = f"cannot create cgroups under {self.support.roots}: {exc.strerror or exc}"
            return None

    def release(self, slot: Slot) -> None:
        # never reuse a slot that still holds processes (finish() has just looked, when it ran)
        if not slot.found_empty and slot.pids():
            return
        slot.found_empty = False
        if self.support.version == "v2":
            slot.remove()
            return
        with self._lock:
            self._free.append(slot)

    def close(self) -> None:
        if os.getpid() != self._pid:
            return  # a forked child inherited this atexit hook; the slots are its parent's
        with self._lock:
            slots, self._free = self._free, []
        for s in slots:
            s.kill_all(1.0)
            s.remove()
        for p in self._parents.values():
            try:
                p.rmdir()
            except OSError:
                pass
