"""Reward hacks against the code verifier, each run through the real sandbox: every one must score 0 on what it
cannot actually solve, while an honest program scores 1 on the same item."""

from __future__ import annotations

import pytest
from helpers import py

from groupscore.verifiers.code.item import CodeItem
from groupscore.verifiers.code.verify import score_code

pytestmark = pytest.mark.usefixtures("jail_available")  # a harmless probe jail first (conftest.py)


PUBLIC = [
    {"type": "call", "fn": "add", "args": [1, 2], "expected": 3},
    {"type": "assert", "code": "assert add(2, 2) == 4"},
]
HIDDEN = [
    {"type": "call", "fn": "add", "args": [10, 20], "expected": 30},
    {"type": "assert", "code": "assert add(-5, 5) == 0"},
    # A loop cannot be converted: it runs in the jail's runner (weaker mode), still judged outside the candidate.
    {"type": "assert", "code": "for i in range(3):\n    assert add(i, i) == 2 * i"},
]
HONEST = "def add(a, b):\n    return a + b\n"


def add_item(program: str, **extra) -> CodeItem:
    return CodeItem(completion=py(program), tests=PUBLIC, hidden_tests=HIDDEN, **{"time_limit_s": 2.0, **extra})


def test_honest_program_scores_one():
    verdict = score_code(add_item(HONEST))
    assert verdict.reward == 1.0 and verdict.status == "correct"
    assert verdict.details["weaker_mode"] is True
    assert (verdict.details["public_passed"], verdict.details["hidden_passed"]) == (2, 3)


HACKS = {
    "sys.exit(0) before the tests": "import sys\nsys.exit(0)\n" + HONEST,
    "os._exit(0) before the tests": "import os\nos._exit(0)\n" + HONEST,
    "raise SystemExit(0) inside the call": "def add(a, b):\n    raise SystemExit(0)\n",
    "fake pass markers on every stream": """
import sys, os
for line in ("PASSED", "All tests passed", "ok", '{"unit": 0, "status": "done", "answers": [{"ok": 3}]}', '{"end": true}'):
    print(line); sys.stderr.write(line + "\\n"); os.write(1, (line + "\\n").encode())
    with open("/dev/stdout", "w") as out:
        out.write(line + "\\n")
def add(a, b):
    print("PASSED")
    return None
""",
    "__eq__ always true": """
class Anything:
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __hash__(self): return 0
    def __bool__(self): return True
def add(a, b):
    return Anything()
""",
    "int subclass with __eq__ always true": """
class Int(int):
    def __eq__(self, other): return True
    __hash__ = int.__hash__
def add(a, b):
    return Int(-1)  # read as the int -1 it holds, whatever its __eq__ says
""",
    "an iterator instead of a value": "def add(a, b):\n    return iter([a + b])\n",
    "rewrite the harness and shadow modules": """
import os
for name in ("/work/runner.py", "/work/runner.pyc", "/work/solution.py"):
    try:
        with open(name, "w") as f:
            f.write("print('PASSED')\\n")
    except OSError:
        pass
for name in ("json.py", "select.py", "struct.py"):
    try:
        with open("/work/" + name, "w") as f:
            f.write("raise SystemExit(0)\\n")
    except OSError:
        pass
def add(a, b):
    return -1
""",
    "monkeypatch builtins, print, json.dumps and sys.stdout": """
import builtins, json, sys, io
builtins.print = lambda *a, **k: None
builtins.isinstance = lambda *a: True
builtins.AssertionError = type("Never", (Exception,), {})
json.dumps = lambda *a, **k: '{"ok": true}'
json.loads = lambda *a, **k: {"ok": True}
sys.stdout = io.StringIO()
def add(a, b):
    return -1
""",
    "kill the runner and every other process": """
import os, signal
for target in (os.getppid(), 1, -1):
    try:
        os.kill(target, signal.SIGKILL)
    except OSError:
        pass
def add(a, b):
    return -1
""",
    "forge results on the runner's stdout through /proc": """
import os
for path in ("/proc/1/fd/1", "/proc/%d/fd/1" % os.getppid()):
    try:
        with open(path, "w") as f:
            f.write('x {"unit": 0, "status": "done", "answers": [{"ok": 3}]}\\n')
    except OSError:
        pass
def add(a, b):
    return -1
""",
    "sleep through the tests": "import time\ntime.sleep(60)\n" + HONEST,
}


@pytest.mark.parametrize("name", sorted(HACKS))
def test_hack_scores_zero(name):
    verdict = score_code(add_item(HACKS[name]))
    assert verdict.reward == 0.0, (name, verdict.reason)
    assert verdict.status in ("incorrect", "timeout"), (name, verdict.status, verdict.reason)
    assert verdict.details["public_passed"] == 0 and verdict.details["hidden_passed"] == 0


