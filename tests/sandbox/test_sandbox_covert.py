"""Covert channels between concurrent jails: a sender jail encodes a secret in shared kernel state, a receiver jail
running at the same time tries to read it back. Each test pins that the receiver learns nothing.

Every channel here was open before the fix (the test failed), except those marked "closed by namespaces/kernel",
which are kept as regression guards. What is left by design is in docs/sandbox/covert-channels.md ("Left open").
"""

from __future__ import annotations

import ctypes
import mmap
import os
import secrets
import threading
import time

import pytest

from groupscore.runtime.batch import score_batch
from groupscore.sandbox import Limits, RunResult, RunStatus, run
from groupscore.sandbox.toolchains import toolchain
from groupscore.verifiers.code.item import CodeItem
from groupscore.verifiers.code.verify import score_code

PRELUDE = """\
import os, sys, errno, ctypes, fcntl, struct, time, socket
libc = ctypes.CDLL(None, use_errno=True)
def name(e):
    n = e.errno if isinstance(e, OSError) else e
    return errno.errorcode.get(n, str(n))
STDLIB = os.path.dirname(os.__file__)
SHARED = [os.__file__, "/dev/null", sys.executable]
FLOCK = "hhqqi4x"  # struct flock on x86-64
"""
LIMITS = Limits(wall_time_s=8, memory_mb=512)
HOLD_S = 2.5  # the sender keeps its state this long
WAIT_S = 0.8  # the receiver looks this long after it starts


pytestmark = pytest.mark.usefixtures("jail_available")  # a harmless probe jail first (conftest.py)


def _run(code: str, **kw) -> RunResult:
    return run({"main.py": PRELUDE + code}, limits=kw.pop("limits", LIMITS), **kw)


def pair(sender: str, receiver: str, *, receiver_collect=(), sender_collect=()) -> tuple[RunResult, RunResult]:
    """Run sender and receiver in two jails at the same time; the receiver starts its probe WAIT_S later."""
    box: dict[str, RunResult] = {}
    send = threading.Thread(
        target=lambda: box.setdefault(
            "s", _run(sender + f"\nprint('SENT', flush=True)\ntime.sleep({HOLD_S})\n", collect=list(sender_collect))
        )
    )
    send.start()
    time.sleep(0.2)
    recv = _run(f"time.sleep({WAIT_S})\n" + receiver, collect=list(receiver_collect))
    send.join(30)
    s = box["s"]
    assert s.status is RunStatus.OK and "SENT" in s.stdout, s
    assert recv.status is RunStatus.OK, recv
    return s, recv


def secret_int(bits: int = 20) -> int:
    return secrets.randbelow((1 << bits) - 2) + 1


# ---- file locks on shared inodes ----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["os.__file__", "'/dev/null'", "sys.executable"])
def test_posix_lock_offsets_do_not_cross_jails(path):
    secret = secret_int()
    _, r = pair(
        f"""
fd = os.open({path}, os.O_RDONLY)
fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB, 1, {secret})
""",
        f"""
fd = os.open({path}, os.O_RDONLY)
got = struct.unpack(FLOCK, fcntl.fcntl(fd, fcntl.F_GETLK, struct.pack(FLOCK, fcntl.F_WRLCK, 0, 0, 0, 0)))
print(got[0] == fcntl.F_UNLCK, got[2])
""",
    )
    assert r.stdout.split() == ["True", "0"]


def test_ofd_lock_offsets_do_not_cross_jails():
    secret = secret_int()
    _, r = pair(
        f"""
fd = os.open(os.__file__, os.O_RDONLY)
fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack(FLOCK, fcntl.F_RDLCK, 0, {secret}, 1, 0))
""",
        """
fd = os.open(os.__file__, os.O_RDONLY)
got = struct.unpack(FLOCK, fcntl.fcntl(fd, fcntl.F_OFD_GETLK, struct.pack(FLOCK, fcntl.F_WRLCK, 0, 0, 0, 0)))
print(got[0] == fcntl.F_UNLCK, got[2])
""",
    )
    assert r.stdout.split() == ["True", "0"]


