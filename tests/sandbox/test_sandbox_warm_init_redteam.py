"""Red team of warm as_init runs: the code verifier's call runner as its jail's pid 1 in a fork of the warm
template (B becomes the program; the template reaps B and reports its exit), attacked as a GRPO policy would.

The candidate runs in the runner's workers, forks of B (itself a fork of the template interpreter). Each test pins
the secure outcome: what a worker sees is what it sees through nsjail (GROUPSCORE_SANDBOX_WARM=0), nothing of the
plan (the result marker, hidden residual code) is in a worker's memory, no attack from a worker makes a wrong answer
pass or changes a verdict, each concurrent run gets its own exit report, a pid-1 program reaches nothing of the
template (other runs' stdin, the spool, earlier runs' reports). A test marked as a hole the tests found failed on
the first as_init version; its comment names the fix. One file: the as_init red-team record, read together.
"""

from __future__ import annotations

import hashlib
import json
import marshal
import os
import secrets
import threading

import pytest
from helpers import FIND_SECRET, READABLE_MEMORY, warm_then_nsjail

from groupscore.sandbox import Limits, RunResult, RunStatus, run
from groupscore.sandbox.toolchains import toolchain
from groupscore.verifiers.code.item import CodeItem
from groupscore.verifiers.code.jail_runner import MARSHAL_VERSION, encode_value
from groupscore.verifiers.code.sandbox_jobs import runner_files
from groupscore.verifiers.code.verify import RUNNER_SOURCE, score_code

pytestmark = [
    pytest.mark.usefixtures("jail_available"),
    pytest.mark.skipif(
        os.geteuid() != 0, reason="warm runs need root (a host id per run); unprivileged runs use nsjail"
    ),
]

LIMITS = Limits(wall_time_s=8, memory_mb=256, cpu_time_s=4)


def _is_warm(r: RunResult) -> bool:
    return r.stdout.startswith("WARM ")


def _init_run(program: str, **kw) -> RunResult:
    """An as_init run of `program` (argv as the call runner's), its first line saying whether it ran warm."""
    head = "import sys as _s\nprint('WARM' if 'template' in ' '.join(_s.orig_argv) else 'COLD', end=' ', flush=True)\n"
    argv = [toolchain("python").executable, "-S", "-B", "main.py"]
    kw.setdefault("limits", LIMITS)
    return run({"main.py": head + program, **kw.pop("files", {})}, argv, as_init=True, **kw)


def _runner(program: str, units: list[dict], marker: str) -> list[dict]:
    """The real call runner (as the code verifier ships it) on `units`; its records, in order."""
    files, argv = runner_files(RUNNER_SOURCE)
    tool = toolchain("python")
    plan = {"marker": marker, "import_limit_s": 4.0, "stop_on_failure": False, "units": units}
    command, stdin = [tool.executable, "-S", "-B", *argv, *tool.site_dirs], marshal.dumps(plan, MARSHAL_VERSION)
    r = run({**files, "solution.py": program}, command, stdin=stdin, as_init=True, limits=LIMITS)
    assert r.status is RunStatus.OK, r
    prefix = marker + " "
    return [json.loads(line[len(prefix) :]) for line in r.stdout.splitlines() if line.startswith(prefix)]


def _call(fn: str, *args: object, residual: dict | None = None, limit: float = 3.0) -> dict:
    return {
        "calls": [{"fn": fn, "args": encode_value(list(args)), "kwargs": encode_value({})}] if fn else [],
        "residual": residual,
        "time_limit_s": limit,
    }


def _answers(records: list[dict]) -> list[object]:
    return [(r.get("status"), r.get("answers"), r.get("residual")) for r in records if "unit" in r]


# ----------------------------------------------------------------- what a worker sees: the same as through nsjail

