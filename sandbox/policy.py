"""The isolation policy: one typed, printable object that both launchers apply.

`groupscore sandbox policy` prints this object. Everything a jail enforces is a field here, in a neutral form: the
nsjail launcher writes it as nsjail's config (nsjail_config.py), the warm launcher as a warm run's request
(warm_launcher.py); neither adds a limit of its own. The per-run parts (the run's files, its host ids) come from the
harness (harness.py).
"""

from __future__ import annotations

import functools
import math
import os
from typing import Literal

from pydantic import BaseModel, ConfigDict

from groupscore.sandbox.cgroups import CgroupSupport, detect_cgroups
from groupscore.sandbox.languages import SPECS, WORK_DIR, language_env
from groupscore.sandbox.limits import Limits
from groupscore.sandbox.seccomp import DENIED_ENOSYS, DENIED_EPERM, NOOP_SUCCESS, described_rules, kafel_policy
from groupscore.sandbox.toolchains import Toolchain
from groupscore.sandbox.uids import ID_COUNT, id_base, per_jail_ids

NOBODY = 65534
# pid 1 of the jail is a shell that runs the program and waits for it. The kernel drops signals
# with default action that pid 1 gets from inside its namespace, so a program that were pid 1 could
# not abort() or raise() itself to death, and kill(-1) would spare it.
INIT_SHELL = os.path.realpath("/bin/sh")
# $1 is the soft CPU limit: the kernel sends SIGXCPU there (a clean "cpu time limit" status) and SIGKILL
# at the hard limit one second later. The shell's own messages ("Killed") go to /dev/null; the program,
# exec'd from a subshell, keeps the real stderr. The shell itself must stay pid 1 (no plain `exec`).
INIT_SCRIPT = 'ulimit -S -t "$1"; shift; exec 3>&2 2>/dev/null; (exec "$@" 2>&3 3>&-); exit $?'
PROC_OPTIONS = "subset=pid"
MAX_WORK_FILES = 4096  # inodes of the work tmpfs: "many files" ends with ENOSPC, not host memory
# Top-level merged-/usr symlinks of the host, mirrored so binaries find their loader and libraries.
_TOP_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_DEVICES_RO = ("/dev/zero", "/dev/urandom", "/dev/random")


MountFlag = Literal["ro", "nosuid", "nodev", "noexec"]
# The flags each kind of mount gets, from both launchers: nothing set-uid anywhere, device files only where a device is
# bound on purpose (/dev/null, /dev/urandom), nothing to execute in /proc.
MOUNT_FLAGS: dict[str, tuple[MountFlag, ...]] = {
    "bind_ro": ("ro", "nosuid"),
    "bind_rw": ("nosuid",),
    "tmpfs": ("nosuid", "nodev"),
    "proc": ("ro", "nosuid", "nodev", "noexec"),
    "symlink": (),
}
# A run's own files bound into its work dir: its inputs read-only ("ro" added), the files it may write for `collect`.
FILE_BIND_FLAGS: tuple[MountFlag, ...] = ("nosuid", "nodev")


