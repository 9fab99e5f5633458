"""Warm runs whose program is the jail's pid 1 (as_init: the code verifier's call runner): the same verdicts as a
fresh nsjail jail's, faster.

Each scenario runs twice, warm and through nsjail (GROUPSCORE_SANDBOX_WARM=0), and the two results must agree on what
a verifier reads. Then the code verifier end to end, both ways, on call-style items that pass, fail, time out, crash
and attack the runner; and the mechanics: the warm path is taken, the program is pid 1 as a host uid of its own, a
template per site flag, and the exit status comes from the template, never from the program.
"""

from __future__ import annotations

import os

import pytest
from helpers import seen_by_a_verifier, warm_then_nsjail

from groupscore.sandbox import Limits, RunResult, RunStatus, run, warm
from groupscore.sandbox.toolchains import toolchain
from groupscore.verifiers.code.item import CodeItem
from groupscore.verifiers.code.sandbox_jobs import runner_files
from groupscore.verifiers.code.verify import score_code

pytestmark = [
    pytest.mark.usefixtures("jail_available"),
    pytest.mark.skipif(
        os.geteuid() != 0, reason="warm runs need root (a host id per run); unprivileged runs use nsjail"
    ),
]

LIMITS = Limits(wall_time_s=8, memory_mb=256, cpu_time_s=2)


def _init_run(program: str | bytes, *, name: str = "main.py", flag: str = "-S", **kw) -> RunResult:
    kw.setdefault("limits", LIMITS)
    argv = [toolchain("python").executable, flag, "-B", name, *kw.pop("args", ["arg1"])]
    return run({name: program, **kw.pop("files", {})}, argv, as_init=True, **kw)


def _both(through_nsjail, program: str | bytes, **kw) -> tuple[RunResult, RunResult]:
    return warm_then_nsjail(lambda: _init_run(program, **dict(kw)), through_nsjail)