OBSERVER = r"""
import builtins, os, signal, resource, socket, sys, threading

def _depth():
    def f(n):
        try:
            return f(n + 1)
        except RecursionError:
            return n
    return f(0)

def _status(pid):
    keep = ("Sig", "Shd", "Cap", "NoNewPrivs", "Seccomp", "NSpid", "NSsid", "NSpgid", "Umask")
    return sorted(line.strip() for line in open("/proc/%s/status" % pid) if line.startswith(keep))

def _try(fn):
    try:
        fn()
        return "ok"
    except OSError as exc:
        return type(exc).__name__

def path():
    return "template" in open("/proc/1/cmdline", "rb").read().decode(errors="replace")

def facts(group):
    if group == "interpreter":
        box = []
        thread = threading.Thread(target=lambda: box.append(_depth()))
        thread.start()
        thread.join()
        names = ("exit", "quit", "help", "copyright", "credits", "license")
        return [_depth(), box, sys.getrecursionlimit(), sys.path, list(sys.flags), sys.argv, __name__,
                [n for n in names if hasattr(builtins, n)], sys.stdout.encoding, sys.stderr.errors,
                threading.active_count(), sys.getswitchinterval()]
    if group == "process":
        return [os.getpid(), os.getppid(), os.getsid(0) == os.getpid(), os.getpgrp() == os.getpid(),
                os.getuid() == os.getgid(), os.getgroups(), os.umask(0o22), os.getcwd(), sorted(os.listdir(".")),
                sorted(os.listdir("/proc/self/fd")), socket.gethostname(), sorted(os.environ.items())]
    if group == "limits":
        return [[n, list(resource.getrlimit(getattr(resource, n)))] for n in sorted(dir(resource))
                if n.startswith("RLIMIT_")]
    if group == "signals":
        handlers = [str(signal.getsignal(s)) for s in range(1, signal.NSIG) if s not in (9, 19, 32, 33)]
        return [handlers, signal.set_wakeup_fd(-1), _status("self"), _status(1)]
    if group == "reach":
        opened = [_try(lambda p=p: open("/proc/1/" + p, "rb").read(1)) for p in ("mem", "environ", "cwd/x")]
        return opened + [_try(lambda: os.listdir("/proc/1/fd")), _try(lambda: os.kill(1, 0)),
                         sorted(p for p in os.listdir("/proc") if p.isdigit())]
"""
# Residual code runs in the runner itself (pid 1): how deep it recurses there must not depend on the path either.
RESIDUAL_DEPTH = (
    "def f(n):\n    try:\n        return f(n + 1)\n    except RecursionError:\n        return n\n"
    "import sys\nassert False, (f(0), sys.getrecursionlimit())\n"
)


def test_what_a_worker_and_the_runner_see_is_the_same_warm_and_through_nsjail(through_nsjail) -> None:
    # A hole the tests found, closed (verdict, minor): warm, the runner's environment had PWD=/work (the template's request adds it
    # for the init shell it stands in for), which an as_init run through nsjail has not: os.environ["PWD"] in a
    # candidate worked warm and raised KeyError through nsjail. warm_launcher.py now adds PWD only to pid-2 runs.
    units = [_call("facts", g) for g in ("interpreter", "process", "limits", "signals", "reach")]
    units.append(_call("", residual={"kind": "assert", "code": RESIDUAL_DEPTH}))
    marker = secrets.token_hex(8)
    warm_records = _runner(OBSERVER, [*units, _call("path")], marker)
    with through_nsjail:
        cold_records = _runner(OBSERVER, [*units, _call("path")], marker)
    # The last unit says which path ran: the runner (pid 1) is the template's fork, or python runner.pyc.
    assert [r["answers"] for r in (warm_records[-2], cold_records[-2])] == [[["O", "true"]], [["O", "false"]]]
    assert warm_records[-1] == {"end": True} and len(warm_records) == len(units) + 2
    for unit, (hot, cold) in enumerate(zip(_answers(warm_records)[:-1], _answers(cold_records)[:-1], strict=True)):
        assert hot == cold, f"unit {unit}: warm {hot} != nsjail {cold}"


# ----------------------------------------------------------------- the plan (marker, hidden code) never in a worker