def test_set_lock_probing_does_not_cross_jails():
    """F_SETLK itself is a probe: a write lock on /dev/null (writable in every jail) fails where another jail holds one."""
    secret = secret_int(8)
    _, r = pair(
        f"""
fd = os.open('/dev/null', os.O_RDONLY)
for bit in range(8):
    if {secret} >> bit & 1:
        fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB, 1, bit)
""",
        """
fd = os.open('/dev/null', os.O_RDWR)
got = 0
for bit in range(8):
    try:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack(FLOCK, fcntl.F_WRLCK, 0, bit, 1, 0))
    except OSError as e:
        got |= (e.errno in (errno.EAGAIN, errno.EACCES)) << bit
print(got)
""",
    )
    assert r.stdout.split() == ["0"]


def test_flock_bits_do_not_cross_jails():
    secret = secret_int(8)
    _, r = pair(
        f"""
files = sorted(os.path.join(STDLIB, f) for f in os.listdir(STDLIB) if f.endswith('.py'))[:8]
held = []
for bit, path in enumerate(files):
    if {secret} >> bit & 1:
        fd = os.open(path, os.O_RDONLY); fcntl.flock(fd, fcntl.LOCK_SH); held.append(fd)
""",
        """
files = sorted(os.path.join(STDLIB, f) for f in os.listdir(STDLIB) if f.endswith('.py'))[:8]
got = 0
for bit, path in enumerate(files):
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        got |= 1 << bit
print(got)
""",
    )
    assert r.stdout.split() == ["0"]


def test_proc_locks_does_not_list_other_jails_locks():
    secret = secret_int()
    _, r = pair(
        f"""
fd = os.open(os.__file__, os.O_RDONLY)
fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB, 1, {secret})
""",
        """
try:
    print(len(open('/proc/locks').read().splitlines()))
except OSError as e:
    print(name(e))
""",
    )
    assert r.stdout.split() == ["ENOENT"]


def test_locks_still_work_for_the_programs_own_files():
    """sqlite3 on the private work dir, in rollback and WAL mode, and lock calls on a private file, succeed."""
    r = _run("""
import sqlite3
for mode in ('delete', 'wal'):
    db = sqlite3.connect(f'/work/{mode}.db')
    db.execute(f'pragma journal_mode={mode}')
    db.execute('create table t(x)'); db.executemany('insert into t values (?)', [(i,) for i in range(100)])
    db.commit()
    print(mode, db.execute('select sum(x) from t').fetchone()[0])
    db.close()
with open('/work/f', 'w') as fh:
    fcntl.lockf(fh, fcntl.LOCK_EX); fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB); fcntl.lockf(fh, fcntl.LOCK_UN)
    print('locked')
""")
    assert r.status is RunStatus.OK, r
    assert r.stdout.split("\n")[:3] == ["delete 4950", "wal 4950", "locked"]


def test_futexes_on_shared_file_pages_do_not_cross_jails():
    """A non-private futex on a page of a file is keyed by the file, not the process: a wake in one jail would count
    (and end) waits in another. Waits on the python binary's first page spell the secret; the receiver wakes them."""
    secret = secret_int(8)
    futex_lib = """
import mmap, threading
libc.syscall.restype = ctypes.c_long
fd = os.open(sys.executable, os.O_RDONLY)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
page = libc.mmap(None, 4096, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
def word(i):
    return ctypes.c_uint32.from_address(page + 4 * i).value
"""
    _, r = pair(
        futex_lib
        + f"""
class Timespec(ctypes.Structure):
    _fields_ = [('s', ctypes.c_long), ('ns', ctypes.c_long)]
def wait(i):
    libc.syscall(202, ctypes.c_void_p(page + 4 * i), 0, word(i), ctypes.byref(Timespec(4, 0)), 0, 0)  # FUTEX_WAIT
for bit in range(8):
    if {secret} >> bit & 1:
        threading.Thread(target=wait, args=(bit,), daemon=True).start()
""",
        futex_lib
        + """
got = 0
for bit in range(8):
    woken = libc.syscall(202, ctypes.c_void_p(page + 4 * bit), 1, 1, 0, 0, 0)  # FUTEX_WAKE, one waiter
    got |= (woken > 0) << bit
print(got)
""",
    )
    assert r.stdout.split() == ["0"]


