"""Red team of the warm Python path (sandbox/warm.py, warm_template.py): a program that runs in a fork of a started
interpreter, under a jail that a Python process built, attacks what that design adds to an nsjail run.

Two kinds of test. Attacks on the jail (another run's files, stdin or request; the jail's pid 1, B, which reports the
run; the template; the cgroup slot; the host): each pins that the attack is blocked. Verdict fidelity: the same
program through nsjail (GROUPSCORE_SANDBOX_WARM=0) and warm must get the same verdict, since a GRPO policy finds any
exit path that pays more on one of them. A test whose comment says "a hole the tests found, closed" failed on the
warm path as it was first written and names the hole and its fix; it stays as a regression test. One known
difference is an xfail (the thread count near RLIMIT_AS); git log holds when each hole closed. One file because each test is one attack and its proof, read together as the warm path's
red-team record.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import socket
import threading
import time

import pytest
from helpers import FIND_SECRET, READABLE_MEMORY, host_pids_with

from groupscore.sandbox import Limits, RunResult, RunStatus, run, warm, warm_launcher
from groupscore.sandbox import settings as sandbox_settings

pytestmark = [
    pytest.mark.usefixtures("jail_available"),
    pytest.mark.skipif(
        os.geteuid() != 0, reason="warm runs need root (a host id per run); unprivileged runs use nsjail"
    ),
]

LIMITS = Limits(wall_time_s=6, memory_mb=256, cpu_time_s=2)


@pytest.fixture(autouse=True)
def _warm_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GROUPSCORE_SANDBOX_WARM", raising=False)
    sandbox_settings.reload()
    probe = run({"main.py": "import sys\nprint('template' in ' '.join(sys.orig_argv))\n"}, limits=LIMITS)
    if probe.stdout != "True\n":  # a host where the template cannot be made (the runs go through nsjail): warm.note()
        pytest.skip(f"warm Python runs are not available here: {warm.note()}")


def _warm(program: str, **kw) -> RunResult:
    """A run that must have gone warm: the program's interpreter is the template's (its argv says so)."""
    kw.setdefault("limits", LIMITS)
    head = "import sys as _s\n_s.stderr.write(str('template' in ' '.join(_s.orig_argv)) + '|')\n_s.stderr.flush()\n"
    files = {"main.py": head + program}
    r = run({**files, **kw.pop("files", {})}, **kw)
    assert r.stderr.startswith("True|"), f"not a warm run: {r}"
    return r.model_copy(update={"stderr": r.stderr[len("True|") :]})


def _plain(through_nsjail, program: str, **kw) -> RunResult:
    kw.setdefault("limits", LIMITS)
    with through_nsjail:
        return run({"main.py": program, **kw.pop("files", {})}, **kw)


def _template_pids() -> list[int]:
    return sorted(t.proc.pid for t in warm._TEMPLATES.values() if t.alive())


def _seen(r: RunResult) -> tuple:
    return (r.status, r.exit_code, r.signal, r.stdout, r.files)


def _agree(through_nsjail, program: str, **kw) -> tuple[RunResult, RunResult]:
    hot = _warm(program, **dict(kw))
    cold = _plain(through_nsjail, program, **dict(kw))
    return hot, cold


# ---------------------------------------------------------------- confidentiality: other runs' files, stdin, requests


def test_no_earlier_request_left_in_the_inherited_memory() -> None:
    """Every run is a copy of the template's memory: an earlier run's request (its file names, its arguments) must not
    be in it. The scanner reads its own whole address space for the earlier run's argument, quoted as in the request's
    JSON, and for any run dir name but its own."""
    mark = secrets.token_hex(8)
    first = _warm("print('x')", args=[f"ARGV-{mark}"], stdin=f"STDIN-{mark}\n")
    assert first.status is RunStatus.OK
    # The scanner holds only digests of the marked strings: a hit is a copy of the earlier run's own bytes.
    argv_digest = hashlib.sha256(f'ARGV-{mark}"'.encode()).hexdigest()
    stdin_digest = hashlib.sha256(f"STDIN-{mark}\n".encode()).hexdigest()
    scan = (
        READABLE_MEMORY
        + f"""
import hashlib, re
own = re.search(r'groupscore-run-[a-z0-9_]{{8}}', open('/proc/self/mountinfo').read()).group()
hits, others = 0, set()
for chunk in readable_memory():
    for m in re.finditer(rb'(?s)(?:ARGV|STDIN)-[0-9a-f]{{16}}.', chunk):
        if hashlib.sha256(m.group()).hexdigest() in ('{argv_digest}', '{stdin_digest}'):
            hits += 1
    others |= {{m.decode() for m in re.findall(rb'groupscore-run-[a-z0-9_]{{8}}', chunk)}} - {{own}}
