"""A host uid (and gid, the same number) of its own for every live jail, unique across all processes of the host.

The kernel keeps some accounts per host uid, whatever the namespaces: pipe buffer pages (pipe-user-pages-soft),
file descriptors in flight over unix sockets (counted against RLIMIT_NOFILE), epoll watches. Jails sharing one uid
(`nobody`) share these accounts, so one jail could fill an account and another read how full it is: a covert channel.
With an id of its own, a jail's accounts hold only its own use.

Ids come from GROUPSCORE_SANDBOX_UID_BASE (default 1800000000) up, ID_COUNT of them. A process claims an id with an
exclusive flock on a file named after it in a root-only dir and holds it for its lifetime, reusing it for one run at
a time; another process (a service worker, a second trainer) skips ids it cannot lock. An id rests REST_S after its
run before it is used again: all of a jail's processes are gone when its run returns, but the kernel settles some
accounts a little later (fds in flight inside a cycle of unix sockets wait for the socket garbage collector), and
those must not be read by the next run as this id. Only root can map other ids: unprivileged, every jail runs as our
own uid (and these accounts stay shared; README says so).
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections import deque

from groupscore.sandbox import settings as sandbox_settings
from groupscore.sandbox.errors import SandboxUnavailable

ID_COUNT = 1 << 16
REST_S = 1.0
_LOCK_DIRS = ("/run/groupscore-sandbox-ids", "/dev/shm/groupscore-sandbox-ids", "/tmp/groupscore-sandbox-ids")


def id_base() -> int:
    base = sandbox_settings.current().uid_base  # not an integer: SandboxUnavailable, naming the variable
    if not 1000 <= base <= (1 << 31) - 1 - ID_COUNT:
        raise SandboxUnavailable(f"GROUPSCORE_SANDBOX_UID_BASE={base} is outside 1000..{(1 << 31) - 1 - ID_COUNT}")
    return base


def _lock_dir() -> str:
    for path in _LOCK_DIRS:
        try:
            os.makedirs(path, mode=0o700, exist_ok=True)
            st = os.stat(path)
            if st.st_uid == 0 and not st.st_mode & 0o077:
                return path
        except OSError:
            continue
    raise SandboxUnavailable(f"no root-only dir for sandbox id locks (tried {', '.join(_LOCK_DIRS)})")


class IdPool:
    """The ids this process holds: free ones are reused; a new one is claimed host-wide when none is free."""

    def __init__(self) -> None:
        self.base = id_base()
        self._lock = threading.Lock()
        self._free: deque[tuple[float, int]] = deque()  # (when it may be used again, id), oldest first
        self._held: dict[int, int] = {}  # id -> fd of its lock file (holding the flock)
        self._dir: str | None = None

    def acquire(self) -> int:
        with self._lock:
            if self._free and self._free[0][0] <= time.monotonic():
                return self._free.popleft()[1]
            if self._dir is None:
                self._dir = _lock_dir()
            # From the base up, so the lock files stay as few as the most ids ever held at once.
            for number in range(self.base, self.base + ID_COUNT):
                if number in self._held:
                    continue
                fd = os.open(os.path.join(self._dir, str(number)), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    continue
                self._held[number] = fd
                return number
        raise SandboxUnavailable(f"all {ID_COUNT} sandbox ids from {self.base} are in use")

    def held(self) -> frozenset[int]:
        """Every id this process holds, in use or resting."""
        with self._lock:
            return frozenset(self._held)

    def release(self, number: int) -> None:
        with self._lock:
            self._free.append((time.monotonic() + REST_S, number))

    def forget(self) -> None:
        """In a forked child: the parent keeps using these ids; the child claims its own."""
        for fd in self._held.values():
            os.close(fd)
        self._held, self._free, self._lock = {}, deque(), threading.Lock()


_POOL: IdPool | None = None
_POOL_LOCK = threading.Lock()


def _forget_in_child() -> None:
    global _POOL_LOCK
    _POOL_LOCK = threading.Lock()
    if _POOL is not None:
        _POOL.forget()


os.register_at_fork(after_in_child=_forget_in_child)


def id_pool() -> IdPool:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = IdPool()
        return _POOL


def per_jail_ids() -> bool:
    """True where each jail gets its own host uid (as root); False where all run as our own uid."""
    return os.geteuid() == 0