def test_threads_and_process_shared_sync_still_work():
    """Joining threads (C: pthread_join waits on a non-private futex) and Python threads and locks still work."""
    r = _run("""
import threading
results = []
def work(i):
    results.append(sum(range(100000 * i)))
threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
[t.start() for t in threads]; [t.join() for t in threads]
print(len(results))
""")
    assert r.status is RunStatus.OK and r.stdout.split() == ["4"], r
    c = run({"main.c": C_THREADS}, language="c", limits=LIMITS)
    assert c.status is RunStatus.OK and c.stdout.split() == ["4", "4"], c


C_THREADS = r"""
#include <pthread.h>
#include <stdio.h>
static pthread_mutex_t shared_lock;
static long total;
static void *work(void *arg) {
    long sum = 0;
    for (long i = 0; i < 20000000L * (long)arg; i++) sum += i & 1;
    pthread_mutex_lock(&shared_lock); total += 1; pthread_mutex_unlock(&shared_lock);
    return (void *)sum;
}
int main(void) {
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);  /* non-private futex ops */
    pthread_mutex_init(&shared_lock, &attr);
    pthread_t t[4];
    for (long i = 0; i < 4; i++) pthread_create(&t[i], NULL, work, (void *)(i + 1));
    int joined = 0;
    for (int i = 0; i < 4; i++) joined += pthread_join(t[i], NULL) == 0;
    printf("%d %ld\n", joined, total);
    return 0;
}
"""


# ---- notifications and timestamps of shared files ------------------------------------------------------------------


def test_inotify_does_not_see_other_jails_file_access():
    secret = secret_int(8)
    _, r = pair(
        f"""
files = sorted(f for f in os.listdir(STDLIB) if f.endswith('.py'))
open(os.path.join(STDLIB, files[{secret} % len(files)])).read()
""",
        """
fd = libc.inotify_init1(os.O_NONBLOCK)
if fd < 0:
    print(name(ctypes.get_errno())); raise SystemExit
libc.inotify_add_watch(fd, STDLIB.encode(), 0x20 | 0x01)  # IN_OPEN | IN_ACCESS
time.sleep(1.5)
try:
    data = os.read(fd, 65536)
except BlockingIOError:
    data = b''
print(len(data))
""",
    )
    assert r.stdout.split() == ["ENOSYS"]


def test_dnotify_does_not_see_other_jails_file_access():
    _, r = pair(
        """
time.sleep(0.5)
for f in sorted(os.listdir(STDLIB))[:20]:
    if f.endswith('.py'):
        open(os.path.join(STDLIB, f)).read()
""",
        """
import signal
seen = []
signal.signal(signal.SIGIO, lambda *a: seen.append(1))
fd = os.open(STDLIB, os.O_RDONLY)
try:
    fcntl.fcntl(fd, fcntl.F_NOTIFY, fcntl.DN_ACCESS | fcntl.DN_MULTISHOT)
except OSError as e:
    print(name(e)); raise SystemExit
time.sleep(1.5)
print(len(seen))
""",
    )
    assert r.stdout.split() == ["EINVAL"]


def test_reading_a_shared_file_changes_no_timestamp():
    """Closed by the read-only binds (no atime update): a regression guard."""
    _, r = pair(
        """
files = sorted(f for f in os.listdir(STDLIB) if f.endswith('.py'))
for f in files[:50]:
    open(os.path.join(STDLIB, f)).read()
""",
        """
files = sorted(f for f in os.listdir(STDLIB) if f.endswith('.py'))
before = [os.stat(os.path.join(STDLIB, f)).st_atime_ns for f in files[:50]]
time.sleep(1.0)
after = [os.stat(os.path.join(STDLIB, f)).st_atime_ns for f in files[:50]]
print(before == after)
""",
    )
    assert r.stdout.split() == ["True"]