print(hits, sorted(others))
"""
    )
    r = _warm(scan)
    assert r.status is RunStatus.OK, r
    assert r.stdout == "0 []\n", r.stdout


def test_concurrent_runs_files_and_stdin_are_out_of_reach() -> None:
    """A receiver running beside a sender walks everything it can reach (the tree, /proc of its pid namespace, its
    fds' targets) and reads every file for the sender's secret (its input file, collected file and stdin)."""
    secret = secrets.token_hex(16)
    sender = (
        "import sys, time\n"
        "sys.stdin.read(1)\n"
        f"open('out.txt', 'w').write('{secret}')\n"
        "print('SENT', flush=True)\n"
        "time.sleep(2.5)\n"
    )
    box: dict[str, RunResult] = {}
    thread = threading.Thread(
        target=lambda: box.setdefault(
            "s",
            _warm(sender, files={"secret.txt": secret}, stdin=secret, collect=["out.txt"]),
        )
    )
    thread.start()
    time.sleep(0.6)
    receiver = (
        FIND_SECRET
        + f"""
found, seen = search(bytes.fromhex('{secret.encode().hex()[::-1]}'[::-1]))
print(found, seen > 0)
"""
    )
    r = _warm(receiver)
    thread.join(30)
    assert box["s"].status is RunStatus.OK and "SENT" in box["s"].stdout, box["s"]
    assert r.status is RunStatus.OK, r
    assert r.stdout == "[] True\n", r.stdout


def test_a_hidden_stdio_input_does_not_reach_a_public_tests_reason() -> None:
    """Through the code verifier (stdio tests run warm): the hidden test's run holds its input in its files and
    memory; the public test's run, beside it, harvests every file it can reach and its own memory for anything
    shaped like the secret and prints it, and a public test's failure reason quotes that output."""
    from groupscore.verifiers.code.item import CodeItem
    from groupscore.verifiers.code.verify import score_code

    secret = "HIN" + secrets.token_hex(6)
    program = """
import os, re, sys, time
data = sys.stdin.read().strip()
if data != 'pub':
    open('/work/held', 'w').write(data)
    time.sleep(2.0)
    sys.exit(0)
time.sleep(0.5)
found = set()
pat = re.compile(rb'HIN[0-9a-f]{12}')
for root, dirs, files in os.walk('/'):
    if root.startswith(('/usr', '/lib', '/bin', '/sbin')):
        dirs[:] = []
        continue
    for name in files:
        try:
            found |= set(pat.findall(open(os.path.join(root, name), 'rb').read(1 << 20)))
        except OSError:
            pass
mem = open('/proc/self/mem', 'rb', 0)
for line in open('/proc/self/maps'):
    start, end = (int(x, 16) for x in line.split()[0].split('-'))
    try:
        mem.seek(start)
        found |= set(pat.findall(mem.read(min(end - start, 1 << 26))))
    except (OSError, OverflowError):
        pass
print('WARM=' + str('template' in ' '.join(sys.orig_argv)), sorted(found))
"""
    item = CodeItem(
        completion=f"```python\n{program}```",
        time_limit_s=6.0,
        tests=[{"type": "stdio", "stdin": "pub", "stdout": "PUB"}],
        hidden_tests=[{"type": "stdio", "stdin": secret, "stdout": "whatever"}],
    )
    text = score_code(item).model_dump_json()
    assert "WARM=True" in text, text  # the public run went warm and its output is in the reason
    assert secret not in text and secret[3:] not in text


def test_the_spool_and_the_template_are_out_of_sight() -> None:
    """The template's /work is the spool of every run's files; each run's own tmpfs covers it. The program sees its
    own files alone in /work, no spool or template path in the tree, and cannot write anywhere but /work."""
    program = """
import os
wrote = []
for d in ['/', '/dev', '/proc', '/usr', '/usr/lib', '/spool', '/groupscore-warm']:
    try:
        with open(os.path.join(d, 'zz'), 'w') as fh:
            fh.write('x')
        wrote.append(d)
    except OSError:
        pass
print(sorted(os.listdir('/work')), wrote, sorted(os.listdir('/proc')))
names = [n for n in os.listdir('/') if 'warm' in n or 'spool' in n or 'groupscore' in n]
print(names, [n for n in os.listdir('/work') if n.startswith('.')])
"""
    r = _warm(program, files={"data.txt": "d"})
    assert r.status is RunStatus.OK, r
    assert r.stdout == "['data.txt', 'main.py'] [] ['1', '2', 'self', 'thread-self']\n[] []\n", r.stdout


# ---------------------------------------------------------------- integrity: B (the run's pid 1), the template, the host


def test_the_runs_pid_1_cannot_be_touched() -> None:
    """B is root in the template's user namespace and holds the report socket: no signal, ptrace or /proc file of it
    reaches the program, and after every attempt the run's own exit code is what is reported."""
    program = """
import ctypes, errno, os, signal
libc = ctypes.CDLL(None, use_errno=True)
got = []
for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGSTOP, signal.SIGUSR1, signal.SIGCHLD):
    try:
        os.kill(1, sig)
        got.append(('kill', int(sig)))
    except OSError:
        pass
for leaf in ('mem', 'environ', 'maps', 'stack', 'syscall', 'fd/0', 'fd/3', 'fd/4'):
    try:
        open('/proc/1/' + leaf, 'rb').read(1)
        got.append(leaf)
    except OSError:
        pass
for leaf in ('fd', 'root', 'cwd', 'map_files'):
    try:
        os.listdir('/proc/1/' + leaf)
        got.append(leaf)
    except OSError:
        pass
if libc.ptrace(16, 1, None, None) == 0:
    got.append('ptrace')
print(got)
raise SystemExit(5)
"""
    r = _warm(program)
    assert (r.status, r.exit_code, r.stdout) == (RunStatus.RUNTIME_ERROR, 5, "[]\n"), r


def test_the_program_cannot_pass_for_a_failed_setup() -> None:
    """A sandbox_error is masked as an infra error (no reward), which beats a 0 for a wrong answer. The program writes
    a setup-error report to every fd it may hold and prints one, then exits 127 (the setup's own exit code): its
    verdict stays a runtime error of its own."""
    program = """
import os, json
msg = json.dumps({'setup_error': 'OSError: mount /work'}).encode()
for fd in range(3, 1024):
    try:
        os.write(fd, msg)
    except OSError:
        pass
print(msg.decode())
os._exit(127)
"""
    r = _warm(program)
    assert r.status is RunStatus.RUNTIME_ERROR and r.exit_code == 127, r


def test_privileges_seccomp_and_network_are_an_nsjail_runs() -> None:
    program = """
import ctypes, errno, os, socket
libc = ctypes.CDLL(None, use_errno=True)
status = {k: v.strip() for k, v in (l.split(':', 1) for l in open('/proc/self/status'))}
print(status['CapEff'], status['CapPrm'], status['CapBnd'], status['CapAmb'], status['NoNewPrivs'], status['Seccomp'])
def err(rc):
    return errno.errorcode.get(ctypes.get_errno()) if rc < 0 else 'ran'
print(err(libc.unshare(0x10000000)), err(libc.mount(b'none', b'/work', b'tmpfs', 0, None)),
      err(libc.syscall(250, 0, 0, 0, 0, 0)), err(libc.umount2(b'/proc', 2)), err(libc.setns(0, 0)))
for call in (lambda: os.setuid(0), lambda: os.setgid(0), lambda: os.setgroups([0])):
    try:
        call()
        print('raised privilege')
    except OSError:
        pass
try:
    socket.create_connection(('1.1.1.1', 53), timeout=1)
    print('network')
except OSError:
    pass
print(socket.if_nameindex())
"""
    r = _warm(program)
    assert r.status is RunStatus.OK, r
    zero = "0000000000000000"
    assert r.stdout.splitlines() == [
        f"{zero} {zero} {zero} {zero} 1 2",
        "EPERM EPERM EPERM EPERM EPERM",  # unshare, mount, keyctl (250), umount, setns: the seccomp program
        "[(1, 'lo')]",
    ], r.stdout


def test_seccomp_answers_as_in_an_nsjail_run(through_nsjail) -> None:
    """The warm run installs the program read back from an nsjail jail: every rule answers the same (errno rules,
    no-op locks, a blocked vsock, no inotify/statfs/pidfd, the i386 ABI killed), and /dev is the same."""
    program = """
import ctypes, errno, fcntl, os, socket, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
def err(rc):
    return errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno()) if rc < 0 else rc
out = [err(libc.syscall(253)), err(libc.syscall(137, b'/work', ctypes.create_string_buffer(256))),
       err(libc.syscall(434, os.getpid(), 0)), err(libc.syscall(425, 8, None)), err(libc.syscall(101, 16, 1, 0, 0)),
       err(libc.syscall(321, 0, 0, 0)), err(libc.syscall(310, 1, 0, 0, 0, 0, 0)), err(libc.syscall(323, 0))]
try:
    socket.socket(40, socket.SOCK_STREAM)
except OSError as e:
    out.append(errno.errorcode[e.errno])
fh = open('/dev/null')
out.append(fcntl.flock(fh, fcntl.LOCK_EX))
out.append(sorted(os.listdir('/dev')))
code = "import ctypes, mmap\\nb = mmap.mmap(-1, 4096, prot=7)\\nb.write(bytes([0xb8, 20, 0, 0, 0, 0xcd, 0x80, 0xc3]))\\n"
code += "ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(b)))()\\n"
out.append(subprocess.run([sys.executable, '-c', code]).returncode)
print(out)
"""
    hot, cold = _agree(through_nsjail, program)
    assert cold.status is RunStatus.OK, cold
    assert _seen(hot) == _seen(cold)
    assert hot.stdout.startswith("['ENOSYS', 'ENOSYS', 'ENOSYS', 'EPERM'"), hot.stdout
    assert hot.stdout.rstrip().endswith("-31]"), hot.stdout  # the i386 syscall: killed by SIGSYS


def test_no_process_outlives_its_run() -> None:
    """A daemon (new session, double fork, exec of a fresh interpreter with a marker) dies with the run."""
    marker = f"warm-redteam-{secrets.token_hex(6)}"
    program = f"""
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(30)', '{marker}'])
    os._exit(0)
time.sleep(0.5)
print('parent done')
"""
    r = _warm(program)
    assert r.status is RunStatus.OK and r.stdout == "parent done\n", r
    time.sleep(0.3)
    assert host_pids_with(marker) == []


def test_hostile_runs_leave_the_template_serving() -> None:
    """Kill everything in sight, exhaust fds and processes, abort, stop itself: the template that served the first run
    serves the next, unchanged (a template that dies sends later runs through a fresh start, a denial of service)."""
    assert _warm("print(1)").stdout == "1\n"
    before = _template_pids()
    assert before
    hostile = [
        "import os, signal\nfor s in (9, 15, 19):\n    try:\n        os.kill(-1, s)\n    except OSError:\n        pass\n",
        "import os\nfs = []\ntry:\n    while True:\n        fs.append(os.open('/dev/null', 0))\nexcept OSError:\n    pass\n"
        "import time\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        time.sleep(0.2)\n        break\n",
        "import os\nos.abort()\n",
        "import os, signal\nos.kill(os.getpid(), signal.SIGSTOP)\n",
        "import os\nos.setsid()\nos.killpg(0, 9)\n",
    ]
    for program in hostile:
        r = _warm(program, limits=Limits(wall_time_s=2, memory_mb=128))
        assert r.status is not RunStatus.SANDBOX_ERROR, (program, r)
    assert _template_pids() == before
    assert _warm("print(2)").stdout == "2\n"


def test_a_slow_start_does_not_kill_the_runs_in_flight(monkeypatch: pytest.MonkeyPatch) -> None:
    # A hole the tests found, closed (robustness; a masked infra error for every run in flight): when one run's init does not say ready within
    # _READY_TIMEOUT_S (10 s: a loaded host, or every warm run's threads sharing the template's one session and so
    # one autogroup), warm.py closes the template, which kills its pid namespace and with it every other run in
    # flight: each ends as sandbox_error ("the jail's init ended without a report"), masked instead of scored. Here
    # the wait for one run's ready times out while another is in flight. Fix: retire the template (no new runs, a
    # fresh one started) and close it when its last run has returned, instead of killing it at once.
    box: dict[str, RunResult] = {}
    thread = threading.Thread(
        target=lambda: box.setdefault("r", _warm("import time\ntime.sleep(1.5)\nprint('done')\n"))
    )
    thread.start()
    time.sleep(0.7)

    class LateReady(socket.socket):
        def recvmsg(self, *args: object) -> tuple:  # the ready wait times out, whenever B's ready comes
            raise TimeoutError("timed out")

    real_socketpair = socket.socketpair

    def socketpair(*args: object) -> tuple[socket.socket, socket.socket]:
        host, jail = real_socketpair(*args)  # type: ignore[arg-type]
        return LateReady(host.family, host.type, host.proto, host.detach()), jail

    # Only this run's host socket: a tiny _READY_TIMEOUT_S raced B's ready, which a fast host had already queued.
    monkeypatch.setattr(warm_launcher.socket, "socketpair", socketpair)
    try:
        slow = run({"main.py": "import sys\nprint('/work/.template.py' in sys.orig_argv)\n"}, limits=LIMITS)
    finally:
        monkeypatch.setattr(warm_launcher.socket, "socketpair", real_socketpair)
    thread.join(30)
    # The run that timed out never started (no go was sent): it ran through nsjail instead.
    assert (slow.status, slow.stdout) == (RunStatus.OK, "False\n"), slow
    assert box["r"].status is RunStatus.OK and box["r"].stdout == "done\n", box["r"]


def test_limits_do_not_multiply_templates() -> None:
    # A hole the tests found, closed (host resources; a caller of run() or of the service picks the limits): template_for keys templates on
    # policy.mounts, which hold the work tmpfs's size (limits.tmpfs_mb), though a template never mounts it (the run's
    # request carries it): every distinct tmpfs_mb starts one more template (an nsjail, an interpreter, a host id),
    # and none is ever closed before the process exits. Fix: key on the mounts without the work dir's tmpfs.
    _warm("print(1)")
    before = len(_template_pids())
    for size in (61, 62, 63):
        assert _warm("print(1)", limits=Limits(wall_time_s=6, tmpfs_mb=size)).status is RunStatus.OK
    assert len(_template_pids()) == before


def test_the_slot_limits_hold() -> None:
    """Memory and processes are the run's slot's: a fork bomb stops at the process limit, memory at the cgroup."""
    bomb = (
        "import os, time\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n            time.sleep(3)\n"
        "            os._exit(0)\n        n += 1\nexcept OSError:\n    print(n)\n"
    )
    limits = Limits(wall_time_s=4, memory_mb=128, max_processes=16)
    r = _warm(bomb, limits=limits)
    assert r.status is RunStatus.OK and int(r.stdout) <= 16, r
    hog = _warm("x = bytearray(400 << 20)\nx[::4096] = b'1' * len(x[::4096])\n", limits=limits)
    assert hog.status is RunStatus.MEMORY_LIMIT, hog
    tmpfs = _warm(
        "for i in range(20):\n    open(f'/work/f{i}', 'wb').write(b'1' * (15 << 20))\n",
        limits=Limits(wall_time_s=4, memory_mb=64, tmpfs_mb=512),
    )
    assert tmpfs.status is RunStatus.MEMORY_LIMIT, tmpfs  # tmpfs pages are the run's too, B's death no infra error


def test_time_limits_hold() -> None:
    spin = _warm("while True:\n    pass\n", limits=Limits(wall_time_s=6, cpu_time_s=1))
    assert spin.status is RunStatus.TIMEOUT and spin.cpu_time_s < 2.5, spin
    start = time.monotonic()
    hang = _warm(
        "import signal, time\nfor s in (1, 2, 15):\n    signal.signal(s, signal.SIG_IGN)\ntime.sleep(60)\n",
        limits=Limits(wall_time_s=1),
    )
    assert hang.status is RunStatus.TIMEOUT and time.monotonic() - start < 5, hang


def test_output_flood_is_an_output_limit() -> None:
    r = _warm("import os\nwhile True:\n    os.write(1, b'y' * 65536)\n", limits=Limits(wall_time_s=4))
    assert r.status is RunStatus.OUTPUT_LIMIT, r


def _beside(sender: str, receiver: str, hold_s: float = 0.5) -> tuple[RunResult, RunResult]:
    """Run receiver and sender at the same time (the receiver first); both must end OK."""
    box: dict[str, RunResult] = {}
    thread = threading.Thread(target=lambda: box.setdefault("r", _warm(receiver)))
    thread.start()
    time.sleep(hold_s)
    sent = _warm(sender)
    thread.join(30)
    got = box["r"]
    assert sent.status is RunStatus.OK and got.status is RunStatus.OK, (sent, got)
    return sent, got


def test_signals_to_the_process_group_reach_no_other_run() -> None:
    # A hole the tests found, closed (covert channel, cross-run interference): nothing in the warm path calls setsid, so every run's processes
    # share the template's session and process group (getsid() and getpgrp() read 0 in the run: the leader is
    # outside its pid namespace). kill(0, SIGCONT) goes to the whole process group across pid namespaces, and SIGCONT
    # needs no uid match within a session: a run's SIGCONT handler counts another run's signals (200 of 200), and a
    # run stopped by SIGSTOP is resumed by its neighbour. Through nsjail each jail is a session of its own. Fix: B
    # calls os.setsid() first thing (pid 1 leads the run's session and group, as nsjail's init does; C stays in it).
    receiver = """
import signal, time
got = [0]
signal.signal(signal.SIGCONT, lambda *a: got.__setitem__(0, got[0] + 1))
end = time.monotonic() + 2.0
while time.monotonic() < end:
    time.sleep(0.01)
print(got[0])
"""
    sender = """
import os, signal, time
for _ in range(100):
    os.kill(0, signal.SIGCONT)
    time.sleep(0.005)
print('sent')
"""
    _, got = _beside(sender, receiver)
    assert got.stdout == "0\n", got.stdout


def test_a_run_cannot_resume_another_runs_stopped_process() -> None:
    # A hole the tests found, closed (cross-run verdict change, same cause as above): a run that stops itself times out through nsjail; beside
    # a warm run that sends SIGCONT to its process group it is resumed and ends OK.
    victim = "import os, signal\nos.kill(os.getpid(), signal.SIGSTOP)\nprint('resumed')\n"
    box: dict[str, RunResult] = {}
    thread = threading.Thread(target=lambda: box.setdefault("v", _warm(victim, limits=Limits(wall_time_s=3))))
    thread.start()
    time.sleep(0.5)
    attacker = _warm(
        "import os, signal, time\nfor _ in range(150):\n    os.kill(0, signal.SIGCONT)\n    time.sleep(0.01)\n"
    )
    thread.join(30)
    assert attacker.status is RunStatus.OK, attacker
    assert box["v"].status is RunStatus.TIMEOUT and box["v"].stdout == "", box["v"]


def test_io_priority_of_the_process_group_carries_nothing() -> None:
    # A hole the tests found, closed (covert channel, same cause): ioprio_get(IOPRIO_WHO_PGRP, 0) returns the best I/O priority of every process
    # in the caller's process group, with no uid check; a sender that sets its own (best-effort level 0, allowed
    # unprivileged) is read by a receiver in another run (16388 alone, 16384 beside the sender). Fix: setsid in B.
    receiver = """
import ctypes, time
libc = ctypes.CDLL(None, use_errno=True)
seen = set()
end = time.monotonic() + 2.0
while time.monotonic() < end:
    seen.add(libc.syscall(252, 2, 0))  # ioprio_get(IOPRIO_WHO_PGRP, 0)
    time.sleep(0.01)
print(16384 in seen)
"""
    sender = """
import ctypes, time
libc = ctypes.CDLL(None, use_errno=True)
assert libc.syscall(251, 1, 0, (2 << 13) | 0) == 0  # ioprio_set(IOPRIO_WHO_PROCESS, self, best-effort level 0)
time.sleep(1.5)
"""
    _, got = _beside(sender, receiver, hold_s=0.3)
    assert got.stdout == "False\n", got.stdout


def test_each_run_is_a_session_of_its_own(through_nsjail) -> None:
    # A hole the tests found, closed (CPU fairness, same cause): with kernel.sched_autogroup_enabled=1 the scheduler shares CPU between
    # sessions first (docs/sandbox/covert-channels.md: each nsjail gets its own autogroup); warm runs all sit in the template's session, so
    # one run's 32 spinning threads take 32 shares of every other warm run's one. Through nsjail: getsid() == getpgrp()
    # == 1 and a new autogroup per run. Fix: setsid in B.
    program = "import os\nprint(os.getsid(0), os.getpgrp())\nprint(open('/proc/self/autogroup').read().split()[0])\n"
    first, second = _warm(program), _warm(program)
    cold = _plain(through_nsjail, program)
    assert cold.stdout.splitlines()[0] == "1 1"
    assert first.stdout.splitlines()[0] == "1 1", first.stdout
    assert first.stdout.splitlines()[1] != second.stdout.splitlines()[1]


# ---------------------------------------------------------------- verdicts: warm and nsjail must agree


def test_sys_exit_of_a_huge_int(through_nsjail) -> None:
    # A hole the tests found, closed (verdict, pays): the interpreter exits with (int)PyLong_AsLong(code), so sys.exit(2**64) overflows to -1
    # and exits 255 (runtime_error); the template takes code & 0xFF = 0 and reports OK. Fix in _exit_code: use
    # int.__index__(code) (no subclass hooks), -1 when it does not fit a C long, then & 0xFF.
    hot, cold = _agree(through_nsjail, "import sys\nsys.exit(2 ** 64)\n")
    assert cold.status is RunStatus.RUNTIME_ERROR
    assert _seen(hot) == _seen(cold)


def test_sys_exit_of_an_int_subclass(through_nsjail) -> None:
    # A hole the tests found, closed (verdict, pays): `code & 0xFF` calls the program's own __and__, which returns 0 for an exit of 3; the
    # interpreter reads the int's value. Fix: int.__and__(code, 0xFF) / int.__index__, never the subclass's operator.
    program = "import sys\nclass Code(int):\n    def __and__(self, other):\n        return 0\nsys.exit(Code(3))\n"
    hot, cold = _agree(through_nsjail, program)
    assert (cold.status, cold.exit_code) == (RunStatus.RUNTIME_ERROR, 3)
    assert _seen(hot) == _seen(cold)


def test_exit_status_above_128(through_nsjail) -> None:
    """sys.exit(152) is an exit, not SIGXCPU: warm reports it as such (nsjail's init shell folds 128+N into a signal
    and calls it a CPU timeout; recorded here, not the warm path's to fix)."""
    hot = _warm("import sys\nsys.exit(152)\n")
    assert (hot.status, hot.exit_code, hot.signal) == (RunStatus.RUNTIME_ERROR, 152, None), hot


def test_closed_stdout_at_exit(through_nsjail) -> None:
    # A hole the tests found, closed (verdict, honest programs lose): the interpreter skips a closed sys.stdout at exit (file_is_closed) and
    # exits 0; the template flushes it anyway, gets ValueError and exits 120. Fix in _finalize: skip None, a stream
    # without flush, and one whose .closed is true, as flush_std_files does; 120 also when stderr's flush fails.
    hot, cold = _agree(through_nsjail, "import sys\nprint('hi')\nsys.stdout.close()\n")
    assert (cold.status, cold.stdout) == (RunStatus.OK, "hi\n")
    assert _seen(hot) == _seen(cold)


def test_stdout_set_to_none(through_nsjail) -> None:
    # A hole the tests found, closed (verdict): `sys.stdout = None` at the end: the interpreter exits 0 and its sys.__stdout__ is flushed when
    # finalised ('hi' arrives); the template exits 120 and loses the buffered 'hi'. Fix: as above, and flush
    # sys.__stdout__/sys.__stderr__ too (the interpreter's finalisation does).
    hot, cold = _agree(through_nsjail, "import sys\nprint('hi')\nsys.stdout = None\n")
    assert (cold.status, cold.stdout) == (RunStatus.OK, "hi\n")
    assert _seen(hot) == _seen(cold)


def test_stdout_deleted(through_nsjail) -> None:
    # A hole the tests found, closed (verdict): `del sys.stdout`: the interpreter exits 0; _finalize's (sys.stdout, sys.stderr) raises
    # AttributeError outside its try, so the run exits 1. Fix: getattr(sys, name, None).
    hot, cold = _agree(through_nsjail, "import sys\nprint('hi', flush=True)\ndel sys.stdout\n")
    assert cold.status is RunStatus.OK
    assert _seen(hot) == _seen(cold)


def test_finalizers_run_at_exit(through_nsjail) -> None:
    # A hole the tests found, closed (verdict, honest programs lose output): the interpreter's shutdown clears the modules' globals, so
    # __del__ methods run (and may print); the template ends with os._exit after atexit and loses that output. Fix:
    # after atexit, clear __main__'s dict and gc.collect() (what finalize_modules does first), then flush.
    program = "class Bye:\n    def __del__(self):\n        print('bye')\n\nkeep = Bye()\nprint('hi')\n"
    hot, cold = _agree(through_nsjail, program)
    assert cold.stdout == "hi\nbye\n"
    assert _seen(hot) == _seen(cold)


def test_unclosed_collected_file_is_flushed(through_nsjail) -> None:
    # A hole the tests found, closed (verdict, honest programs lose results): a file written and never closed is flushed when the interpreter
    # finalises its module globals; in the template the buffered data is lost with os._exit, so the collected file is
    # empty. Fix: the same finalisation as above (clear __main__, collect) before os._exit.
    program = "out = open('out.txt', 'w')\nout.write('answer 42')\nprint('done')\n"
    hot, cold = _agree(through_nsjail, program, collect=["out.txt"])
    assert cold.files == {"out.txt": b"answer 42"}
    assert _seen(hot) == _seen(cold)


def test_recursion_depth_is_the_interpreters(through_nsjail) -> None:
    # A hole the tests found, closed (verdict): the program's module ran 7 frames below the template's top level (serve, _fork_run,
    # _jail_init, _program, _run_program, the template's <module>), 2 after the module-level rewrite (the template's
    # <module> and exec): it reaches fewer levels before RecursionError, so a recursion of depth 992..998 passes
    # through nsjail and fails warm. Fix: raise the limit by the offset and have sys.get/setrecursionlimit hide it.
    program = (
        "import sys\ndef depth(n):\n    try:\n        return depth(n + 1)\n    except RecursionError:\n"
        "        return n\nprint(depth(0), sys.getrecursionlimit())\n"
    )
    hot, cold = _agree(through_nsjail, program)
    assert _seen(hot) == _seen(cold)


def test_standard_streams_are_the_runs(through_nsjail) -> None:
    # A hole the tests found, closed (minor, observable): sys.stdin/stdout/stderr were made when the template's fds were /dev/null, so they keep
    # /dev/null's cached seekable() (True for the run's pipe) and tell() fails with ESPIPE instead of
    # UnsupportedOperation. Fix: rebuild the three streams after dup2 as the interpreter's create_stdio does.
    program = (
        "import sys\nprint(sys.stdout.seekable(), sys.stderr.seekable())\ntry:\n    sys.stdout.tell()\n"
        "except Exception as e:\n    print(type(e).__name__)\n"
    )
    hot, cold = _agree(through_nsjail, program)
    assert _seen(hot) == _seen(cold)


def test_process_limit_is_the_same(through_nsjail) -> None:
    # A hole the tests found, closed (minor, limit): through nsjail the init shell runs as the run's uid and counts in RLIMIT_NPROC (and the
    # slot); warm, B is the template's root, so the program gets more processes than through nsjail (32 against 30
    # with the defaults). Fixed by giving the warm run's slot one task for its init (nsjail's takes three), RLIMIT_NPROC unchanged.
    bomb = (
        "import os, time\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n            time.sleep(3)\n"
        "            os._exit(0)\n        n += 1\nexcept OSError:\n    print(n)\n"
    )
    hot, cold = _agree(through_nsjail, bomb, limits=Limits(wall_time_s=5, memory_mb=256))
    assert _seen(hot) == _seen(cold)


def test_output_left_in_a_writer_on_fd_1(through_nsjail) -> None:
    # A hole the tests found, closed (verdict, honest stdio programs fail): a fast-output idiom writes to its own file object on fd 1 and never
    # closes it; the interpreter flushes it when it finalises the module's globals, the template's os._exit loses it:
    # through nsjail the answer arrives, warm the stdout is empty (a wrong answer). Fix: as for __del__ above.
    program = "import os\nout = os.fdopen(1, 'w')\nout.write('42\\n')\n"
    hot, cold = _agree(through_nsjail, program)
    assert cold.stdout == "42\n"
    assert _seen(hot) == _seen(cold)


def test_excepthook_that_exits(through_nsjail) -> None:
    # A hole the tests found, closed (verdict): an excepthook that raises SystemExit: the interpreter honours it (handle_system_exit in
    # PyErr_PrintEx: exit 0, OK), the template's _program lets it escape and exits with its preset 1, without atexit
    # or a flush of stdout. Fix: in _run_program, catch SystemExit raised by the hook and treat it as the exit.
    program = "import sys\nprint('answer')\nsys.excepthook = lambda *a: sys.exit(0)\nraise ValueError\n"
    hot, cold = _agree(through_nsjail, program)
    assert (cold.status, cold.stdout) == (RunStatus.OK, "answer\n")
    assert _seen(hot) == _seen(cold)


def test_directories_of_input_files_are_the_runs(through_nsjail) -> None:
    # A hole the tests found, closed (verdict, honest programs fail): B makes the directories of input and collected files (data/, out/) as the
    # template's root after chowning /work, so the program cannot create a file beside its inputs (EACCES); through
    # nsjail those directories are the run's uid's. Fix: chown each directory makedirs creates to the run's uid/gid.
    program = "open('data/new.txt', 'w').write('x')\nopen('out/more.txt', 'w').write('y')\nprint('ok')\n"
    kw = {"files": {"data/in.txt": "1"}, "collect": ["out/r.txt"]}
    hot, cold = _agree(through_nsjail, program, **kw)
    assert (cold.status, cold.stdout) == (RunStatus.OK, "ok\n")
    assert _seen(hot) == _seen(cold)


def test_undecodable_stdin(through_nsjail) -> None:
    """Standard streams the template makes for the run must decode as the interpreter's do (PYTHONIOENCODING=utf-8:
    strict, a crash on bytes that are not UTF-8), so a stdio test with such input gets the same verdict both ways."""
    program = (
        "import sys\nprint(sys.stdin.errors, sys.stdout.errors, sys.stderr.errors, flush=True)\nprint(len(input()))\n"
    )
    hot, cold = _agree(through_nsjail, program, stdin=b"\xff\xfeab\n")
    assert _seen(hot) == _seen(cold)


def test_recursion_depth_in_a_thread(through_nsjail) -> None:
    # A hole the tests found, closed (verdict, minor; from the fix for the test above): a thread starts at depth 0, so the limit
    # raised by the template's 2 frames gives every thread 2 more levels than through nsjail (997 against 995). Fix:
    # have new threads spend the offset too (wrap _thread.start_new_thread so the target runs `offset` frames deep).
    program = (
        "import sys, threading\ndef depth(n):\n    try:\n        return depth(n + 1)\n    except RecursionError:\n"
        "        return n\nbox = []\nt = threading.Thread(target=lambda: box.append(depth(0)))\nt.start()\nt.join()\n"
        "print(box, sys.getrecursionlimit())\n"
    )
    hot, cold = _agree(through_nsjail, program)
    assert _seen(hot) == _seen(cold)


def test_stdout_buffer_size_is_the_interpreters(through_nsjail) -> None:
    # A hole the tests found, closed (verdict, honest programs lose output): the interpreter sizes its standard streams' buffers from the fd's
    # st_blksize (4096 for a pipe); the template's new streams take io's default 8192. An answer of 4097..8192 bytes
    # written to sys.stdout.buffer before os._exit(0) (a fast-output idiom) arrives through nsjail (it passed the
    # buffer and was written at once) and is lost warm. Fix: io.open(fd, mode, buffering=-1, closefd=False) or
    # buffer_size=os.fstat(fd).st_blksize in _standard_streams.
    program = "import os, sys\nsys.stdout.buffer.write(b'1\\n' * 3000)\nos._exit(0)\n"
    hot, cold = _agree(through_nsjail, program)
    assert len(cold.stdout) == 6000
    assert _seen(hot) == _seen(cold)


@pytest.mark.xfail(
    strict=False,  # nsjail's own count varies between runs (14 or 22 threads seen), so it may match now and then
    reason="known difference, in docs/sandbox/warm.md and docs/limits.md: near the address-space limit a warm run starts more "
    "threads than a fresh interpreter usually does (its threads reserve no new malloc arena); more lenient, never a "
    "pass for a wrong answer",
)
def test_thread_count_under_the_address_space_limit(through_nsjail) -> None:
    # A known difference (verdict, minor; the xfail below): each new thread costs its stack (8 MiB) and, while glibc makes new malloc arenas, a
    # 64 MiB arena reservation, all under RLIMIT_AS (memory_mb * 2 + 512). Through nsjail a fresh interpreter gets 14
    # threads at memory_mb=256 before "can't start new thread"; warm, the forked interpreter stops making arenas
    # sooner and gets 21, so a program with 15-20 threads fails through nsjail and passes warm. Fix: find which
    # malloc state the fork carries (arena count) and reset it, or make the limit count the same (M_ARENA_MAX).
    program = (
        "import threading, time\nn = 0\ntry:\n    while n < 40:\n"
        "        threading.Thread(target=time.sleep, args=(2,), daemon=True).start()\n        n += 1\n"
        "except RuntimeError:\n    pass\nprint(n)\n"
    )
    hot, cold = _agree(through_nsjail, program, limits=Limits(wall_time_s=6, memory_mb=256))
    assert _seen(hot) == _seen(cold)


def test_a_flush_that_raises_system_exit(through_nsjail) -> None:
    """The interpreter's exit flush treats any exception from sys.stdout.flush (SystemExit too) as unraisable and
    exits 120; an exit path that lets a SystemExit(0) from the program's own flush through would turn a crash into
    OK."""
    program = (
        "import sys\nclass Out:\n    def write(self, s):\n        return sys.__stdout__.write(s)\n"
        "    def flush(self):\n        raise SystemExit(0)\nsys.stdout = Out()\nprint('answer')\nraise ValueError\n"
    )
    hot, cold = _agree(through_nsjail, program)
    assert cold.status is RunStatus.RUNTIME_ERROR, cold
    assert _seen(hot) == _seen(cold)


def test_a_writer_held_by_the_uncaught_exception(through_nsjail) -> None:
    """A file the failing frame was writing is freed (and flushed) once the interpreter has printed the traceback."""
    program = "def main():\n    out = open('out.txt', 'w')\n    out.write('partial')\n    raise ValueError\nmain()\n"
    hot, cold = _agree(through_nsjail, program, collect=["out.txt"])
    assert _seen(hot) == _seen(cold)


def test_a_writer_kept_in_another_module(through_nsjail) -> None:
    # A hole the tests found, closed (verdict, minor; in the template's manual exit): module teardown clears every
    # module, not only __main__, so a writer the program parked in another module's namespace (or in a module of its
    # own that it imported) is flushed at exit through nsjail and lost warm. Fix: at exit also clear the dicts of the
    # modules the run imported, and drop the names the run added to the template's preloaded modules (a snapshot of
    # their names taken at template start), then gc.collect().
    program = "import json\njson.keep = open('out.txt', 'w')\njson.keep.write('42')\nprint('done')\n"
    hot, cold = _agree(through_nsjail, program, collect=["out.txt"])
    assert _seen(hot) == _seen(cold)