SCENARIOS = {
    "plan_on_stdin": "import sys\nplan = sys.stdin.buffer.read()\nprint(len(plan), plan[:5])\n",
    "exit_code": "import sys\nprint('x')\nsys.exit(3)\n",
    "uncaught": "def f(x):\n    return 1 / x\n\nf(0)\n",
    "syntax_error": "print('a'\n",
    # As pid 1 the interpreter's own SIGINT to itself is dropped: it exits 130.
    "keyboard_interrupt": "print('before', flush=True)\nraise KeyboardInterrupt\n",
    # Signals from inside the jail to pid 1 with the default action are dropped, its own included.
    "signal_self": "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\nprint('still here')\n",
    "child_kills_init": (
        "import os, signal, time\npid = os.fork()\n"
        "if pid == 0:\n    os.kill(1, signal.SIGKILL)\n    os.kill(os.getppid(), signal.SIGTERM)\n    os._exit(0)\n"
        "os.waitpid(pid, 0)\nprint('runner alive', os.getpid())\n"
    ),
    "handler_installed": (
        "import os, signal\nsignal.signal(signal.SIGUSR1, lambda *a: print('handled', flush=True))\n"
        "pid = os.fork()\nif pid == 0:\n    os.kill(1, signal.SIGUSR1)\n    os._exit(0)\n"
        "os.waitpid(pid, 0)\nimport time\ntime.sleep(0.1)\nprint('done')\n"
    ),
    "orphans_reaped": (
        "import os, time\nif os.fork() == 0:\n    if os.fork() == 0:\n        time.sleep(0.2)\n        os._exit(0)\n"
        "    os._exit(0)\ntime.sleep(0.5)\nwhile True:\n    try:\n        pid, _ = os.waitpid(-1, os.WNOHANG)\n"
        "    except ChildProcessError:\n        break\n    if pid == 0:\n        break\n"
        "print(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))\n"
    ),
    "identity": (
        "import os, sys, builtins\n"
        "print(os.getpid(), os.getppid(), sys.argv, sys.path[0], __file__, __name__, sys.flags.no_site)\n"
        "print([hasattr(builtins, n) for n in ('exit', 'quit', 'help', 'copyright')], 'site' in sys.modules)\n"
        "import resource\nprint([resource.getrlimit(getattr(resource, n)) for n in ('RLIMIT_CPU', 'RLIMIT_NPROC')])\n"
        "print([l for l in open('/proc/self/status') if l.startswith(('CapEff', 'NoNewPrivs', 'Seccomp:'))])\n"
        "import signal\nprint([signal.getsignal(s) for s in (signal.SIGINT, signal.SIGCHLD, signal.SIGPIPE)])\n"
        "print(signal.set_wakeup_fd(-1))\n"
    ),
    "atexit_and_thread": (
        "import atexit, threading, time\natexit.register(lambda: print('atexit ran'))\n"
        "threading.Thread(target=lambda: (time.sleep(0.1), print('thread done'))).start()\nprint('main done')\n"
    ),
    "os_exit_skips_teardown": "import atexit\natexit.register(print, 'never')\nimport os\nprint('x', flush=True)\nos._exit(4)\n",
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_warm_and_nsjail_init_runs_agree(name: str, through_nsjail) -> None:
    warm_result, plain_result = _both(through_nsjail, SCENARIOS[name], stdin="PLAN-bytes")
    assert seen_by_a_verifier(warm_result) == seen_by_a_verifier(plain_result)


def test_a_pyc_program_runs_as_the_interpreter_runs_one(through_nsjail) -> None:
    source = "import sys\nprint('pyc', sys.argv, __file__.endswith('.pyc'), type(__loader__).__name__)\n"
    files, _ = runner_files(source)  # compiled by the jail's interpreter, as the code verifier ships its runner
    pyc = files["runner.pyc"]
    assert isinstance(pyc, bytes)
    warm_result, plain_result = _both(through_nsjail, pyc, name="runner.pyc")
    assert warm_result.stdout.startswith("pyc ['runner.pyc', 'arg1'] True")
    assert seen_by_a_verifier(warm_result) == seen_by_a_verifier(plain_result)
    bad = _both(through_nsjail, b"\0\0\0\0" + pyc[4:], name="runner.pyc")
    assert [r.exit_code for r in bad] == [1, 1] and all("Bad magic number" in r.stderr for r in bad)


@pytest.mark.parametrize(
    "program,status",
    [
        ("while True:\n    pass\n", RunStatus.TIMEOUT),  # the CPU limit: the hard one alone for a pid-1 program
        ("import time\ntime.sleep(30)\n", RunStatus.TIMEOUT),  # the wall clock
        ("x = bytearray(600 << 20)\nprint(len(x))\n", RunStatus.MEMORY_LIMIT),
        ("import sys\nwhile True:\n    sys.stdout.write('y' * 65536)\n", RunStatus.OUTPUT_LIMIT),
    ],
)
def test_limits_give_the_same_status(program: str, status: RunStatus, through_nsjail) -> None:
    limits = Limits(wall_time_s=4, memory_mb=256, cpu_time_s=1, max_file_bytes=1 << 20)
    warm_result, plain_result = _both(through_nsjail, program, limits=limits)
    assert plain_result.status is status, plain_result
    assert (warm_result.status, warm_result.signal) == (plain_result.status, plain_result.signal)


def test_a_fork_bomb_gets_as_many_processes(through_nsjail) -> None:
    bomb = (
        "import os, time\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n            time.sleep(3)\n"
        "            os._exit(0)\n        n += 1\nexcept OSError:\n    print(n)\n"
    )
    warm_result, plain_result = _both(through_nsjail, bomb, limits=Limits(wall_time_s=5, memory_mb=256))
    assert plain_result.stdout.strip().isdigit()
    assert seen_by_a_verifier(warm_result) == seen_by_a_verifier(plain_result)


def test_init_runs_take_the_warm_path_as_pid_1_with_a_uid_of_their_own(no_nsjail) -> None:
    r = _init_run("import os\nprint(os.getpid(), os.getuid(), os.getgid())\n")
    pid, uid, gid = map(int, r.stdout.split())
    assert (r.status, pid) == (RunStatus.OK, 1)
    assert uid == gid and uid >= warm.INSIDE_BASE
    flags = {key[2] for key in warm._TEMPLATES}
    assert "-S" in flags


def test_a_template_per_site_flag(no_nsjail) -> None:
    probe = "import builtins\nprint(hasattr(builtins, 'exit'))\n"
    assert _init_run(probe, flag="-S").stdout == "False\n"
    assert _init_run(probe, flag="-s").stdout == "True\n"
    assert {"-s", "-S"} <= {key[2] for key in warm._TEMPLATES}


def test_the_exit_status_comes_from_the_template_not_the_program(no_nsjail) -> None:
    # The run's socket is closed before the program's first line: every fd beyond stdio is gone, so the program
    # cannot write a report of its own (here, a forged zero exit after a failure).
    forge = (
        "import json, os, sys\nopen_fds = []\nfor fd in range(3, 64):\n    try:\n"
        "        os.write(fd, json.dumps({'exit': 0, 'signal': None, 'cpu': 0, 'maxrss': 0}).encode())\n"
        "        open_fds.append(fd)\n    except OSError:\n        pass\n"
        "print(open_fds, sorted(os.listdir('/proc/self/fd')))\nsys.exit(5)\n"
    )
    r = _init_run(forge)
    assert r.exit_code == 5 and r.status is RunStatus.RUNTIME_ERROR
    assert r.stdout.startswith("[] ")


def test_the_report_of_a_killed_init_is_its_signal(no_nsjail) -> None:
    r = _init_run("import time\nprint('up', flush=True)\ntime.sleep(30)\n", limits=Limits(wall_time_s=1))
    assert (r.status, r.signal, r.stdout) == (RunStatus.TIMEOUT, 9, "up\n")
    # The template is still there for the next run.
    assert _init_run("print('next')\n").stdout == "next\n"


# -- the code verifier, both ways ---------------------------------------------------------------------------------

CANDIDATES = {
    "passes": "def add(a, b):\n    return a + b\n",
    "wrong": "def add(a, b):\n    return a - b\n",
    "loops": "def add(a, b):\n    while True:\n        pass\n",
    "raises": "def add(a, b):\n    raise ValueError('no')\n",
    "exits_on_import": "import sys\nsys.exit(0)\n",
    "kills_the_runner": "import os, signal\nos.kill(1, signal.SIGKILL)\ndef add(a, b):\n    return a + b\n",
    "kills_its_group": "import os, signal\ndef add(a, b):\n    os.killpg(0, signal.SIGKILL)\n",
    "writes_a_result_line": (
        "import os\ndef add(a, b):\n    os.write(1, b'forged\\n')\n    return a + b\n"  # stdout is /dev/null in workers
    ),
}


@pytest.mark.parametrize("name", sorted(CANDIDATES))
def test_code_verdicts_agree_warm_and_through_nsjail(name: str, through_nsjail) -> None:
    item = CodeItem(
        id=name,
        completion=CANDIDATES[name],
        time_limit_s=1.0,
        tests=[{"type": "call", "fn": "add", "args": [2, 3], "expected": 5}],
        hidden_tests=[{"type": "assert", "code": "assert add(-1, 1) == 0"}],
    )
    warm_verdict, plain_verdict = warm_then_nsjail(lambda: score_code(item), through_nsjail)
    assert (warm_verdict.status, warm_verdict.reward) == (plain_verdict.status, plain_verdict.reward)
    assert warm_verdict.reason == plain_verdict.reason
    # A correct add passes whatever else it tries: the kernel drops its signal to the runner (pid 1).
    assert (warm_verdict.reward == 1.0) is (name in ("passes", "writes_a_result_line", "kills_the_runner"))