def test_dev_null_timestamps_cannot_carry_a_signal():
    s, r = pair(
        """
try:
    os.utime('/dev/null'); print('TOUCHED')
except OSError as e:
    print(name(e))
with open('/dev/null', 'w') as fh:
    fh.write('still a sink')
""",
        """
before = os.stat('/dev/null')
time.sleep(1.0)
after = os.stat('/dev/null')
print(before.st_mtime_ns == after.st_mtime_ns and before.st_ctime_ns == after.st_ctime_ns)
""",
    )
    assert s.stdout.split()[0] == "EROFS"
    assert r.stdout.split() == ["True"]


# ---- host-wide counters ------------------------------------------------------------------------------------------

GLOBAL_PROC_FILES = [
    "/proc/loadavg",
    "/proc/stat",
    "/proc/meminfo",
    "/proc/vmstat",
    "/proc/interrupts",
    "/proc/softirqs",
    "/proc/diskstats",
    "/proc/schedstat",
    "/proc/pressure/cpu",
    "/proc/uptime",
    "/proc/locks",
    "/proc/key-users",
    "/proc/sys/fs/file-nr",
    "/proc/sys/fs/inode-nr",
    "/proc/sys/fs/aio-nr",
    "/proc/sys/kernel/random/entropy_avail",
    "/proc/buddyinfo",
    "/proc/zoneinfo",
    "/proc/cgroups",
    "/proc/sys/fs/dentry-state",
    "/proc/slabinfo",
]


def test_no_host_wide_proc_file_is_readable():
    r = _run(f"""
for p in {GLOBAL_PROC_FILES!r}:
    try:
        open(p).read(); print(p, 'READ')
    except OSError as e:
        print(p, name(e))
print('self', os.path.isdir('/proc/self/fd'), os.getpid() == int(os.readlink('/proc/self')))
""")
    lines = r.stdout.splitlines()
    assert [ln for ln in lines[:-1] if not ln.endswith("ENOENT")] == []
    assert lines[-1] == "self True True"  # the program's own /proc/<pid> still works


def fork_sender(count: int) -> str:
    """A sender that starts `count` processes: what host-wide process counters would show another jail."""
    return f"""
for _ in range({count}):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
"""


def test_fork_count_of_another_jail_is_not_visible():
    secret = 50 + secret_int(6)
    _, r = pair(
        fork_sender(secret),
        """
def forks():
    try:
        return int([ln for ln in open('/proc/stat') if ln.startswith('processes')][0].split()[1])
    except OSError as e:
        return name(e)
a = forks(); time.sleep(1.0); b = forks()
print(b if isinstance(b, str) else b - a)
""",
    )
    assert r.stdout.split() == ["ENOENT"]


def test_pidfd_inode_numbers_do_not_count_other_jails_processes():
    """A pidfd's inode number is a host-wide count of processes started (pidfs)."""
    secret = 50 + secret_int(6)
    _, r = pair(
        fork_sender(secret),
        """
def ino():
    try:
        fd = os.pidfd_open(os.getpid())
    except OSError as e:
        return name(e)
    n = os.fstat(fd).st_ino; os.close(fd); return n
a = ino(); time.sleep(1.0); b = ino()
print(b if isinstance(b, str) else b - a)
pidfd = ctypes.c_int(-1)
pid = libc.syscall(56, 0x1000 | 17, 0, ctypes.byref(pidfd), 0, 0)  # clone(CLONE_PIDFD | SIGCHLD)
if pid == 0:
    os._exit(0)
print(name(ctypes.get_errno()) if pid < 0 else 'PIDFD')
""",
    )
    assert r.stdout.split() == ["ENOSYS", "ENOSYS"]


def test_sysinfo_shows_no_host_memory_or_process_count():
    _, r = pair(
        """
blob = bytearray(200 << 20)
for i in range(0, len(blob), 4096):
    blob[i] = 1
""",
        """
buf = ctypes.create_string_buffer(256)
print(libc.sysinfo(buf) == 0 or name(ctypes.get_errno()))
""",
    )
    assert r.stdout.split() == ["ENOSYS"]


def test_statfs_shows_no_host_filesystem_usage():
    """Input and collected files live on the host's run dir fs; its free blocks would show other runs' writes."""
    _, r = pair(
        """
with open('/work/out.bin', 'wb') as fh:
    fh.write(os.urandom(8 << 20))
""",
        """
res = []
for p in ('/work/main.py', '/usr', '/work'):
    try:
        st = os.statvfs(p); res.append('READ')
    except OSError as e:
        res.append(name(e))
print(*res)
""",
        sender_collect=["out.bin"],
    )
    assert r.stdout.split() == ["ENOSYS", "ENOSYS", "ENOSYS"]


