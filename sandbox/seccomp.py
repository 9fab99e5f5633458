"""The jail's seccomp-bpf policy, as data, rendered to nsjail's kafel language.

Default allow; the listed syscalls fail with an errno (so programs see a clean error and tests can
pin the exact outcome) instead of killing the process. Besides the kernel attack surface, the rules close
covert channels between concurrent jails: kernel state that every jail reaches (locks on the shared read-only
files, notifications of access to them, host-wide counters, the page cache) must carry nothing from one jail to
another. README.md ("Sandbox: covert channels") lists each channel and how it is closed.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

EPERM, EAGAIN, EINVAL, ENOSYS, EOPNOTSUPP, EAFNOSUPPORT = 1, 11, 22, 38, 95, 97
AF_VSOCK = 40
# CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET: clone() may not make namespaces.
CLONE_NAMESPACE_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
CLONE_PIDFD = 0x00001000
# fcntl commands (the same numbers on every Linux architecture nsjail runs on)
F_SETLK, F_SETLKW, F_OFD_SETLK, F_OFD_SETLKW = 6, 7, 37, 38
F_SETLEASE, F_NOTIFY = 1024, 1026
POSIX_FADV_DONTNEED = 4
MADV_MERGEABLE, MADV_HUGEPAGE, MADV_COLD, MADV_PAGEOUT, MADV_COLLAPSE = 12, 14, 20, 21, 25
PR_SET_MEMORY_MERGE = 67
RWF_NOWAIT = 0x8
# futex ops without FUTEX_PRIVATE_FLAG (0x80): op & 0xff is the command with the private bit clear
FUTEX_NONPRIVATE_WAITS = (0, 9)  # WAIT, WAIT_BITSET
FUTEX_NONPRIVATE_WAKES = (1, 3, 4, 5, 10)  # WAKE, REQUEUE, CMP_REQUEUE, WAKE_OP, WAKE_BITSET

DENIED_EPERM = (
    # mounts and namespaces
    "mount",
    "umount",  # kafel names x86-64 umount2 "umount"
    "pivot_root",
    "chroot",
    "unshare",
    "setns",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    # looking into or driving other processes
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "pidfd_getfd",
    # kernel keyring
    "keyctl",
    "add_key",
    "request_key",
    # io_uring (bypasses seccomp for the ops it runs)
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    # kernel attack surface no judged program needs
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "acct",
    "swapon",
    "swapoff",
    "reboot",
    "syslog",
    "quotactl",
    "lookup_dcookie",
    "vhangup",
    "name_to_handle_at",
    "open_by_handle_at",
)
# clone3 passes flags in memory seccomp cannot read; ENOSYS makes libc fall back to clone(), which we can check.
# The rest answer what a kernel built without them would: no file-access notifications (they would report other
# jails' reads of the shared files), no host-wide memory/process/load figures (sysinfo) or free space of the host's
# filesystems (statfs: inputs and collected files live on the host's run dir fs, so its free blocks move with other
# runs' files), and no pidfds (a pidfd's inode number is a host-wide count of every process ever started).
# flock (BSD locks on the shared files, as for fcntl locks below): succeeds and does nothing.
NOOP_SUCCESS = ("flock",)
# The futex2 calls carry their private flag in memory or are new: libc does not use them. Kernel AIO reads take
# RWF_NOWAIT in memory (a page-cache probe seccomp cannot see; glibc's aio_* use threads, not these); cachestat and
# process_madvise (which takes PIDFD_SELF) reach the page cache around the fadvise/madvise rules below.
DENIED_ENOSYS = (
    "clone3",
    "inotify_init",
    "inotify_init1",
    "inotify_add_watch",
    "fanotify_init",
    "fanotify_mark",
    "sysinfo",
    "statfs",
    "fstatfs",
    "ustat",
    "pidfd_open",
    "futex_waitv",
    "futex_wake",
    "futex_wait",
    "futex_requeue",
    "io_setup",
    "io_submit",
    "io_getevents",
    "io_pgetevents",
    "io_cancel",
    "io_destroy",
    "cachestat",
    "process_madvise",
    # SysV message queues and semaphores (shared memory stays, for programs that use it): a run's objects outlive
    # it, charged to its cgroup slot until the kernel frees its IPC namespace, after the slot may be a group-mate's.
    "msgget",
    "msgsnd",
    "msgrcv",
    "msgctl",
    "semget",
    "semop",
    "semtimedop",
    "semctl",
)


class SeccompRule(BaseModel):
    """One argument-checked rule: `syscall(args) { condition }` -> `action`, and why."""

    model_config = ConfigDict(frozen=True)

    syscall: str
    args: str
    condition: str
    action: str  # "ERRNO(n)"; ERRNO(0) means the call does nothing and reports success
    why: str

    def kafel(self) -> str:
        return f"{self.syscall}({self.args}) {{ {self.condition} }}"


ARG_RULES: tuple[SeccompRule, ...] = (
    SeccompRule(
        syscall="clone",
        args="flags",
        condition=f"(flags & {CLONE_NAMESPACE_FLAGS:#x}) != 0",
        action=f"ERRNO({EPERM})",
        why="no new namespaces",
    ),
    SeccompRule(
        syscall="clone",
        args="flags",
        condition=f"(flags & {CLONE_PIDFD:#x}) != 0",
        action=f"ERRNO({ENOSYS})",
        why="no pidfds (host-wide inode counter); libc falls back",
    ),
    SeccompRule(
        syscall="socket",
        args="domain",
        condition=f"domain == {AF_VSOCK}",
        action=f"ERRNO({EAFNOSUPPORT})",
        why="no vsock to the host",
    ),
    # Locks live on inodes, and every jail binds the same host files: a lock one jail sets, another can read
    # (F_GETLK, or a set that fails). Setting a lock succeeds and does nothing, everywhere: one process alone in its
    # jail (sqlite on /work, any library that locks) runs as before; F_GETLK stays real and finds no jail's lock.
    SeccompRule(
        syscall="fcntl",
        args="fd, cmd",
        condition=f"cmd == {F_SETLK} || cmd == {F_SETLKW} || cmd == {F_OFD_SETLK} || cmd == {F_OFD_SETLKW}",
        action="ERRNO(0)",
        why="POSIX and OFD record locks: set is a no-op that succeeds",
    ),
    SeccompRule(
        syscall="fcntl",
        args="fd, cmd",
        condition=f"cmd == {F_SETLEASE} || cmd == {F_NOTIFY}",
        action=f"ERRNO({EINVAL})",
        why="leases and dnotify: as on a kernel with both switched off",
    ),
    # The page cache is shared: a jail that could evict pages of the shared files, or test whether a page is cached
    # without loading it, could signal through it. Advice is only advice: ignoring it is correct.
    SeccompRule(
        syscall="fadvise64",
        args="fd, offset, len, advice",
        condition=f"advice == {POSIX_FADV_DONTNEED}",
        action="ERRNO(0)",
        why="no eviction of shared file pages; ignored, succeeds",
    ),
    SeccompRule(
        syscall="madvise",
        args="addr, len, advice",
        condition=" || ".join(
            f"advice == {a}" for a in (MADV_COLD, MADV_PAGEOUT, MADV_COLLAPSE, MADV_HUGEPAGE, MADV_MERGEABLE)
        ),
        action="ERRNO(0)",
        why="no reclaim or huge-page collapse of shared file pages, no KSM merging of pages "
        "with other jails' (same content, merged: a channel); ignored, succeeds",
    ),
    SeccompRule(
        syscall="prctl",
        args="option",
        condition=f"option == {PR_SET_MEMORY_MERGE}",
        action=f"ERRNO({EINVAL})",
        why="no KSM for the whole process, as on a kernel without KSM",
    ),
    # A futex without the private flag on a page of a file is keyed by the file, not the process: a wait in one
    # jail could be woken, or counted, from another (also by the kernel's own wake of a clear-child-tid address at
    # thread exit). Such waits return at once as if the value had changed and wakes wake nobody; libc then
    # re-checks in user space, so pthread_join and process-shared mutexes still work, spinning instead of sleeping.
    SeccompRule(
        syscall="futex",
        args="uaddr, op",
        condition=" || ".join(f"(op & 0xff) == {c}" for c in FUTEX_NONPRIVATE_WAITS),
        action=f"ERRNO({EAGAIN})",
        why="non-private futex waits: return at once (libc re-checks and retries)",
    ),
    SeccompRule(
        syscall="futex",
        args="uaddr, op",
        condition=" || ".join(f"(op & 0xff) == {c}" for c in FUTEX_NONPRIVATE_WAKES),
        action="ERRNO(0)",
        why="non-private futex wakes and requeues: succeed and wake nobody",
    ),
    # prlimit needs only the same uid: a jail's process could lower the limits of another of the jail's processes (a
    # session's agent: its CPU seconds, and the kernel's SIGKILL at the hard limit reaches even a pid namespace's
    # init). setrlimit and getrlimit on oneself are prlimit64 with pid 0 and stay allowed.
    SeccompRule(
        syscall="prlimit64",
        args="pid, resource, new_limit, old_limit",
        condition="pid != 0",
        action=f"ERRNO({EPERM})",
        why="no process changes or reads another process's resource limits",
    ),
    SeccompRule(
        syscall="preadv2",
        args="fd, vec, vlen, pos_l, pos_h, flags",
        condition=f"(flags & {RWF_NOWAIT}) != 0",
        action=f"ERRNO({EOPNOTSUPP})",
        why="RWF_NOWAIT would tell a cached page from an uncached one",
    ),
    SeccompRule(
        syscall="pwritev2",
        args="fd, vec, vlen, pos_l, pos_h, flags",
        condition=f"(flags & {RWF_NOWAIT}) != 0",
        action=f"ERRNO({EOPNOTSUPP})",
        why="as preadv2",
    ),
)


def described_rules() -> tuple[str, ...]:
    """The argument-checked rules in words, for the printed policy."""
    return tuple(f"{r.syscall}({r.args}) {{ {r.condition} }} -> {r.action}: {r.why}" for r in ARG_RULES)


def kafel_policy() -> str:
    by_action: dict[str, list[str]] = {f"ERRNO({EPERM})": list(DENIED_EPERM), "ERRNO(0)": list(NOOP_SUCCESS)}
    for rule in ARG_RULES:
        by_action.setdefault(rule.action, []).append(rule.kafel())
    by_action.setdefault(f"ERRNO({ENOSYS})", []).extend(DENIED_ENOSYS)
    blocks = [f"  {action} {{ {', '.join(items)} }}" for action, items in by_action.items()]
    return "POLICY groupscore {\n" + ",\n".join(blocks) + "\n}\nUSE groupscore DEFAULT ALLOW"
