"""Adversarial programs against the nsjail sandbox: each pins its exact outcome and checks the host is untouched.

SAFETY: these run as root on shared machines. Every test here, and every test marked destructive anywhere, depends
on the session fixture `jail_proven` (tests/conftest.py), which runs a harmless probe first and FAILS (never skips)
unless the probe shows a real jail: its own pid namespace (pid 1, no host pids visible) and a non-root uid on the host.
"""

from __future__ import annotations

import functools
import os
import secrets
import shutil
import socket
import subprocess
import tempfile

import pytest
from helpers import host_pids_with

from groupscore.sandbox import Limits, RunResult, RunStatus, run, run_many
from groupscore.sandbox.toolchains import toolchain

PRELUDE = """\
import os, sys, errno, ctypes, socket, signal, time
libc = ctypes.CDLL(None, use_errno=True)
def name(e):
    n = e.errno if isinstance(e, OSError) else e
    return errno.errorcode.get(n, str(n))
def sys_call(*a):
    r = libc.syscall(*a)
    return "OK" if r >= 0 else name(ctypes.get_errno())
"""
FAST = Limits(wall_time_s=3, memory_mb=256)
IS_ROOT = os.geteuid() == 0


@functools.cache
def runs_warm() -> bool:
    """Whether Python runs here start from a warm template (sandbox/warm.py: as root, where one can be made). Then the
    jail's pid 1 is the run's own init, root in the template's user namespace and not dumpable, where through nsjail
    it is the init shell, with the program's uid: the program can neither signal nor read it (EPERM, EACCES where
    nsjail's run is let through or silently ignored), and uid 0 is mapped there (to the template's own host id), so
    setuid(0) is refused for want of the capability (EPERM), not for an unmapped id (EINVAL)."""
    r = run({"main.py": "import sys\nprint('template' in ' '.join(sys.orig_argv))\n"}, limits=FAST)
    return r.stdout == "True\n"


def jailed(code: str, *, limits: Limits = FAST, stdin: str = "", collect=(), files=None) -> tuple[RunResult, str]:
    """Run `code` (after PRELUDE) as main.py with a unique marker in argv; assert nothing of it survives."""
    marker = "gsmark-" + secrets.token_hex(6)
    exe = toolchain("python").executable
    result = run(
        {"main.py": PRELUDE + code, **(files or {})},
        [exe, "-s", "-B", "main.py", marker],
        limits=limits,
        stdin=stdin,
        collect=list(collect),
    )
    assert host_pids_with(marker) == [], "a process of the run survived it"
    return result, marker


@pytest.fixture
def canary():
    """A host process with the jail's own uid: kill(-1) from inside must not reach it."""
    kwargs = {"user": 65534, "group": 65534} if IS_ROOT else {}
    proc = subprocess.Popen(["sleep", "60"], **kwargs)
    yield proc
    alive = proc.poll() is None
    proc.kill()
    proc.wait()
    assert alive, "the host canary process was killed from inside the jail"


pytestmark = pytest.mark.usefixtures("jail_proven")
destructive = pytest.mark.destructive


def test_jailed_process_has_an_unprivileged_real_uid_on_the_host(jail_proven):
    """Seen from outside (/proc/<pid>/status of the running jailed process), not as the jail reports it."""
    assert jail_proven["uids_on_host"] and 0 not in jail_proven["uids_on_host"]
    if IS_ROOT:  # a host uid of its own per live jail, never nobody's or any real user's (covert channels)
        from groupscore.sandbox.uids import ID_COUNT, id_base

        assert all(id_base() <= uid < id_base() + ID_COUNT for uid in jail_proven["uids_on_host"])
    assert jail_proven["pid_inside"] == 2  # under the jail's init shell, in its own pid namespace


# ---- network ---------------------------------------------------------------------------------------


def test_host_loopback_listener_is_unreachable():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    try:
        r, _ = jailed(f"""
s = socket.socket()
s.settimeout(1)
try:
    s.connect(("127.0.0.1", {port})); print("CONNECTED")
except OSError as e:
    print(name(e))
""")
        listener.settimeout(0.2)
        with pytest.raises(socket.timeout):
            listener.accept()  # nothing ever arrived from the jail
    finally:
        listener.close()
    assert r.status is RunStatus.OK and r.stdout.strip() == "ENETUNREACH"