def _pipe_probe() -> str:
    return """
r, w = os.pipe()
print(fcntl.fcntl(w, fcntl.F_GETPIPE_SZ))
"""


def test_pipe_buffers_of_another_jail_do_not_shrink_this_jails_pipes():
    """The kernel counts pipe buffers per host uid (pipe-user-pages-soft): each concurrent jail needs its own uid."""
    _, r = pair(
        """
def hog():
    pipes = []
    while True:
        try:
            r, w = os.pipe(); pipes.append((r, w))
        except OSError:
            return pipes
        try:
            fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, 1 << 20)
        except OSError:
            pass
kids = []
for _ in range(4):
    pid = os.fork()
    if pid == 0:
        hog(); time.sleep(3); os._exit(0)
    kids.append(pid)
""",
        _pipe_probe(),
    )
    assert r.stdout.split() == ["65536"]


def test_unix_fds_in_flight_of_another_jail_are_not_counted_here():
    """In-flight SCM_RIGHTS fds are counted per host uid against RLIMIT_NOFILE: per-jail uids."""
    sender = """
a, b = socket.socketpair()
fds = [os.open('/dev/null', os.O_RDONLY) for _ in range(8)]
sent = 0
try:
    while True:
        socket.send_fds(a, [b'x'], fds); sent += len(fds)
except OSError:
    pass
"""
    receiver = """
a, b = socket.socketpair()
a.setblocking(False)
fd = os.open('/dev/null', os.O_RDONLY)
sent = 0
try:
    while sent < 200:
        socket.send_fds(a, [b'x'], [fd]); sent += 1
except OSError as e:
    print(sent, name(e))
else:
    print(sent, 'OK')
"""
    alone = _run(receiver)
    _, r = pair(sender, receiver)
    assert r.stdout.split() == alone.stdout.split()


# ---- page cache --------------------------------------------------------------------------------------------------


def _evict_from_page_cache(path: str) -> None:
    with open(path, "rb") as fh:
        os.posix_fadvise(fh.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)


def _resident_pages(path: str) -> int:
    size = os.path.getsize(path)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
        vec = ctypes.create_string_buffer(pages)
        assert libc.mincore(addr, size, vec) == 0
        libc.munmap(addr, size)
        return sum(b & 1 for b in vec.raw)
    finally:
        os.close(fd)


def _big_stdlib_file() -> str:
    """pydoc_data/topics.py (~700 KB) of the jail's own stdlib, which may not be ours."""
    for root in toolchain("python").ro_paths:
        path = os.path.join(root, "pydoc_data", "topics.py")
        if os.path.isfile(path):
            return path
    raise AssertionError("the jail's stdlib has no pydoc_data/topics.py")


def test_a_jail_cannot_evict_shared_pages_from_the_page_cache():
    """Eviction is the sender's half of a page-cache channel (the receiver times its reads)."""
    path = _big_stdlib_file()
    with open(path, "rb") as fh:
        fh.read()
    pages = _resident_pages(path)
    assert pages > 100
    r = _run(
        """
import pydoc_data.topics as t
fd = os.open(t.__file__, os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
m = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
for advice in (20, 21):  # MADV_COLD, MADV_PAGEOUT
    try:
        m.madvise(advice)
    except OSError as e:
        print(name(e))
print('done')
""".replace("import pydoc", "import mmap\nimport pydoc")
    )
    assert r.status is RunStatus.OK and r.stdout.split()[-1] == "done", r
    assert _resident_pages(path) == pages


def test_a_jail_cannot_probe_the_page_cache_without_reading():
    """RWF_NOWAIT reads fail with EAGAIN on a page that is not cached: a probe that does not load the page."""
    path = _big_stdlib_file()
    _evict_from_page_cache(path)
    r = _run("""
import pydoc_data.topics as t
fd = os.open(t.__file__, os.O_RDONLY)
buf = bytearray(4096)
try:
    os.preadv(fd, [buf], 100 * 4096, os.RWF_NOWAIT); print('READ')
except OSError as e:
    print(name(e))
""")
    assert r.stdout.split()[0] in ("EOPNOTSUPP", "ENOTSUP")  # one errno, two names