class Mount(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: Literal["bind_ro", "bind_rw", "tmpfs", "symlink", "proc"]
    target: str
    source: str | None = None  # host path (bind), link target (symlink)
    options: str = ""

    @property
    def flags(self) -> tuple[MountFlag, ...]:
        return MOUNT_FLAGS[self.kind]


class Rlimits(BaseModel):
    model_config = ConfigDict(frozen=True)

    address_space_mb: int
    cpu_s: int  # soft limit (SIGXCPU); under nsjail the init shell sets it
    cpu_hard_s: int  # hard limit (SIGKILL)
    file_size_mb: int
    open_files: int
    processes: int
    core_mb: int = 0
    stack_mb: int = 8

    def settings(self, *, as_init: bool = False) -> dict[str, tuple[int, int]]:
        """What a run's processes start with: (soft, hard) in the kernel's units, by the `resource` module's names.
        The one form of these limits that both launchers apply. A program that is its jail's pid 1 (as_init) has no
        init shell to lower the CPU limit to its soft value: it gets the hard one alone."""
        mib = 1 << 20
        return {
            "RLIMIT_AS": (self.address_space_mb * mib, self.address_space_mb * mib),
            "RLIMIT_CPU": (self.cpu_hard_s if as_init else self.cpu_s, self.cpu_hard_s),
            "RLIMIT_FSIZE": (self.file_size_mb * mib, self.file_size_mb * mib),
            "RLIMIT_NOFILE": (self.open_files, self.open_files),
            "RLIMIT_NPROC": (self.processes, self.processes),
            "RLIMIT_CORE": (self.core_mb * mib, self.core_mb * mib),
            "RLIMIT_STACK": (self.stack_mb * mib, self.stack_mb * mib),
        }


# The namespaces a policy may ask for, each made new around every run.
Namespace = Literal["user", "mount", "pid", "network", "ipc", "uts", "cgroup"]


class Policy(BaseModel):
    """Everything one jail is allowed. Built by `build_policy`; printed by `groupscore sandbox policy`."""

    model_config = ConfigDict(frozen=True)

    language: str
    toolchain: str
    # New around every run (a warm run's user namespace is its template's, made by nsjail from this same list).
    namespaces: tuple[Namespace, ...] = ("user", "mount", "pid", "network", "ipc", "uts", "cgroup")
    network: str = "new empty network namespace: no interfaces, loopback down (no egress, no host loopback)"
    uid_inside: int
    uid_outside: int  # the real uid on the host (as root: the first of the per-jail ids); never 0
    gid_inside: int
    gid_outside: int
    outside_ids: str  # how host ids are given out to jails
    hostname: str = "sandbox"
    no_new_privs: bool = True  # set before the program's first line: no exec can gain privileges
    capabilities: tuple[str, ...] = ()  # the capabilities the jail's processes keep: none, in every set
    init: str = (
        f"{INIT_SHELL} -c '{INIT_SCRIPT}' init <cpu_s> <program...> (pid 1; the program is pid 2); "
        "a run with as_init=True (a supervisor that reaps its children) is pid 1 itself"
    )
    mounts: tuple[Mount, ...]
    work_dir: str = WORK_DIR
    tmpfs_mb: int
    env: tuple[str, ...]
    rlimits: Rlimits
    cgroup: str  # what applies on this host, or "none: why"
    cgroup_memory_mb: int | None
    cgroup_max_pids: int | None
    seccomp_default: str = "allow"
    seccomp_denied_eperm: tuple[str, ...] = DENIED_EPERM
    seccomp_denied_enosys: tuple[str, ...] = DENIED_ENOSYS
    seccomp_noop_success: tuple[str, ...] = NOOP_SUCCESS
    seccomp_other: tuple[str, ...] = described_rules()
    seccomp_kafel: str
    wall_time_s: float  # the harness's wall clock
    max_output_bytes: int  # per stream (stdout, stderr): the harness stops the run past it
    collected_file_bytes: int  # each `collect` file is read back up to this (the rest is cut, and said)
    inherited_fds: str = "stdin (a file), stdout and stderr (pipes to the harness) only"


def _host_symlinks() -> list[Mount]:
    out = []
    for top in _TOP_LINKS:
        if os.path.islink(top):
            out.append(Mount(kind="symlink", target=top, source=os.readlink(top)))
    return out


def _ro_mounts(paths: tuple[str, ...]) -> list[Mount]:
    """Bind real paths read-only, skipping ones inside another mounted path."""
    real = sorted({os.path.realpath(p) for p in paths if os.path.exists(p)})
    kept: list[str] = []
    for p in real:
        if not any(p == k or p.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(p)
    return [Mount(kind="bind_ro", target=p, source=p) for p in kept]


def _ids() -> tuple[int, int, int, int, str]:
    """(uid in, uid out, gid in, gid out, how). As root, jail uid 0 would BE root on the host: the jail is nobody
    inside, and outside a host uid/gid of its own per live jail (uids.py), so no per-uid kernel account is shared."""
    if per_jail_ids():
        base = id_base()
        return (
            NOBODY,
            base,
            NOBODY,
            base,
            (
                f"per jail: each live jail has a host uid and gid of its own, "
                f"{base}..{base + ID_COUNT - 1} (no per-uid kernel account is shared)"
            ),
        )
    own = (
        "shared: every jail runs as our own uid (unprivileged; per-uid kernel accounts such as pipe buffers "
        "are shared between concurrent jails; run as root for a uid per jail)"
    )
    return os.geteuid(), os.geteuid(), os.getegid(), os.getegid(), own


@functools.lru_cache(maxsize=1)
def host_cgroups() -> CgroupSupport:
    """This host's cgroups, as far as we may use them (a tree we cannot write to counts as none)."""
    cg = detect_cgroups()
    blocked = [root for root in set(cg.roots.values()) if not os.access(root, os.W_OK)]
    if cg.version and blocked:
        return CgroupSupport(
            None,
            False,
            False,
            {},
            f"{cg.version} found but {', '.join(sorted(blocked))} is not "
            "writable (run as root, or set GROUPSCORE_CGROUP_PARENT to a delegated cgroup)",
        )
    return cg


def build_policy(
    tool: Toolchain,
    limits: Limits,
    *,
    compile_step: bool = False,
    extra_ro: tuple[str, ...] = (),
    cgroups: CgroupSupport | None = None,
) -> Policy:
    """The policy for one language (and step: compile or run) under `limits` (cached for this host's cgroups)."""
    if cgroups is None:
        return _host_policy(tool, limits, compile_step, tuple(extra_ro))
    return _make_policy(tool, limits, compile_step, tuple(extra_ro), cgroups)


@functools.lru_cache(maxsize=256)
def _host_policy(tool: Toolchain, limits: Limits, compile_step: bool, extra_ro: tuple[str, ...]) -> Policy:
    return _make_policy(tool, limits, compile_step, extra_ro, host_cgroups())


def _make_policy(
    tool: Toolchain, limits: Limits, compile_step: bool, extra_ro: tuple[str, ...], cg: CgroupSupport
) -> Policy:
    # A compiled program's run gets the program's runtime only (the loader's libraries, or the JVM), never the compiler.
    ro_paths = tool.run_ro_paths if SPECS[tool.language].compiled and not compile_step else tool.ro_paths
    uid_in, uid_out, gid_in, gid_out, outside_ids = _ids()
    mounts = [
        *_host_symlinks(),
        *_ro_mounts(tuple(ro_paths) + (INIT_SHELL,) + tuple(extra_ro)),
        Mount(
            kind="tmpfs",
            target=WORK_DIR,
            options=f"size={limits.tmpfs_mb * 1024 * 1024},nr_inodes={MAX_WORK_FILES},mode=0700",
        ),
        Mount(kind="symlink", target="/tmp", source=WORK_DIR),
        # Only the jail's own /proc/<pid> dirs: every other proc file (loadavg, stat, meminfo, locks, sys/...)
        # shows host-wide state that other jails move, i.e. a channel between them.
        Mount(kind="proc", target="/proc", options=PROC_OPTIONS),
        # Read-only like every shared inode (writing to a device needs no writable mount): a writable one would let
        # a jail set its timestamps (utime), which every other jail can read.
        Mount(kind="bind_ro", target="/dev/null", source="/dev/null"),
        *(Mount(kind="bind_ro", target=d, source=d) for d in _DEVICES_RO if os.path.exists(d)),
        Mount(kind="symlink", target="/dev/fd", source="/proc/self/fd"),
        Mount(kind="symlink", target="/dev/stdin", source="/proc/self/fd/0"),
        Mount(kind="symlink", target="/dev/stdout", source="/proc/self/fd/1"),
        Mount(kind="symlink", target="/dev/stderr", source="/proc/self/fd/2"),
    ]
    env: tuple[str, ...] = (
        "PATH=/usr/local/bin:/usr/bin:/bin",
        f"HOME={WORK_DIR}",
        f"TMPDIR={WORK_DIR}",
        "LANG=C.UTF-8",
        "LC_ALL=C.UTF-8",
        *language_env(tool, limits, compile_step),
    )
    return Policy(
        language=tool.language + (" (compile)" if compile_step else ""),
        toolchain=f"{tool.executable} {tool.version}",
        uid_inside=uid_in,
        uid_outside=uid_out,
        gid_inside=gid_in,
        gid_outside=gid_out,
        outside_ids=outside_ids,
        mounts=tuple(mounts),
        tmpfs_mb=limits.tmpfs_mb,
        env=env,
        # With a cgroup memory limit, RLIMIT_AS only stops a runaway mapping; without one it is the bound.
        rlimits=Rlimits(
            address_space_mb=limits.address_space_mb if cg.memory else limits.memory_mb + 128,
            cpu_s=limits.cpu_seconds,
            cpu_hard_s=limits.cpu_seconds + 1,
            file_size_mb=max(1, math.ceil(limits.max_file_bytes / (1 << 20))),
            open_files=limits.max_open_files,
            processes=limits.max_processes + 1,
        ),  # +1: init
        cgroup=cg.describe(),
        cgroup_memory_mb=limits.memory_mb if cg.memory else None,
        cgroup_max_pids=limits.max_processes if cg.pids else None,
        seccomp_kafel=kafel_policy(),
        wall_time_s=limits.wall_time_s,
        max_output_bytes=limits.max_output_bytes,
        collected_file_bytes=limits.max_file_bytes,
    )