def test_egress_to_internet_fails():
    r, _ = jailed("""
for addr in [("1.1.1.1", 443), ("8.8.8.8", 53)]:
    s = socket.socket(); s.settimeout(1)
    try:
        s.connect(addr); print("CONNECTED")
    except OSError as e:
        print(name(e))
""")
    assert r.status is RunStatus.OK and r.stdout.split() == ["ENETUNREACH", "ENETUNREACH"]


def test_udp_and_raw_dns_fail():
    r, _ = jailed("""
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    s.sendto(b"x", ("8.8.8.8", 53)); print("SENT")
except OSError as e:
    print(name(e))
try:
    socket.getaddrinfo("example.com", 80); print("RESOLVED")
except socket.gaierror as e:
    print("gaierror")
""")
    assert r.status is RunStatus.OK and r.stdout.split() == ["ENETUNREACH", "gaierror"]


def test_only_a_down_loopback_interface_exists():
    r, _ = jailed("""
print(sorted(n for _, n in socket.if_nameindex()))
print(open("/sys/class/net/lo/operstate").read().strip() if os.path.exists("/sys/class/net/lo") else "nosys")
""")
    assert r.status is RunStatus.OK and r.stdout.split("\n")[:2] == ["['lo']", "nosys"]


# ---- host files, environment, fds -----------------------------------------------------------------


def test_etc_shadow_is_not_there():
    r, _ = jailed("""
for p in ["/etc/shadow", "/etc/passwd", "/root", "/home"]:
    try:
        os.listdir(p) if p in ("/root", "/home") else open(p).read(); print("READ", p)
    except OSError as e:
        print(name(e))
""")
    assert r.status is RunStatus.OK and r.stdout.split() == ["ENOENT"] * 4


@pytest.mark.skipif(not IS_ROOT, reason="uid mapping to nobody applies when started as root")
def test_etc_shadow_unreadable_even_when_bind_mounted():
    """Even with /etc/shadow mounted into the jail, its real uid (nobody) cannot read it."""
    from groupscore.sandbox.classify import classify
    from groupscore.sandbox.nsjail_launcher import execute_nsjail
    from groupscore.sandbox.policy import build_policy

    tool = toolchain("python")
    policy = build_policy(tool, FAST, extra_ro=("/etc/shadow",))
    assert any(m.target == "/etc/shadow" for m in policy.mounts)
    code = (
        "import errno\ntry:\n    open('/etc/shadow').read(); print('READ')\n"
        "except OSError as e:\n    print(errno.errorcode[e.errno])\n"
    )
    out, _, _ = execute_nsjail(policy, {"main.py": code.encode()}, [tool.executable, "main.py"], b"", [])
    assert classify(out, FAST)[0] is RunStatus.OK and out.stdout.decode().strip() == "EACCES"