def test_other_page_cache_and_page_sharing_interfaces_are_off():
    """Kernel AIO (RWF_NOWAIT in memory), cachestat, process_madvise(PIDFD_SELF) and KSM merging (identical pages of two
    jails merged: each can tell) would get around the rules above."""
    r = _run(
        """
import pydoc_data.topics as t
fd = os.open(t.__file__, os.O_RDONLY)
libc.syscall.restype = ctypes.c_long
ctx = ctypes.c_ulong(0)
print(libc.syscall(206, 8, ctypes.byref(ctx)) == 0 or name(ctypes.get_errno()))  # io_setup
class Range(ctypes.Structure):
    _fields_ = [('off', ctypes.c_uint64), ('len', ctypes.c_uint64)]
stat = ctypes.create_string_buffer(40)
print(libc.syscall(451, fd, ctypes.byref(Range(0, 0)), stat, 0) == 0 or name(ctypes.get_errno()))  # cachestat
print(libc.syscall(440, -10000, 0, 0, 21, 0) == 0 or name(ctypes.get_errno()))  # process_madvise(PIDFD_SELF)
print(libc.prctl(67, 1, 0, 0, 0) == 0 or name(ctypes.get_errno()))  # PR_SET_MEMORY_MERGE
m = mmap.mmap(-1, 1 << 20)
m.madvise(mmap.MADV_MERGEABLE)
print(libc.prctl(68, 0, 0, 0, 0), open('/proc/self/ksm_merging_pages').read().strip())  # PR_GET_MEMORY_MERGE
""".replace("import pydoc", "import mmap\nimport pydoc")
    )
    assert r.status is RunStatus.OK, r
    assert r.stdout.split() == ["ENOSYS", "ENOSYS", "ENOSYS", "EINVAL", "0", "0"]


def test_mincore_does_not_show_pages_another_jail_loaded():
    """Closed by the kernel (for a file the caller may not write, mincore says every page is resident): a guard."""
    path = _big_stdlib_file()
    receiver = """
import mmap, pydoc_data.topics as t
fd = os.open(t.__file__, os.O_RDONLY)
size = os.fstat(fd).st_size
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
vec = ctypes.create_string_buffer((size + 4095) // 4096)
libc.mincore(addr, size, vec)
print(sum(b & 1 for b in vec.raw))
"""
    _evict_from_page_cache(path)
    alone = _run(receiver)
    _evict_from_page_cache(path)
    _, r = pair(
        """
import pydoc_data.topics as t
open(t.__file__, 'rb').read()
""",
        receiver,
    )
    assert r.stdout.split() == alone.stdout.split()


# ---- namespaced state (closed by the jail's own namespaces): regression guards --------------------------------------


def test_abstract_unix_sockets_do_not_cross_jails():
    tag = secrets.token_hex(4)
    _, r = pair(
        f"""
s = socket.socket(socket.AF_UNIX); s.bind('\\0gs-{tag}'); s.listen(1)
""",
        f"""
c = socket.socket(socket.AF_UNIX)
try:
    c.connect('\\0gs-{tag}'); print('CONNECTED')
except OSError as e:
    print(name(e))
""",
    )
    assert r.stdout.split() == ["ECONNREFUSED"]


def test_sysv_shared_memory_and_mqueues_do_not_cross_jails():
    key = secret_int(16)
    _, r = pair(
        f"""
assert libc.shmget({key}, 4096, 0o1666) >= 0
assert libc.mq_open(b'/gs{key}', os.O_CREAT | os.O_RDWR, 0o666, None) >= 0
""",
        f"""
print(name(ctypes.get_errno()) if libc.shmget({key}, 4096, 0o666) < 0 else 'SHM')
print(name(ctypes.get_errno()) if libc.mq_open(b'/gs{key}', os.O_RDONLY) < 0 else 'MQ')
""",
    )
    assert r.stdout.split() == ["ENOENT", "ENOENT"]