SCANNER = (
    READABLE_MEMORY
    + r'''
import hashlib, os, re

def crash():
    os._exit(3)

def scan(digests, control):
    """Hits of the plan's marker or hidden code in this process's whole memory (only digests are given)."""
    import ctypes
    ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # dumpable again (the runner made workers not), so /proc/self/mem opens
    hits, seen = 0, 0
    for chunk in readable_memory():
        for m in re.finditer(rb"(?:MARK|HIDDEN|CALL)-[0-9a-f]{16}", chunk):
            hits += hashlib.sha256(m.group()).hexdigest() in digests
            seen += m.group().decode() == control  # the scan's own argument: it must find that
    return [hits, seen > 0]
'''
)


def test_the_plan_never_reaches_a_worker_warm_or_cold(through_nsjail) -> None:
    """The runner holds the marker (forging a result line needs it) and hidden residual code (expected values); the
    first worker is forked before the plan is read, later ones come from an exec'd zygote. Warm, the runner is a fork of
    the template: neither worker may hold either string, on either path; an earlier run's plan neither."""
    token = secrets.token_hex(8)
    marker, hidden = f"MARK-{token}", f"HIDDEN-{token}"
    digests = [hashlib.sha256(s.encode()).hexdigest() for s in (marker, hidden)]
    residual = {"kind": "assert", "code": f"assert '{hidden}' != ''\n"}
    # The scan in the first worker, then a crash (the next worker is the zygote's), the scan there, the hidden unit.
    control = f"CALL-{token}"
    units = [_call("scan", digests, control), _call("crash"), _call("scan", digests, control)]
    units.append(_call("", residual=residual))
    for _ in range(2):  # the second time warm, an earlier run with the same plan went through the same template
        warm_records = _runner(SCANNER, units, marker)
        assert _answers(warm_records) == [
            ("done", [["O", '["list",0,true]']], None),
            ("crashed", None, None),
            ("done", [["O", '["list",0,true]']], None),
            ("done", [], "passed"),
        ]
    with through_nsjail:
        assert _answers(_runner(SCANNER, units, marker)) == _answers(warm_records)


# ----------------------------------------------------------------- a worker against the runner and the template

ATTACK = r'''
import gc, json, os, signal, socket, sys

def _everything():
    """Signal the runner (pid 1) with every signal; reach for the template's state through the frames below the
    runner (its globals: the control socket, the other runs' sockets, the wakeup pipe) and every fd number found;
    write forged result lines to each; then kill whatever else can be killed."""
    forged = json.dumps({"unit": 0, "status": "done", "answers": [["O", "5"]], "residual": None}) + "\n"
    for sig in range(1, 32):
        for pid in (1, os.getppid()):
            try:
                os.kill(pid, sig)
            except OSError:
                pass
    frame, found = sys._getframe(), []
    while frame is not None:
        for value in list(frame.f_globals.values()) + list(frame.f_locals.values()):
            if isinstance(value, socket.socket):
                found.append(value)
            elif isinstance(value, dict):
                found += [v for v in value.values() if isinstance(v, socket.socket)]
        frame = frame.f_back
    numbers = set(range(3, 256)) | {s.fileno() for s in found}
    for sock in found:
        for send in (lambda: sock.send(b'{"exit": 0, "signal": null}'), lambda: sock.send(b"go")):
            try:
                send()
            except OSError:
                pass
    own = {int(fd) for fd in os.listdir("/proc/self/fd")}
    for fd in numbers - own:
        try:
            os.write(fd, forged.encode())
        except OSError:
            pass
    for line in ("unit 0 done", forged):
        for fd in (0, 1, 2):
            os.write(fd, line.encode())
    try:
        os.kill(-1, signal.SIGKILL)
    except OSError:
        pass
    gc.unfreeze()
    gc.collect()

_everything()

def add(a, b):
    _everything()
    return a OP b
'''


@pytest.mark.parametrize("op,reward", [("+", 1.0), ("-", 0.0)])
def test_a_worker_attacking_the_runner_and_the_template_changes_no_verdict(
    op: str, reward: float, through_nsjail
) -> None:
    item = CodeItem(
        id="attack",
        completion=ATTACK.replace("OP", op),
        time_limit_s=2.0,
        tests=[{"type": "call", "fn": "add", "args": [2, 3], "expected": 5}],
        hidden_tests=[{"type": "assert", "code": "assert add(-1, 1) == 0\nassert add(4, 4) == 8"}],
    )
    seen = [(v.reward, v.status, v.reason) for v in warm_then_nsjail(lambda: score_code(item), through_nsjail)]
    assert seen[0] == seen[1] and seen[1][0] == reward, seen