def test_host_world_readable_file_is_invisible(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("s3cret")
    secret.chmod(0o644)
    r, _ = jailed(f"""
try:
    print(open({str(secret)!r}).read())
except OSError as e:
    print(name(e))
""")
    assert r.status is RunStatus.OK and r.stdout.strip() == "ENOENT" and "s3cret" not in r.stdout


def test_host_env_secret_never_reaches_the_jail(monkeypatch):
    monkeypatch.setenv("GS_TEST_SECRET", "hunter2-" + secrets.token_hex(4))
    r, _ = jailed("""
print(sorted(os.environ))
for pid in (1, "self"):
    try:
        print(open(f"/proc/{pid}/environ", "rb").read().replace(b"\\0", b" ").decode())
    except OSError as e:
        print(name(e))
""")
    assert r.status is RunStatus.OK
    if runs_warm():
        assert r.stdout.splitlines()[1] == "EACCES"  # the run's init: root's, not dumpable
    assert "hunter2" not in r.stdout and "GS_TEST_SECRET" not in r.stdout
    # PWD comes from the init shell
    assert r.stdout.splitlines()[0] == str(
        sorted(
            [
                "PATH",
                "PWD",
                "HOME",
                "TMPDIR",
                "LANG",
                "LC_ALL",
                "PYTHONHASHSEED",
                "PYTHONDONTWRITEBYTECODE",
                "PYTHONIOENCODING",
            ]
        )
    )


def test_inherited_host_fds_are_closed(tmp_path):
    leak = tmp_path / "leak.txt"
    leak.write_text("leaked")
    fd = os.open(leak, os.O_RDONLY)
    os.set_inheritable(fd, True)
    try:
        r, _ = jailed("print(sorted(int(f) for f in os.listdir('/proc/self/fd')))")
    finally:
        os.close(fd)
    assert r.status is RunStatus.OK
    # 0,1,2 and the fd listdir itself holds open
    assert eval(r.stdout)[:3] == [0, 1, 2] and len(eval(r.stdout)) == 4


def test_dev_holds_only_harmless_devices():
    r, _ = jailed("""
print(sorted(os.listdir("/dev")))
for p in ["/dev/sda", "/dev/mem", "/dev/kmsg", "/dev/vda", "/dev/tty"]:
    try:
        open(p, "rb"); print("OPEN", p)
    except OSError as e:
        print(name(e))
open("/dev/null", "w").write("x")
print(len(open("/dev/urandom", "rb").read(16)))
import stat
for where in ["/dev/gsnull", "/work/gsnull"]:
    try:
        os.mknod(where, stat.S_IFCHR | 0o666, os.makedev(1, 3)); print("MKNOD", where)
    except OSError as e:
        print(name(e))
""")
    lines = r.stdout.splitlines()
    assert r.status is RunStatus.OK
    assert lines[0] == str(sorted(["fd", "null", "random", "stderr", "stdin", "stdout", "urandom", "zero"]))
    assert lines[1:] == ["ENOENT"] * 5 + ["16", "EROFS", "EPERM"]


def test_writes_outside_the_work_dir_fail_and_host_is_untouched():
    target = f"/usr/lib/gs-{secrets.token_hex(4)}"
    r, _ = jailed(f"""
for p in [{target!r}, "/gs-root-file", "/proc/sys/kernel/hostname", "/etc/gs"]:
    try:
        open(p, "w").write("x"); print("WROTE", p)
    except OSError as e:
        print(name(e))
open("/work/fine.txt", "w").write("ok"); open("/tmp/also.txt", "w").write("ok")
print(sorted(os.listdir("/work")))
""")
    assert r.status is RunStatus.OK
    # /proc/sys is not there at all (the jail's /proc holds only its own processes)
    assert r.stdout.splitlines()[:4] == ["EROFS", "EROFS", "ENOENT", "ENOENT"]
    assert r.stdout.splitlines()[4] == "['also.txt', 'fine.txt', 'main.py']"
    assert not os.path.exists(target) and not os.path.exists("/gs-root-file")


def test_work_dir_is_fresh_per_run():
    first, _ = jailed("open('left.txt', 'w').write('x'); print(sorted(os.listdir('.')))")
    second, _ = jailed("print(sorted(os.listdir('.')))")
    assert first.stdout.strip() == "['left.txt', 'main.py']"
    assert second.stdout.strip() == "['main.py']"


def test_input_files_are_read_only():
    r, _ = jailed("""
try:
    open("main.py", "a").write("#"); print("WROTE")
except OSError as e:
    print(name(e))
try:
    os.unlink("main.py"); print("UNLINKED")
except OSError as e:
    print(name(e))
""")
    # root-owned, mode 0644 to the jail's uid (EACCES), on a read-only bind (EROFS otherwise)
    assert r.status is RunStatus.OK and r.stdout.split() == ["EACCES" if IS_ROOT else "EROFS", "EBUSY"]


def test_symlink_tricks_stay_inside_the_jail():
    r, _ = jailed("""
os.symlink("/etc/shadow", "s1"); os.symlink("/proc/1/root/etc/shadow", "s2")
os.symlink("../../../../../../etc/passwd", "s3")
for p in ["s1", "s2", "s3", "/proc/1/root/root", "/proc/self/root/../../etc/shadow"]:
    try:
        open(p).read(); print("READ", p)
    except OSError as e:
        print(name(e))
""")
    # /proc/1/root: through nsjail the init shell's (the jail's own root), warm the run's init, which is not dumpable
    pid1 = "EACCES" if runs_warm() else "ENOENT"
    assert r.status is RunStatus.OK and r.stdout.split() == ["ENOENT", pid1, "ENOENT", pid1, "ENOENT"]


def test_collected_file_cannot_be_swapped_for_a_symlink():
    r, _ = jailed(
        """
open("out.txt", "w").write("result")
for f in (lambda: os.unlink("out.txt"), lambda: os.rename("out.txt", "x"), lambda: os.symlink("/etc/shadow", "out.txt")):
    try:
        f(); print("DONE")
    except OSError as e:
        print(name(e))
""",
        collect=["out.txt"],
    )
    assert r.status is RunStatus.OK and r.stdout.split() == ["EBUSY", "EBUSY", "EEXIST"]
    assert r.files == {"out.txt": b"result"}


# ---- processes ---------------------------------------------------------------------------------------


@destructive
def test_fork_bomb_is_stopped_by_the_pids_limit():
    r, _marker = jailed(
        """
while True:
    try:
        os.fork()
    except OSError:
        pass
""",
        limits=Limits(wall_time_s=2, memory_mb=256, max_processes=32),
    )
    assert r.status is RunStatus.TIMEOUT and r.wall_time_s < 4


@destructive
def test_fork_count_is_capped():
    r, _ = jailed(
        """
n = 0
try:
    while True:
        pid = os.fork()
        if pid == 0:
            time.sleep(30); os._exit(0)
        n += 1
except OSError as e:
    print(n, name(e))
""",
        limits=Limits(wall_time_s=5, memory_mb=256, max_processes=16),
    )
    n, err = r.stdout.split()
    assert r.status is RunStatus.OK and err == "EAGAIN" and 8 <= int(n) < 16


@destructive
def test_thread_bomb_is_capped():
    r, _ = jailed(
        """
import threading
n = 0
try:
    while True:
        threading.Thread(target=time.sleep, args=(30,), daemon=True).start(); n += 1
except RuntimeError as e:
    print(n, "RuntimeError", flush=True)
os._exit(0)
""",
        limits=Limits(wall_time_s=5, memory_mb=256, max_processes=16),
    )
    n, err = r.stdout.split()
    assert r.status is RunStatus.OK and err == "RuntimeError" and int(n) < 16


@destructive
def test_memory_bomb_one_process():
    r, _ = jailed(
        "a = []\nwhile True: a.append(bytearray(8 << 20)); a[-1][::4096] = b'x' * len(a[-1][::4096])",
        limits=Limits(wall_time_s=10, memory_mb=128),
    )
    assert r.status is RunStatus.MEMORY_LIMIT
    assert r.peak_memory_mb is None or r.peak_memory_mb <= 128 + 8


@destructive
def test_memory_bomb_many_children_together():
    """Five children of 40 MB each: none alone passes 128 MB, together they do."""
    r, _ = jailed(
        """
kids = []
for _ in range(5):
    pid = os.fork()
    if pid == 0:
        b = bytearray(40 << 20); b[::4096] = b"x" * len(b[::4096]); time.sleep(20); os._exit(0)
    kids.append(pid)
for k in kids:
    os.waitpid(k, 0)
""",
        limits=Limits(wall_time_s=4, memory_mb=128),
    )
    if "memory" not in r.cgroup:
        pytest.skip(f"no cgroup memory limit on this host: {r.cgroup}")
    assert r.status is RunStatus.MEMORY_LIMIT


@destructive
def test_busy_loop_times_out():
    r, _ = jailed("while True: pass", limits=Limits(wall_time_s=1, memory_mb=128))
    assert r.status is RunStatus.TIMEOUT and 1.0 <= r.wall_time_s < 2.5 and r.signal == 9


@destructive
def test_cpu_limit_below_wall_limit():
    r, _ = jailed("while True: pass", limits=Limits(wall_time_s=30, cpu_time_s=1, memory_mb=128))
    # SIGXCPU at the soft CPU limit (the kernel's CPU clock runs a little ahead of wait4's)
    assert (r.status, r.signal, r.error) == (RunStatus.TIMEOUT, 24, "cpu time limit 1s") and r.cpu_time_s >= 0.8


@destructive
def test_sleep_past_the_limit_times_out():
    r, _ = jailed("time.sleep(30)", limits=Limits(wall_time_s=1, memory_mb=128))
    assert r.status is RunStatus.TIMEOUT and r.wall_time_s < 2.5 and r.cpu_time_s < 1


@destructive
def test_spin_ignoring_every_catchable_signal():
    r, _ = jailed(
        """
for s in signal.valid_signals():
    try:
        signal.signal(s, signal.SIG_IGN)
    except (OSError, ValueError):
        pass
print("ignoring", flush=True)
while True: pass
""",
        limits=Limits(wall_time_s=1, memory_mb=128),
    )
    assert r.status is RunStatus.TIMEOUT and r.stdout == "ignoring\n" and r.wall_time_s < 2.5


@destructive
def test_closing_stdout_and_stderr_then_spinning_still_times_out():
    r, _ = jailed("os.close(1); os.close(2)\nwhile True: pass", limits=Limits(wall_time_s=1, memory_mb=128))
    assert r.status is RunStatus.TIMEOUT and r.wall_time_s < 2.5


@destructive
def test_double_fork_daemon_does_not_survive():
    r, _marker = jailed("""
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN); signal.signal(signal.SIGHUP, signal.SIG_IGN)
        time.sleep(60)
    os._exit(0)
time.sleep(0.3)
print("parent done")
""")
    assert r.status is RunStatus.OK and r.stdout == "parent done\n"  # jailed() already checked no survivor


@destructive
def test_background_child_past_the_timeout_does_not_survive():
    r, _marker = jailed(
        """
if os.fork() == 0:
    os.setsid(); time.sleep(60)
time.sleep(60)
""",
        limits=Limits(wall_time_s=1, memory_mb=128),
    )
    assert r.status is RunStatus.TIMEOUT


@destructive
def test_kill_minus_one_reaches_nothing_outside(canary):
    r, _ = jailed("""
if os.fork() == 0:
    os.kill(-1, signal.SIGKILL)  # everything this uid can signal in its pid namespace, bar init
    os._exit(0)
time.sleep(2)
print("program survived")
""")
    assert (r.status, r.signal, r.stdout) == (RunStatus.RUNTIME_ERROR, 9, "")


@destructive
def test_killing_the_parent_and_host_pids(canary):
    r, _ = jailed(f"""
print(os.getppid())
for pid in [{os.getpid()}, {canary.pid}, 1]:
    try:
        os.kill(pid, signal.SIGKILL) if pid != 1 else os.kill(pid, 0); print("SENT", pid)
    except OSError as e:
        print(name(e))
try:
    os.kill(os.getppid(), signal.SIGKILL)  # the init: the kernel shields it from its own namespace
except OSError as e:
    print(name(e))  # warm: the run's init is another uid's
print("still here")
""")
    assert r.status is RunStatus.OK
    if runs_warm():
        assert r.stdout.split("\n") == ["1", "ESRCH", "ESRCH", "EPERM", "EPERM", "still here", ""]
    else:
        assert r.stdout.split("\n") == ["1", "ESRCH", "ESRCH", "SENT 1", "still here", ""]


@destructive
def test_output_flood_is_capped():
    r, _ = jailed(
        "while True: sys.stdout.write('x' * 65536)",
        limits=Limits(wall_time_s=10, memory_mb=128, max_output_bytes=100_000),
    )
    assert r.status is RunStatus.OUTPUT_LIMIT and r.stdout_truncated and len(r.stdout) == 100_000
    assert r.wall_time_s < 5


@destructive
def test_stderr_flood_is_capped():
    r, _ = jailed(
        "while True: os.write(2, b'e' * 65536)", limits=Limits(wall_time_s=10, memory_mb=128, max_output_bytes=50_000)
    )
    assert r.status is RunStatus.OUTPUT_LIMIT and r.stderr_truncated and len(r.stderr) == 50_000
    assert not r.stdout_truncated


@destructive
def test_disk_fill_hits_the_work_tmpfs_cap():
    before = shutil.disk_usage(tempfile.gettempdir()).free
    r, _ = jailed(
        """
n = 0
try:
    with open("fill", "wb") as f:
        while True:
            f.write(b"\\0" * (1 << 20)); f.flush(); n += 1
except OSError as e:
    print(n, name(e))
""",
        limits=Limits(wall_time_s=10, memory_mb=256, tmpfs_mb=8, max_file_bytes=64 << 20),
    )
    n, err = r.stdout.split()
    assert r.status is RunStatus.OK and err == "ENOSPC" and 6 <= int(n) <= 8
    assert shutil.disk_usage(tempfile.gettempdir()).free > before - (4 << 20)


@destructive
def test_one_big_file_hits_the_file_size_limit():
    r, _ = jailed(
        """
try:
    open("big", "wb").write(b"\\0" * (3 << 20)); print("WROTE")
except OSError as e:
    print(name(e))
""",
        limits=Limits(wall_time_s=5, memory_mb=256, max_file_bytes=2 << 20),
    )
    assert r.status is RunStatus.OK and r.stdout.strip() == "EFBIG"


@destructive
def test_many_files_hit_the_inode_cap():
    r, _ = jailed(
        """
n = 0
try:
    while True:
        open(f"f{n}", "w").close(); n += 1
except OSError as e:
    print(n, name(e))
""",
        limits=Limits(wall_time_s=10, memory_mb=256),
    )
    n, err = r.stdout.split()
    assert r.status is RunStatus.OK and err == "ENOSPC" and 4000 <= int(n) <= 4096


@destructive
def test_many_open_files_hit_nofile():
    r, _ = jailed(
        """
fs = []
try:
    while True:
        fs.append(open("/dev/null"))
except OSError as e:
    print(len(fs), name(e))
""",
        limits=Limits(wall_time_s=5, memory_mb=256, max_open_files=40),
    )
    n, err = r.stdout.split()
    assert r.status is RunStatus.OK and err == "EMFILE" and int(n) < 40


# ---- kernel interfaces (seccomp, privileges) -------------------------------------------------------


@destructive
def test_ptrace_is_denied():
    r, _ = jailed("""
print(name(ctypes.get_errno()) if libc.ptrace(0, 0, 0, 0) < 0 else "TRACEME")
pid = os.fork()
if pid == 0:
    time.sleep(5); os._exit(0)
print(name(ctypes.get_errno()) if libc.ptrace(16, pid, 0, 0) < 0 else "ATTACHED")
os.kill(pid, 9)
""")
    assert r.status is RunStatus.OK and r.stdout.split() == ["EPERM", "EPERM"]


@destructive
def test_mount_and_unshare_are_denied():
    r, _ = jailed("""
print(name(ctypes.get_errno()) if libc.mount(b"none", b"/work", b"tmpfs", 0, None) < 0 else "MOUNTED")
print(name(ctypes.get_errno()) if libc.unshare(0x10000000) < 0 else "UNSHARED")
print(name(ctypes.get_errno()) if libc.unshare(0x00020000) < 0 else "UNSHARED")
print(sys_call(56, 0x10000000 | 17, 0, 0, 0, 0))  # clone(CLONE_NEWUSER|SIGCHLD)
print(sys_call(308, -1, 0))  # setns
""")
    assert r.status is RunStatus.OK and r.stdout.split() == ["EPERM"] * 5


@destructive
def test_setuid_root_is_impossible():
    r, _ = jailed("""
for f in (lambda: os.setuid(0), lambda: os.setgid(0), lambda: os.setgroups([0]), lambda: os.seteuid(0)):
    try:
        f(); print("CHANGED")
    except OSError as e:
        print(name(e))
print(os.getuid(), os.geteuid())
print([l for l in open("/proc/self/status") if l.startswith("CapEff")][0].split()[1])
""")
    lines = r.stdout.splitlines()
    assert r.status is RunStatus.OK and lines[5] == "0000000000000000"
    if runs_warm():  # uid 0 is the template's root: refused for want of CAP_SETUID; the run has a uid of its own
        assert lines[:4] == ["EPERM"] * 4
        assert lines[4].split()[0] == lines[4].split()[1] != "0"
    else:  # uid/gid 0 are not mapped in the jail's user namespace (EINVAL); setgroups is off there (EPERM)
        assert lines[:4] == ["EINVAL", "EINVAL", "EPERM", "EINVAL"]
        if IS_ROOT:
            assert lines[4] == "65534 65534"


@destructive
def test_kernel_keyring_is_denied():
    r, _ = jailed("""
print(sys_call(250, 0, -3, 0, 0, 0))  # keyctl(KEYCTL_GET_KEYRING_ID, session)
print(sys_call(248, b"user", b"gs", b"x", 1, -3))  # add_key
print(sys_call(249, b"user", b"gs", None, 0))  # request_key
""")
    assert r.status is RunStatus.OK and r.stdout.split() == ["EPERM"] * 3


@destructive
def test_vsock_and_io_uring_are_denied():
    r, _ = jailed("""
try:
    socket.socket(40, socket.SOCK_STREAM); print("VSOCK")
except OSError as e:
    print(name(e))
print(sys_call(425, 8, ctypes.create_string_buffer(256)))  # io_uring_setup
print(sys_call(321, 0, 0, 0))  # bpf
""")
    assert r.status is RunStatus.OK and r.stdout.split() == ["EAFNOSUPPORT", "EPERM", "EPERM"]


@destructive
def test_process_is_pid_two_under_init_with_its_own_hostname():
    r, _ = jailed("print(os.getpid(), socket.gethostname(), sorted(p for p in os.listdir('/proc') if p.isdigit()))")
    assert r.status is RunStatus.OK and r.stdout.strip() == "2 sandbox ['1', '2']"


# ---- outcomes ------------------------------------------------------------------------------------------


def test_exit_code_and_exception_are_runtime_errors():
    r, _ = jailed("sys.exit(3)")
    assert (r.status, r.exit_code, r.signal) == (RunStatus.RUNTIME_ERROR, 3, None)
    r, _ = jailed("raise ValueError('boom')")
    assert r.status is RunStatus.RUNTIME_ERROR and r.exit_code == 1 and "ValueError: boom" in r.stderr


def test_self_sent_signals_kill_the_program():
    """The program is not pid 1 (which ignores default-action signals from its own namespace)."""
    r, _ = jailed("os.abort()")
    assert (r.status, r.exit_code, r.signal) == (RunStatus.RUNTIME_ERROR, None, 6)
    r, _ = jailed("print('err', file=sys.stderr, flush=True)\nos.kill(os.getpid(), signal.SIGKILL)")
    assert (r.status, r.signal, r.stderr) == (RunStatus.RUNTIME_ERROR, 9, "err\n")  # no "Killed" from the init shell
    r, _ = jailed("import faulthandler\nfaulthandler._sigsegv()")
    assert (r.status, r.exit_code, r.signal) == (RunStatus.RUNTIME_ERROR, None, 11)


def test_stdin_reaches_the_program_and_output_comes_back():
    r, _ = jailed("print(sum(map(int, sys.stdin.read().split())))", stdin="1 2 3\n4")
    assert r.status is RunStatus.OK and r.stdout == "10\n" and r.exit_code == 0


def test_run_many_in_parallel_keeps_order_and_isolation():
    exe = toolchain("python").executable
    prog = "import os\nfor _ in range(3):\n    if os.fork() == 0:\n        os._exit(0)\n    os.wait()\nprint({})"
    reqs = [
        {
            "files": {"main.py": prog.format(i)},
            "command": [exe, "main.py"],
            "limits": Limits(wall_time_s=10, max_processes=8),
        }
        for i in range(8)
    ]
    reqs.insert(3, {"files": {"../escape.py": "x"}})
    results = run_many(reqs, workers=4)
    assert results[3].status is RunStatus.SANDBOX_ERROR and "bad file name" in results[3].error
    ok = [r for i, r in enumerate(results) if i != 3]
    assert [r.stdout for r in ok] == [f"{i}\n" for i in range(8)] and all(r.status is RunStatus.OK for r in ok)


# ---- C and C++ -----------------------------------------------------------------------------------------

C_ECHO = '#include <stdio.h>\nint main(void){int a,b; if(scanf("%d %d",&a,&b)!=2) return 2; printf("%d\\n", a+b); return 0;}\n'


def test_c_compiles_and_runs():
    r = run({"main.c": C_ECHO}, language="c", stdin="40 2", limits=FAST)
    assert r.status is RunStatus.OK and r.stdout == "42\n"
    assert r.compile is not None and r.compile.status is RunStatus.OK and r.compile.wall_time_s > 0


def test_c_compile_error_is_reported_separately():
    r = run({"main.c": "int main(void){ return undefined_name; }"}, language="c", limits=FAST)
    assert r.status is RunStatus.COMPILE_ERROR and r.compile.status is RunStatus.RUNTIME_ERROR
    assert "undefined_name" in r.compile.stderr and r.stdout == ""


def test_cpp_compiles_and_runs():
    src = "#include <iostream>\n#include <vector>\nint main(){std::vector<int> v{1,2,3}; int s=0; for(int x: v) s+=x; std::cout<<s<<std::endl;}\n"
    r = run({"main.cpp": src}, language="cpp", limits=FAST)
    assert r.status is RunStatus.OK and r.stdout == "6\n"


def test_cpp_compile_error():
    r = run({"main.cpp": "int main(){ std::cout << 1; }"}, language="cpp", limits=FAST)
    assert r.status is RunStatus.COMPILE_ERROR and "cout" in r.compile.stderr


@destructive
def test_compile_step_has_its_own_time_limit():
    """`#include "/dev/zero"` makes the preprocessor read forever; the compile limit ends it."""
    r = run(
        {"main.c": '#include "/dev/zero"\nint main(void){return 0;}\n'},
        language="c",
        limits=FAST,
        compile_limits=Limits(wall_time_s=2, memory_mb=256, max_processes=16, tmpfs_mb=64),
    )
    assert r.status is RunStatus.COMPILE_ERROR and r.compile.status in (RunStatus.TIMEOUT, RunStatus.MEMORY_LIMIT)


@destructive
def test_c_segfault_and_c_memory_bomb():
    r = run({"main.c": "int main(void){ volatile int *p = 0; return *p; }"}, language="c", limits=FAST)
    assert (r.status, r.signal) == (RunStatus.RUNTIME_ERROR, 11)
    bomb = (
        "#include <stdlib.h>\n#include <string.h>\n"
        "int main(void){ for(;;){ char *p = malloc(1<<20); if(!p) return 3; memset(p, 1, 1<<20);} }\n"
    )
    r = run({"main.c": bomb}, language="c", limits=Limits(wall_time_s=10, memory_mb=64))
    # cgroup OOM kill, or malloc fails at the address-space limit and the program exits 3
    assert r.status is RunStatus.MEMORY_LIMIT or (r.status, r.exit_code) == (RunStatus.RUNTIME_ERROR, 3)


@destructive
def test_c_fork_bomb(canary):
    bomb = "#include <unistd.h>\nint main(void){ for(;;) fork(); }\n"
    r = run({"main.c": bomb}, language="c", limits=Limits(wall_time_s=2, memory_mb=128, max_processes=32))
    assert r.status is RunStatus.TIMEOUT


@destructive
def test_bombs_in_parallel_jails_do_not_starve_their_neighbours():
    """A fork bomb and a memory bomb run beside ordinary programs: each jail has its own pids and memory
    cgroup (and its own user namespace for RLIMIT_NPROC), so the neighbours finish normally."""
    marker = "gsmark-" + secrets.token_hex(6)
    exe = toolchain("python").executable
    fork_bomb = PRELUDE + "while True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    mem_bomb = PRELUDE + "a = []\nwhile True: a.append(bytearray(8 << 20)); a[-1][::4096] = b'x' * len(a[-1][::4096])\n"
    normal = PRELUDE + (
        "kids = []\nfor _ in range(6):\n    pid = os.fork()\n    if pid == 0:\n        os._exit(0)\n"
        "    kids.append(pid)\nfor k in kids:\n    os.waitpid(k, 0)\nprint('fine', len(kids))\n"
    )
    bomb_limits = Limits(wall_time_s=3, memory_mb=128, max_processes=32)
    reqs = []
    for i in range(6):
        src = fork_bomb if i == 0 else mem_bomb if i == 1 else normal
        reqs.append(
            {
                "files": {"main.py": src},
                "command": [exe, "-s", "-B", "main.py", marker],
                "limits": bomb_limits if i < 2 else Limits(wall_time_s=20, memory_mb=128, max_processes=8),
            }
        )
    results = run_many(reqs, workers=6)
    assert results[0].status is RunStatus.TIMEOUT
    assert results[1].status is RunStatus.MEMORY_LIMIT
    assert [(r.status, r.stdout) for r in results[2:]] == [(RunStatus.OK, "fine 6\n")] * 4
    assert host_pids_with(marker) == []


def test_run_result_round_trips_through_json():
    r, _ = jailed("open('out.bin', 'wb').write(bytes(range(256)))\nprint('x')", collect=["out.bin"])
    again = RunResult.model_validate_json(r.model_dump_json())
    assert again == r and again.files["out.bin"] == bytes(range(256))


@destructive
def test_without_cgroups_rlimits_still_bound_memory_and_processes(monkeypatch):
    """Hosts where we cannot make cgroups: the result says so, and rlimits hold the line."""
    from groupscore.sandbox import harness
    from groupscore.sandbox.cgroups import CgroupSupport, SlotPool
    from groupscore.sandbox.classify import classify
    from groupscore.sandbox.nsjail_launcher import execute_nsjail
    from groupscore.sandbox.policy import build_policy

    none = CgroupSupport(None, False, False, {}, "test: no cgroups")
    monkeypatch.setattr(harness, "_POOL", SlotPool(none))
    tool = toolchain("python")
    limits = Limits(wall_time_s=4, memory_mb=128, max_processes=16)
    policy = build_policy(tool, limits, cgroups=none)
    assert policy.cgroup == "none: test: no cgroups" and policy.cgroup_memory_mb is None
    assert policy.rlimits.address_space_mb == 128 + 128

    def go(code: str):
        out, _, _ = execute_nsjail(
            policy, {"main.py": (PRELUDE + code).encode()}, [tool.executable, "main.py"], b"", []
        )
        return classify(out, limits)[0], out

    status, out = go("a = []\nwhile True: a.append(bytearray(8 << 20))")
    assert status is RunStatus.MEMORY_LIMIT and b"MemoryError" in out.stderr
    status, out = go(
        "n = 0\ntry:\n    while True:\n        if os.fork() == 0:\n            time.sleep(30); os._exit(0)\n"
        "        n += 1\nexcept OSError as e:\n    print(n, name(e))\n"
    )
    n, err = out.stdout.decode().split()
    assert status is RunStatus.OK and err == "EAGAIN" and int(n) < 16
    assert harness.cgroup_note() == "none: test: no cgroups"