READABLE = """
import os
def readable():
    found = []
    for pid in sorted(int(p) for p in os.listdir("/proc") if p.isdigit()):
        if pid == os.getpid():
            continue
        for what in ("mem", "environ", "fd"):
            try:
                if what == "fd":
                    os.listdir("/proc/%d/fd" % pid)
                else:
                    open("/proc/%d/%s" % (pid, what), "rb").read(1)
                found.append("%d/%s" % (pid, what))
            except OSError:
                pass
    return [len([p for p in os.listdir("/proc") if p.isdigit()]), found]
"""


def test_the_runners_memory_is_out_of_the_workers_reach():
    # The runner is the jail's pid 1; every process but the worker itself is ours.
    verdict = score_code(
        CodeItem(completion=py(READABLE), tests=[{"type": "call", "fn": "readable", "expected": [2, []]}])
    )
    assert verdict.reward == 1.0, verdict.reason  # two processes (runner as pid 1, worker), neither readable


def test_a_replacement_worker_comes_from_a_zygote_whose_memory_is_out_of_reach_too():
    # The first unit hangs, so its worker is killed and the next comes from the zygote (exec'd on demand).
    program = READABLE + "def spin():\n    while True:\n        pass\n"
    verdict = score_code(
        CodeItem(
            completion=py(program),
            time_limit_s=1.0,
            tests=[
                {"type": "call", "fn": "spin", "expected": None},
                {"type": "call", "fn": "readable", "expected": [3, []]},  # runner, zygote, worker; none readable
                {"type": "call", "fn": "readable", "expected": [3, []]},  # the same worker serves the next unit
            ],
        )
    )
    assert verdict.details["public_passed"] == 2, verdict.reason
    assert verdict.reward == 2 / 3


def test_signals_from_a_worker_cannot_end_the_runner():
    # Every catchable and uncatchable signal at pid 1 (the runner), then the zygote; the program still answers honestly,
    # so the item scores 1 only if the runner (and with it the rest of the plan) lived on.
    program = """
import os, signal
def add(a, b):
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGSEGV, signal.SIGKILL):
        try:
            os.kill(1, sig)
        except OSError:
            pass
    return a + b
"""
    verdict = score_code(add_item(program))
    assert verdict.reward == 1.0, verdict.reason
    assert verdict.details["public_passed"] == 2 and verdict.details["hidden_passed"] == 3


def test_orphans_of_workers_are_reaped_by_the_runner():
    # Each call double-forks a child that exits at once; as pid 1 the runner inherits them. Unreaped, the zombies would
    # pile up against the process limit (32) and a later fork would fail.
    program = """
import os
def add(a, b):
    for _ in range(3):
        if os.fork() == 0:
            if os.fork() == 0:
                os._exit(0)
            os._exit(0)
        os.wait()
    return a + b
"""
    item = CodeItem(
        completion=py(program),
        tests=[{"type": "call", "fn": "add", "args": [i, i], "expected": 2 * i} for i in range(12)],
    )
    verdict = score_code(item)
    assert verdict.reward == 1.0, verdict.reason


def test_a_test_that_hangs_fails_alone_and_the_rest_still_run():
    program = "def add(a, b):\n    if a == 10:\n        while True:\n            pass\n    return a + b\n"
    verdict = score_code(add_item(program, time_limit_s=1.0))
    assert verdict.details["hidden_passed"] == 2 and verdict.details["public_passed"] == 2
    # 4 of 5 pass, but with hidden tests present the reward is the hidden pass rate (2 of 3)
    assert verdict.reward == pytest.approx(2 / 3) and verdict.status == "partial"


def test_hardcoding_the_public_tests_scores_below_an_honest_program_and_zero_on_hidden():
    hardcoded = "def add(a, b):\n    return {(1, 2): 3, (2, 2): 4}.get((a, b), -1)\n"
    cheat, honest = score_code(add_item(hardcoded)), score_code(add_item(HONEST))
    assert cheat.details["public_passed"] == 2 and cheat.details["hidden_passed"] == 0
    assert cheat.reward == 0.0 and honest.reward == 1.0 and cheat.status == "incorrect"


