"""Warm Python runs (sandbox/warm.py): the same jail and the same verdicts as a run through nsjail, faster.

Each scenario runs twice, warm and through nsjail (GROUPSCORE_SANDBOX_WARM=0), and the two results must agree on what
a verifier reads (status, exit code, signal, stdout, stderr, collected files). The rest pins the mechanics: the warm
path is taken, a run is pid 2 of a pid namespace of its own as a host uid of its own, concurrent runs see only their
own files, a dead template is replaced, and a template that cannot start sends runs through nsjail.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from helpers import host_pids_with, seen_by_a_verifier, warm_then_nsjail

from groupscore.sandbox import Limits, RunResult, RunStatus, harness, run, warm
from groupscore.sandbox.nsjail_launcher import execute_nsjail
from groupscore.sandbox.toolchains import toolchain

pytestmark = [
    pytest.mark.usefixtures("jail_available"),
    pytest.mark.skipif(
        os.geteuid() != 0, reason="warm runs need root (a host id per run); unprivileged runs use nsjail"
    ),
]

LIMITS = Limits(wall_time_s=8, memory_mb=256, cpu_time_s=2)


def _both(through_nsjail, program: str, **kw) -> tuple[RunResult, RunResult]:
    kw.setdefault("limits", LIMITS)
    files = {"main.py": program, **kw.pop("files", {})}
    return warm_then_nsjail(lambda: run(files, **kw), through_nsjail)


SCENARIOS = {
    "ok": "import sys\nn = int(sys.stdin.readline())\nprint(sum(i * i for i in range(n)))\n",
    "exit_code": "import sys\nprint('x')\nsys.exit(3)\n",
    "exit_message": "raise SystemExit('bad input')\n",
    "exit_none": "raise SystemExit(None)\n",
    "os_exit": "import os\nprint('lost', end='')\nos._exit(7)\n",
    "uncaught": "def f(x):\n    return 1 / x\n\nprint('before')\nf(0)\n",
    "syntax_error": "print('a'\nx = = 2\n",
    "keyboard_interrupt": "raise KeyboardInterrupt\n",
    "atexit_and_thread": (
        "import atexit, threading, time\n"
        "atexit.register(lambda: print('atexit ran'))\n"
        "threading.Thread(target=lambda: (time.sleep(0.2), print('thread done'))).start()\n"
        "print('main done')\n"
    ),
    "closed_stdout": "import os, sys\nprint('x' * 10)\nos.close(1)\n",
    "excepthook": (
        "import sys\nsys.excepthook = lambda t, v, tb: print('hooked', t.__name__, file=sys.stderr)\nraise ValueError(1)\n"
    ),
    "signal_self": "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n",
    "recursion": "import sys\nsys.setrecursionlimit(10**6)\ndef f(n):\n    return 0 if n == 0 else 1 + f(n - 1)\nprint(f(50000))\n",
    "file_and_globals": (
        "import sys, os\n"
        "print(sys.argv, sys.path[0], __file__, __name__, __package__, __spec__, type(__loader__).__name__)\n"
        "print(sorted(globals()))\n"
        "print(sys.flags)\n"
        "print(sys.stdin, sys.stdout.line_buffering, sys.stderr.line_buffering, sys.stdout.errors, sys.stderr.errors)\n"
        "print(os.getcwd(), sorted(os.listdir('/work')), oct(os.stat('/work').st_mode), os.umask(0o22))\n"
        "print(sorted(os.environ.items()))\n"
        "import resource\n"
        "print([resource.getrlimit(getattr(resource, n)) for n in "
        "('RLIMIT_AS','RLIMIT_CPU','RLIMIT_FSIZE','RLIMIT_NOFILE','RLIMIT_NPROC','RLIMIT_CORE','RLIMIT_STACK')])\n"
        "print([l for l in open('/proc/self/status') if l.startswith(('Cap', 'NoNewPrivs', 'Seccomp:'))])\n"
        "print(os.uname().nodename, os.getpid(), os.getppid(), sorted(os.listdir('/proc')))\n"
        "import signal\n"
        "print([signal.getsignal(s) for s in (signal.SIGPIPE, signal.SIGINT, signal.SIGXFSZ, signal.SIGCHLD)])\n"
        "print(sorted(os.listdir('/')))\n"
        "print(open('data.txt').read(), os.access('data.txt', os.W_OK))\n"
    ),
    "collect": "open('out.txt', 'w').write('result 42')\nprint(open('out.txt').read())\n",
    "write_input": "open('data.txt', 'w').write('changed')\n",
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_warm_and_nsjail_runs_agree(name: str, through_nsjail) -> None:
    kw: dict = {"stdin": "1000\n", "files": {"data.txt": "hello"}, "args": ["arg1"]}
    if name == "collect":
        kw["collect"] = ["out.txt"]
    warm_result, plain_result = _both(through_nsjail, SCENARIOS[name], **kw)
    assert seen_by_a_verifier(warm_result) == seen_by_a_verifier(plain_result)


@pytest.mark.parametrize(
    "program,status",
    [
        ("while True:\n    pass\n", RunStatus.TIMEOUT),  # the CPU limit (SIGXCPU)
        ("import time\ntime.sleep(30)\n", RunStatus.TIMEOUT),  # the wall clock
        ("x = bytearray(600 << 20)\nprint(len(x))\n", RunStatus.MEMORY_LIMIT),
        ("import sys\nwhile True:\n    sys.stdout.write('y' * 65536)\n", RunStatus.OUTPUT_LIMIT),
        ("open('/work/big', 'wb').write(b'0' * (40 << 20))\n", RunStatus.RUNTIME_ERROR),  # the file size limit
        ("import os\nwhile True:\n    os.fork()\n", None),  # the pids limit: whatever nsjail's run says
    ],
)
def test_limits_give_the_same_status(program: str, status: RunStatus | None, through_nsjail) -> None:
    limits = Limits(wall_time_s=3, memory_mb=256, cpu_time_s=1, max_file_bytes=1 << 20)
    warm_result, plain_result = _both(through_nsjail, program, limits=limits)
    if status is not None:
        assert plain_result.status is status, plain_result
    assert warm_result.status is plain_result.status, (warm_result, plain_result)
    assert warm_result.signal == plain_result.signal


def test_runs_take_the_warm_path(no_nsjail) -> None:
    r = run({"main.py": "print(input()[::-1])"}, stdin="olleh", limits=LIMITS)
    assert (r.status, r.stdout) == (RunStatus.OK, "hello\n")
    assert warm.note().startswith("on")


def test_explicit_script_commands_run_warm_and_other_commands_through_nsjail(monkeypatch, through_nsjail) -> None:
    exe = toolchain("python").executable
    probe = "import sys, builtins\nprint(hasattr(builtins, 'exit'), '/work/.template.py' in sys.orig_argv, sys.argv)\n"
    for flag, has_site in (("-s", True), ("-S", False)):
        argv = [exe, flag, "-B", "p.py", "x"]
        got = warm_then_nsjail(lambda: run({"p.py": probe}, argv, limits=LIMITS), through_nsjail)  # noqa: B023
        assert [r.stdout for r in got] == [f"{has_site} {is_warm} ['p.py', 'x']\n" for is_warm in (True, False)]
    # Not of the form `python -s|-S -B script`: the template could not run it as the interpreter would.
    monkeypatch.setattr(warm, "template_for", lambda *a, **k: pytest.fail("a template for a non-script command"))
    for argv in ([exe, "-c", probe], [exe, "-I", "p.py"], [exe, "-S", "-B", "-c", probe], [exe, "-S", "-B", "nope.py"]):
        r = run({"p.py": probe}, argv, limits=LIMITS)
        assert "True True" not in r.stdout and r.status is not RunStatus.SANDBOX_ERROR, (argv, r)


def test_a_warm_run_is_pid_2_of_its_own_namespace_as_a_host_uid_of_its_own(no_nsjail) -> None:
    marker = f"warm-probe-{os.getpid()}-{time.monotonic_ns()}"
    code = (
        "import os, time, sys\n"
        "sys.argv[0] = sys.argv[1]\n"  # not seen by the host: cmdline is the template's
        f"open('/work/mark', 'w').write('{marker}')\n"
        "print(os.getpid(), os.getuid(), sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))\n"
        "time.sleep(1.5)\n"
    )
    box: dict[str, RunResult] = {}
    t = threading.Thread(target=lambda: box.setdefault("r", run({"main.py": code}, args=[marker], limits=LIMITS)))
    t.start()
    time.sleep(0.8)
    uids = set()
    for pid in host_pids_with("template.py"):  # the template and every run's processes share its command line
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        uids.add(int(next(ln for ln in status.splitlines() if ln.startswith("Uid:")).split()[1]))
    t.join(30)
    r = box["r"]
    pid, uid, visible = r.stdout.split(" ", 2)
    assert int(pid) == 2 and visible.strip() == "[1, 2]", r.stdout
    assert 0 not in uids and uids, uids  # no process of the template or a run is root on the host
    assert int(uid) >= warm.INSIDE_BASE


def test_concurrent_runs_see_only_their_own_files_and_ids(no_nsjail) -> None:
    code = (
        "import os, sys\n"
        "mine = open('secret.txt').read()\n"
        "print(mine, os.getuid(), sorted(os.listdir('/work')), os.path.exists('/work/.template.py'))\n"
    )

    def one(i: int) -> RunResult:
        return run({"main.py": code, "secret.txt": f"s{i}"}, limits=LIMITS)

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(one, range(24)))
    uids = []
    for i, r in enumerate(results):
        assert r.status is RunStatus.OK, r
        secret, uid, rest = r.stdout.split(" ", 2)
        assert secret == f"s{i}"
        assert rest.strip() == "['main.py', 'secret.txt'] False"  # the spool is out of sight
        uids.append(int(uid))
    assert len(set(uids)) > 1  # runs alive at once have ids of their own


def test_a_dead_template_is_replaced(no_nsjail) -> None:
    assert run({"main.py": "print(1)"}, limits=LIMITS).stdout == "1\n"
    for template in list(warm._TEMPLATES.values()):
        os.kill(template.proc.pid, 9)
        template.proc.wait(10)
    r = run({"main.py": "print(2)"}, limits=LIMITS)
    assert (r.status, r.stdout) == (RunStatus.OK, "2\n")


def test_a_template_that_cannot_start_sends_runs_through_nsjail(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    broken = tmp_path / "template.py"
    broken.write_text("raise SystemExit(3)\n")
    monkeypatch.setattr(warm, "TEMPLATE_SCRIPT", broken)
    monkeypatch.setattr(warm, "_TEMPLATES", {})
    monkeypatch.setattr(warm, "_BROKEN", {})
    calls = []
    real = execute_nsjail
    monkeypatch.setattr("groupscore.sandbox.runner.execute_nsjail", lambda *a, **k: calls.append(1) or real(*a, **k))
    r = run({"main.py": "print('fine')"}, limits=LIMITS)
    assert (r.status, r.stdout) == (RunStatus.OK, "fine\n")
    assert calls == [1]
    assert "not available: warm template did not start" in warm.note()


def test_a_run_whose_jail_cannot_be_set_up_goes_through_nsjail_and_a_host_that_cannot_is_given_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A host where a warm run's setup always fails (here: a tmpfs option the kernel refuses) before the program's
    # first line, e.g. a cgroup the run's init may not join: each such run is rerun through nsjail (nothing of it
    # ran), and after two in a row the template is given up, said in warm.note(), later runs straight through nsjail.
    monkeypatch.setattr(warm, "_TEMPLATES", {})
    monkeypatch.setattr(warm, "_BROKEN", {})
    real_submit = warm.Template.submit

    def bad_tmpfs(self, request, fds, as_init=False):
        real_submit(self, {**request, "tmpfs": ["size=nonsense", request["tmpfs"][1]]}, fds, as_init)

    monkeypatch.setattr(warm.Template, "submit", bad_tmpfs)
    calls = []
    real = execute_nsjail
    monkeypatch.setattr("groupscore.sandbox.runner.execute_nsjail", lambda *a, **k: calls.append(1) or real(*a, **k))
    probe = "import sys\nprint('/work/.template.py' in sys.orig_argv)\n"
    for expected_calls in (1, 2, 3):
        r = run({"main.py": probe}, limits=LIMITS)
        assert (r.status, r.stdout, len(calls)) == (RunStatus.OK, "False\n", expected_calls), r
    assert "not available: runs could not be set up" in warm.note() and "mount /work" in warm.note()
    assert not any(t.alive() for t in warm._TEMPLATES.values())


@pytest.mark.parametrize("as_init", [False, True])
def test_a_warm_run_leaves_nothing_charged_in_its_slot(as_init: bool, no_nsjail) -> None:
    # The run's init (B) lives in the slot: until it is reaped its zombie still counts in the slot's pids.current, and
    # the next run there (warm or through nsjail) would get one process less. The host returns only once B is reaped.
    exe = toolchain("python").executable
    for _ in range(5):
        r = run({"p.py": "print(1)"}, [exe, "-S", "-B", "p.py"], limits=LIMITS, as_init=as_init)
        assert r.stdout == "1\n"
        pool = harness.slot_pool()
        for slot in list(pool._free):
            if "pids" in slot.dirs:
                charged = int((slot.dirs["pids"] / "pids.current").read_text())
                assert charged == slot.parked_tasks, (charged, slot.dirs)


def test_a_run_that_may_have_started_is_never_run_twice(no_nsjail) -> None:
    # Its template dies under it (no report): a sandbox error, not a rerun through nsjail, which would give a program
    # that chooses how its warm run ends a second try.
    box: dict[str, RunResult] = {}
    thread = threading.Thread(
        target=lambda: box.setdefault("r", run({"main.py": "import time\ntime.sleep(2)\n"}, limits=LIMITS))
    )
    thread.start()
    time.sleep(0.8)
    for template in [t for t in warm._TEMPLATES.values() if t.alive()]:
        os.kill(template.proc.pid, 9)
    thread.join(30)
    assert box["r"].status is RunStatus.SANDBOX_ERROR, box["r"]


def test_the_setting_turns_it_off(through_nsjail, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = execute_nsjail
    monkeypatch.setattr("groupscore.sandbox.runner.execute_nsjail", lambda *a, **k: calls.append(1) or real(*a, **k))
    with through_nsjail:
        r = run({"main.py": "print('x')"}, limits=LIMITS)
        assert warm.note() == "off"
    assert r.stdout == "x\n" and calls == [1]


def test_a_run_cannot_signal_or_read_its_init_or_the_template(no_nsjail) -> None:
    code = (
        "import os, signal\n"
        "out = []\n"
        "for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT):\n"
        "    try:\n"
        "        os.kill(1, sig)\n"
        "        out.append('sent')\n"
        "    except OSError as e:\n"
        "        out.append(e.errno)\n"
        "for path in ('/proc/1/mem', '/proc/1/environ', '/proc/1/fd'):\n"
        "    try:\n"
        "        os.listdir(path) if path.endswith('fd') else open(path, 'rb').read(1)\n"
        "        out.append('read')\n"
        "    except OSError as e:\n"
        "        out.append(e.errno)\n"
        "print(out)\n"
    )
    r = run({"main.py": code}, limits=LIMITS)
    assert r.status is RunStatus.OK, r
    assert "sent" not in r.stdout and "read" not in r.stdout, r.stdout


def test_spools_of_dead_processes_are_removed(tmp_path) -> None:
    dead, alive, other = (
        tmp_path / n for n in ("groupscore-warm-999999999-ab", f"groupscore-warm-{os.getpid()}-cd", "x")
    )
    for d in (dead, alive, other):
        d.mkdir()
    warm._remove_stale_spools(str(tmp_path))
    assert not dead.exists() and alive.exists() and other.exists()