# ---- end to end: hidden tests leaking into another run's verdict reason ----------------------------------------------

# Sender half: place read locks on the jail's python binary at offsets spelling `text`; receiver half: read them back.
LEAK_LIB = """
import fcntl, os, struct, sys, time
FLOCK = "hhqqi4x"
def plant(text):
    fd = os.open(sys.executable, os.O_RDONLY)
    for i, ch in enumerate(text.encode()[:40]):
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack(FLOCK, fcntl.F_RDLCK, 0, 10_000_000 + i * 1000 + ch, 1, 0))
    time.sleep(2.5)
    return fd
def harvest():
    time.sleep(0.8)
    fd = os.open(sys.executable, os.O_RDONLY)
    found, start = {}, 10_000_000
    for _ in range(40):
        got = struct.unpack(FLOCK, fcntl.fcntl(fd, fcntl.F_OFD_GETLK, struct.pack(FLOCK, fcntl.F_WRLCK, 0, start, 0, 0)))
        if got[0] == fcntl.F_UNLCK:
            break
        off = got[2] - 10_000_000
        found[off // 1000] = chr(off % 1000)
        start = got[2] + 1
    return "".join(found[k] for k in sorted(found)) or "nothing"
"""


def test_hidden_stdin_does_not_reach_a_concurrent_public_tests_reason():
    secret = "HIN" + secrets.token_hex(6)
    program = (
        LEAK_LIB
        + """
data = sys.stdin.read().strip()
if data == "pub":
    print(harvest())
else:
    plant(data)
"""
    )
    item = CodeItem(
        completion=f"```python\n{program}```",
        time_limit_s=6.0,
        tests=[{"type": "stdio", "stdin": "pub", "stdout": "PUB"}],
        hidden_tests=[{"type": "stdio", "stdin": secret, "stdout": "whatever"}],
    )
    verdict = score_code(item)
    assert secret not in verdict.model_dump_json()
    assert secret[3:] not in verdict.model_dump_json()


def test_hidden_call_args_do_not_reach_another_items_reason_in_one_batch():
    secret = "HIN" + secrets.token_hex(6)
    sender = LEAK_LIB + "def f(x):\n    if x != 'public':\n        plant(x)\n    return x\n"
    receiver = LEAK_LIB + "def f(x):\n    return harvest()\n"
    items = [
        {
            "verifier": "code",
            "completion": f"```python\n{sender}```",
            "time_limit_s": 6.0,
            "tests": [{"type": "call", "fn": "f", "args": ["public"], "expected": "public"}],
            "hidden_tests": [{"type": "call", "fn": "f", "args": [secret], "expected": "x"}],
        },
        {
            "verifier": "code",
            "completion": f"```python\n{receiver}```",
            "time_limit_s": 6.0,
            "tests": [{"type": "call", "fn": "f", "args": ["p"], "expected": "p"}],
        },
    ]
    verdicts = score_batch(items, workers=2)
    text = "".join(v.model_dump_json() for v in verdicts)
    assert secret not in text and secret[3:9] not in text


def test_the_32_bit_syscall_abis_cannot_bypass_the_rules():
    """The rules match x86-64 syscall numbers: an i386 syscall (int 0x80) is killed (SIGSYS), an x32 one fails."""
    if os.uname().machine != "x86_64":
        pytest.skip("x86-64 only")
    x32 = _run("print(libc.syscall(0x40000000 | 73, 0, 1), name(ctypes.get_errno()))\n")  # x32 flock(0, LOCK_SH)
    assert x32.status is RunStatus.OK and x32.stdout.split() == ["-1", "ENOSYS"], x32
    i386 = _run("""
import mmap
code = b"\\x53\\xb8" + (143).to_bytes(4, "little") + b"\\xbb\\x00\\x00\\x00\\x00\\xb9\\x01\\x00\\x00\\x00\\xcd\\x80\\x5b\\xc3"
m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
m.write(code)
print('ran', ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(m)))(), flush=True)
""")  # i386 flock(0, LOCK_SH)
    assert (i386.status, i386.signal, i386.stdout) == (RunStatus.RUNTIME_ERROR, 31, ""), i386