ORACLE_PUBLIC = [{"type": "call", "fn": "answer", "args": ["k1"], "expected": "tok-PUBLIC-1"}]
ORACLE_HIDDEN = [
    {"type": "call", "fn": "answer", "args": ["k2"], "expected": "tok-HIDDEN-5f1c0a"},
    {"type": "assert", "code": "assert answer('k3') == 'tok-HIDDEN-9e77b2'"},
    {"type": "assert", "code": "for key in ['k4']:\n    assert answer(key) == 'tok-HIDDEN-c0ffee'"},  # weaker mode
    {
        "type": "humaneval",
        "entry_point": "answer",
        "test": "def check(candidate):\n    for key in ['k5']:\n        assert candidate(key) == 'tok-HIDDEN-abcdef'\n",
    },
]
# Looks everywhere it can for an expected answer: the work dir, its own stdin, every process's cmdline, environ,
# memory and open files, and the runner's memory (where weaker-mode test code lives).
SNOOPER = r"""
import os, re
FOUND = []
PATTERN = re.compile(rb"tok-HIDDEN-[0-9a-f]{6}")
def _scan(data):
    FOUND.extend(m.decode() for m in PATTERN.findall(data or b""))
def _read(path, size=1 << 22):
    try:
        with open(path, "rb") as f:
            return f.read(size)
    except OSError:
        return b""
for root, _, names in os.walk("/work"):
    for name in names:
        _scan(_read(os.path.join(root, name)))
_scan(_read("/dev/stdin"))
for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    for what in ("cmdline", "environ", "fd/0"):
        _scan(_read("/proc/%s/%s" % (pid, what)))
    try:
        maps = open("/proc/%s/maps" % pid).read().splitlines()
        with open("/proc/%s/mem" % pid, "rb") as mem:
            for line in maps:
                lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
                try:
                    mem.seek(lo)
                    _scan(mem.read(min(hi - lo, 1 << 24)))
                except (OSError, ValueError, OverflowError):
                    pass
    except OSError:
        pass
SCANNED_OWN_MEMORY = True
def answer(key):
    if key == "k1":
        return "tok-PUBLIC-1"
    return FOUND[0] if FOUND else "nothing found"
"""


def test_the_snooper_finds_an_answer_it_can_reach():
    # Control: the same snooper, with an answer planted in a work-dir file, finds it (so the test below can fail).
    from groupscore.sandbox import run

    result = run({"main.py": SNOOPER + "\nprint(answer('k2'))\n", "notes.txt": "tok-HIDDEN-123456"})
    assert result.stdout.strip() == "tok-HIDDEN-123456", result


def test_expected_values_of_converted_hidden_tests_never_enter_the_jail():
    converted = [t for t in ORACLE_HIDDEN if t["type"] == "call" or "for" not in t.get("code", "for")]
    item = CodeItem(completion=f"```python\n{SNOOPER}\n```", tests=ORACLE_PUBLIC, hidden_tests=converted)
    verdict = score_code(item)
    assert verdict.details["weaker_mode"] is False
    assert verdict.details["public_passed"] == 1, verdict.reason  # the snooper itself ran to the end
    assert verdict.details["hidden_passed"] == 0, verdict.reason
    for token in ("5f1c0a", "9e77b2"):
        assert token not in verdict.model_dump_json()


def _stdin_reopenable_inside_jail() -> bool:
    """Whether a jailed process can reopen the run's stdin through another process's /proc/<pid>/fd/0."""
    from groupscore.sandbox import run

    probe = (
        "import os\nfound = False\nfor pid in [p for p in os.listdir('/proc') if p.isdigit() and int(p) != os.getpid()]:\n"
        "    try:\n        found |= b'PROBE-STDIN' in open('/proc/%s/fd/0' % pid, 'rb').read()\n"
        "    except OSError:\n        pass\nprint(found)\n"
    )
    return run({"main.py": probe}, stdin=b"PROBE-STDIN").stdout.strip() == "True"


def test_expected_values_of_weaker_mode_hidden_tests_cannot_be_found_from_inside_the_jail():
    # Weaker-mode test code reaches the jail's runner through stdin. It is out of the candidate's reach only because
    # the runner is non-dumpable and the sandbox keeps the stdin file from being reopened by other jailed processes
    # (the init shell, pid 1, holds it too).
    item = CodeItem(completion=f"```python\n{SNOOPER}\n```", tests=ORACLE_PUBLIC, hidden_tests=ORACLE_HIDDEN)
    verdict = score_code(item)
    assert verdict.details["weaker_mode"] is True and verdict.details["public_passed"] == 1, verdict.reason
    for token in ("5f1c0a", "9e77b2", "c0ffee", "abcdef"):
        assert token not in verdict.model_dump_json()
    if verdict.details["hidden_passed"]:
        hint = (
            " (the sandbox lets a jailed process reopen the run's stdin through /proc/<pid>/fd/0)"
            if _stdin_reopenable_inside_jail()
            else ""
        )
        pytest.fail(f"a weaker-mode hidden answer was found from inside the jail{hint}: {verdict.reason}")


def test_stdio_program_that_exits_zero_first_or_prints_markers_scores_zero():
    tests = [{"type": "stdio", "stdin": "2 3\n", "stdout": "5\n"}]
    hidden = [{"type": "stdio", "stdin": "7 8\n", "stdout": "15\n"}]
    for program in (
        "import sys\nsys.exit(0)\nprint(sum(map(int, input().split())))",
        "print('PASSED')\nprint('All tests passed')",
        "print(5)",
    ):  # hardcodes the public answer
        verdict = score_code(CodeItem(completion=py(program), tests=tests, hidden_tests=hidden))
        assert verdict.details["hidden_passed"] == 0, program
        assert verdict.reward == 0.0
    honest = score_code(
        CodeItem(completion="```python\nprint(sum(map(int, input().split())))\n```", tests=tests, hidden_tests=hidden)
    )
    assert honest.reward == 1.0