# ----------------------------------------------------------------- the template's report: each run its own, always

ODD_EXITS = {
    # A fault is forced on pid 1 (the kernel lifts its shield for it): the report is the signal.
    "segfault": "import ctypes\nctypes.string_at(0)\n",
    # The main thread leaves alone (SYS_exit); another thread ends the process later with its own status.
    "main_thread_first": (
        "import ctypes, os, threading, time\n"
        "def later():\n    time.sleep(0.3)\n    print('thread', flush=True)\n    os._exit(7)\n"
        "threading.Thread(target=later).start()\nctypes.CDLL(None).syscall(60, 0)\n"
    ),
    # abort() as pid 1: its own SIGABRT is dropped, glibc falls back to a fault of its own.
    "abort": "import os\nprint('a', flush=True)\nos.abort()\n",
    # pid 1 execs another program: the report is that program's status.
    "exec": "import os, sys\nos.execv(sys.executable, [sys.executable, '-S', '-c', 'print(\"execd\"); exit(9)'])\n",
    # Its output closed early, it lives on, then exits: the host waits for the exit, the template reports it.
    "closes_output_first": "import os, time\nos.close(1)\nos.close(2)\ntime.sleep(0.5)\nos._exit(4)\n",
    # Its children stay, holding the output open, as it exits: the kernel ends them with it.
    "exits_under_children": (
        "import os, time\nfor _ in range(3):\n    if os.fork() == 0:\n        time.sleep(30)\n        os._exit(0)\n"
        "print('parent out', flush=True)\nos._exit(6)\n"
    ),
}


@pytest.mark.parametrize("name", sorted(ODD_EXITS))
def test_odd_exits_of_a_pid_1_program_are_reported_as_through_nsjail(name: str, through_nsjail) -> None:
    hot = _init_run(ODD_EXITS[name])
    with through_nsjail:
        cold = _init_run(ODD_EXITS[name])
    assert _is_warm(hot) and not _is_warm(cold)
    seen = [(r.status, r.exit_code, r.signal, r.stdout[5:], r.stderr) for r in (hot, cold)]
    assert seen[0] == seen[1] and hot.wall_time_s < 5, (hot, cold)


def test_concurrent_init_runs_each_get_their_own_report() -> None:
    """The template keys each report on its run's init (B) pid: runs that start and end together, exiting at once or
    after a while, each get their own exit status; none ends without a report (the host waits 2 s for it)."""
    results: dict[int, RunResult] = {}

    def one(code: int) -> None:
        delay = (code % 3) * 0.15
        results[code] = _init_run(f"import os, time\ntime.sleep({delay})\nos._exit({code})\n")

    threads = [threading.Thread(target=one, args=(code,)) for code in range(1, 17)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(results) == list(range(1, 17))
    for code, r in results.items():
        assert _is_warm(r) and (r.status, r.exit_code, r.signal) == (RunStatus.RUNTIME_ERROR, code, None), r
    assert _init_run("print('next')").stdout == "WARM next\n"


def _template_pids() -> list[int]:
    from groupscore.sandbox import warm

    return sorted(t.proc.pid for t in warm._TEMPLATES.values() if t.alive())


def test_hostile_init_runs_leave_the_template_serving() -> None:
    """A pid-1 program (the runner's place) that kills, stops, exhausts and leaves early: the template that served
    the first run serves the next (a template that dies takes its runs in flight with it: group-mates' infra errors)."""
    assert _init_run("print(1)").stdout == "WARM 1\n"
    before = _template_pids()
    hostile = [
        "import os, signal\nfor s in (9, 15, 19):\n    try:\n        os.kill(-1, s)\n    except OSError:\n        pass\n",
        "import os, time\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        time.sleep(0.2)\n        break\n",
        "import os\nfs = []\ntry:\n    while True:\n        fs.append(os.open('/dev/null', 0))\nexcept OSError:\n    pass\n",
        "import os, signal\nos.kill(0, signal.SIGSTOP)\nos.kill(os.getpid(), signal.SIGSTOP)\nos._exit(0)\n",
        "import os\nos.close(0)\nos.close(1)\nos.close(2)\nwhile True:\n    pass\n",
    ]
    for program in hostile:
        r = _init_run(program, limits=Limits(wall_time_s=2, memory_mb=128, cpu_time_s=1))
        assert r.status is not RunStatus.SANDBOX_ERROR, (program, r)
    assert _template_pids() == before
    assert _init_run("print(2)").stdout == "WARM 2\n"


def test_a_pid_1_program_reaches_no_other_runs_plan_nor_the_spool() -> None:
    """As pid 1, B's own process: it built the jail as root over the template's tree, where every run's files and
    stdin (a runner's plan) are in the spool. A receiver run beside a sender walks all it can reach for the sender's
    secret (its stdin and input file), and finds its own files alone in /work."""
    secret = secrets.token_hex(16)
    sender = "import sys, time\nsys.stdin.buffer.read(1)\nprint('READ', flush=True)\ntime.sleep(2.5)\n"
    box: dict[str, RunResult] = {}
    thread = threading.Thread(
        target=lambda: box.setdefault("s", _init_run(sender, files={"secret.txt": secret}, stdin=f"PLAN {secret}"))
    )
    thread.start()
    receiver = (
        FIND_SECRET
        + f"""
import os, time
time.sleep(0.8)
found, seen = search(bytes.fromhex('{secret.encode().hex()[::-1]}'[::-1]))
print(found, seen > 3, sorted(os.listdir('/work')), sorted(p for p in os.listdir('/proc') if p.isdigit()))
"""
    )
    r = _init_run(receiver)
    thread.join(30)
    assert box["s"].stdout == "WARM READ\n", box["s"]
    assert r.stdout == "WARM [] True ['main.py'] ['1']\n", r


def test_earlier_runs_reports_are_not_in_a_later_runs_memory() -> None:
    """The template now builds each as_init run's report (exit, signal, CPU, peak memory) in its own memory, of which
    every later run is a copy: an earlier run's report, whose exit status a program chooses, must not be readable
    there (a channel between runs, and between the completions of a group)."""
    for _ in range(3):
        assert _init_run("import os\nos._exit(173)\n").exit_code == 173
    scan = (
        READABLE_MEMORY
        + r"""
import re
hits = 0
for chunk in readable_memory():
    hits += sum(int(m.group(1)) == 173 for m in re.finditer(rb'"exit": ([0-9]+)', chunk))
print(hits)
"""
    )
    assert _init_run(scan).stdout == "WARM 0\n"


def test_a_worker_gets_as_much_memory_as_through_nsjail(through_nsjail) -> None:
    """Warm, the runner's interpreter pages are the template's (charged to the template, shared until written), so a
    worker could get the slot's memory that a fresh interpreter uses through nsjail: a lenient limit on one path is a
    verdict that differs. A child of pid 1 allocates MiB by MiB until the slot's OOM kill; the two counts stay close."""
    program = (
        "import os\nr, w = os.pipe()\npid = os.fork()\nif pid == 0:\n    os.close(r)\n    keep = []\n"
        "    while True:\n        keep.append(bytearray(1 << 20))\n        os.write(w, b'x')\nos.close(w)\nn = 0\n"
        "while os.read(r, 1):\n    n += 1\nos.waitpid(pid, 0)\nprint(n)\n"
    )
    limits = Limits(wall_time_s=8, memory_mb=96, cpu_time_s=4)
    hot = _init_run(program, limits=limits)
    with through_nsjail:
        cold = _init_run(program, limits=limits)
    assert _is_warm(hot) and hot.status is cold.status is RunStatus.MEMORY_LIMIT, (hot, cold)
    got = [int(r.stdout.split()[-1]) for r in (hot, cold)]
    assert 60 < got[1] < 96 and abs(got[0] - got[1]) <= 6, got
