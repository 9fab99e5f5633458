"""A run that fills its own memory cgroup is the run's fault: memory_limit (a 0 to learn from), never sandbox_error.

Memory a program holds in memfd or tmpfs pages is charged to its run's cgroup slot but counts in no process's RSS, so
the OOM killer may pick nsjail itself (the largest process in the slot) and nsjail then logs no exit status. Reported as
a sandbox error, that became an infra_error the trainers mask: a program could choose it over its own 0.
"""

from __future__ import annotations

import signal

import pytest

from groupscore.sandbox import Limits, RunStatus, run
from groupscore.sandbox.classify import classify
from groupscore.sandbox.harness import RawRun
from groupscore.verifiers.code.item import CodeItem
from groupscore.verifiers.code.verify import score_code

LIMITS = Limits(wall_time_s=5, memory_mb=64)


def test_an_oom_kill_in_the_slot_with_no_exit_status_is_the_runs_memory_limit():
    # What run_jail reports when the OOM killer took nsjail: no status line (setup_failed), the slot's OOM counter up.
    out = RawRun(setup_failed=True, oom_killed=True, nsjail_status=-signal.SIGKILL)
    status, note = classify(out, LIMITS)
    assert status is RunStatus.MEMORY_LIMIT
    assert "64 MB" in note


def test_an_oom_kill_outranks_the_output_and_time_limits_it_explains():
    assert classify(RawRun(oom_killed=True, timed_out=True, signal=9), LIMITS)[0] is RunStatus.MEMORY_LIMIT
    assert classify(RawRun(oom_killed=True, output_limit=True, signal=9), LIMITS)[0] is RunStatus.MEMORY_LIMIT


def test_a_setup_failure_without_an_oom_kill_stays_a_sandbox_error():
    # Our side's failure (nsjail could not start the jail): still infra, never blamed on the program.
    status, _ = classify(RawRun(setup_failed=True, nsjail_status=255), LIMITS)
    assert status is RunStatus.SANDBOX_ERROR


# Fill memfds (no CLOEXEC, so they survive exec) to the slot's limit, then exec the jail's small dash: every process
# left in the slot is smaller than nsjail, so the OOM killer picks nsjail whenever it can (the red team's F1c).
MEMFD_BOMB = """\
import os
target, chunk, total = (64 - 24) << 20, b"x" * (1 << 20), 0
while total < target:
    fd = os.memfd_create("m", 0)
    for _ in range(15):
        if total >= target:
            break
        os.write(fd, chunk)
        total += len(chunk)
for slot in (3, 4, 5, 6):
    os.dup2(os.memfd_create("m", 0), slot, inheritable=True)
sh = [p for p in ("/usr/bin/dash", "/bin/dash", "/bin/sh") if os.path.exists(p)][0]
line = "x" * 4000
os.execv(sh, ["sh", "-c", "for f in 3 4 5 6; do while echo %s >&$f 2>/dev/null; do :; done; done; "
              "while :; do x=$(echo a); done" % line])
"""


@pytest.mark.parametrize("attempt", range(3))
def test_a_memfd_bomb_is_a_memory_limit_whichever_process_the_oom_killer_takes(jail_available, attempt):
    result = run({"main.py": MEMFD_BOMB}, limits=LIMITS)
    assert result.status in (RunStatus.MEMORY_LIMIT, RunStatus.TIMEOUT), (result.status, result.error)
    assert result.status is not RunStatus.SANDBOX_ERROR


C_MEMFD_BOMB = r"""
#define _GNU_SOURCE
#include <sys/mman.h>
#include <unistd.h>
#include <stdio.h>
#include <string.h>
static char buf[1 << 20];
int main(void) {
  long a, b;
  if (scanf("%ld %ld", &a, &b) != 2) return 1;
  if (a < 100) { printf("%ld\n", a + b); return 0; }
  memset(buf, 'x', sizeof buf);
  for (int i = 0; i < 60; i++) {
    int fd = memfd_create("m", 0);
    if (fd < 0) break;
    for (int j = 0; j < 15; j++) if (write(fd, buf, sizeof buf) < 0) break;
  }
  pause();
  return 0;
}
"""


def test_a_program_that_bombs_the_slot_on_the_input_it_cannot_solve_scores_that_test_zero(jail_available):
    # The red team's F1b: answer the small inputs, fill the slot on the large one. The item must score the solved
    # tests and a 0 for the bombed one, never an infra_error that masks the whole item.
    item = CodeItem(
        id="f1b",
        language="c",
        completion=f"```c\n{C_MEMFD_BOMB}\n```",
        memory_mb=64,
        time_limit_s=3.0,
        tests=[{"type": "stdio", "stdin": "1 2\n", "stdout": "3\n"}],
        hidden_tests=[
            {"type": "stdio", "stdin": "5 6\n", "stdout": "11\n"},
            {"type": "stdio", "stdin": "500 600\n", "stdout": "1100\n"},
        ],
    )
    verdict = score_code(item)
    assert verdict.status.value == "partial", verdict.reason
    assert verdict.reward == 0.5
    assert verdict.details["hidden_passed"] == 1


RUNNER_BOMB = """\
import os
def add(a, b):
    if a < 100:
        return a + b
    chunk = b"x" * (1 << 20)
    while True:
        fd = os.memfd_create("m", 0)
        for _ in range(15):
            os.write(fd, chunk)
"""


def test_a_call_test_that_fills_the_slot_under_the_runner_is_the_programs_zero(jail_available):
    # Call tests run under the Python runner (the jail's pid 1); the bomb may take the runner or nsjail with it.
    item = CodeItem(
        id="runner",
        completion=f"```python\n{RUNNER_BOMB}```",
        memory_mb=64,
        time_limit_s=3.0,
        tests=[{"type": "call", "fn": "add", "args": [1, 2], "expected": 3}],
        hidden_tests=[{"type": "call", "fn": "add", "args": [500, 600], "expected": 1100}],
    )
    verdict = score_code(item)
    assert verdict.status.value in ("incorrect", "timeout"), verdict.reason
    assert verdict.reward == 0.0
    assert verdict.details["public_passed"] == 1


MANY_FUNCTIONS = "int main(void) { return 0; }\n" + "".join(
    f"int f{i}(int x) {{ return x * {i} + {i}; }}\n" for i in range(3000)
)


def test_a_compile_that_fills_its_slot_is_a_compile_error_of_the_program(jail_available):
    # cc1 killed by the compile jail's cgroup limit: the program's compile error (a 0), never a sandbox error.
    result = run(
        {"main.c": MANY_FUNCTIONS}, language="c", compile_limits=Limits(wall_time_s=20, memory_mb=16, max_processes=16)
    )
    assert result.status is RunStatus.COMPILE_ERROR
    assert result.compile.status is RunStatus.MEMORY_LIMIT


def test_a_compile_jail_that_fails_on_our_side_is_a_sandbox_error_not_a_compile_error(jail_available, monkeypatch):
    # The compiler's jail could not start (our side): before, this came back as the program's compile error, a 0
    # trained on; now it is a sandbox error, which the code verifier turns into infra_error.
    from groupscore.sandbox import runner
    from groupscore.sandbox.result import CompileResult

    monkeypatch.setattr(
        runner, "compile_program", lambda *a, **k: (CompileResult(status=RunStatus.SANDBOX_ERROR, exit_code=None), b"")
    )
    result = run({"main.c": "int main(void) { return 0; }\n"}, language="c")
    assert result.status is RunStatus.SANDBOX_ERROR
    assert result.error == "compile step: jail setup failed"


def test_filling_the_work_tmpfs_past_the_memory_limit_is_the_programs_outcome(jail_available):
    # tmpfs pages of the work dir are charged to the slot like memfd pages: whichever limit stops the program (the
    # tmpfs size, or the OOM killer on any process of the slot), it is the program's result, never a sandbox error.
    fill = (
        "chunk = b'x' * (1 << 20)\nwith open('/work/big', 'wb') as fh:\n"
        "    while True:\n        fh.write(chunk)\n        fh.flush()\n"
    )
    result = run({"main.py": fill}, limits=Limits(wall_time_s=5, memory_mb=32, tmpfs_mb=256))
    assert result.status in (RunStatus.MEMORY_LIMIT, RunStatus.RUNTIME_ERROR), (result.status, result.error)


def test_a_program_that_closes_or_floods_the_runners_output_scores_zero_not_infra(jail_available):
    # The runner's answers go out on its own copy of stdout, each line marked with a secret: closing fds 1 and 2 does
    # not silence it (an honest answer still scores), and unmarked lines that forge records are ignored (a 0).
    for body, status in (
        ("import os\nos.close(1)\nos.close(2)\ndef add(a, b):\n    return a + b\n", "correct"),
        (
            'import sys\nsys.stdout.write(\'{"unit": 0, "status": "done"}\\n\' * 100000)\n'
            "def add(a, b):\n    return 0\n",
            "incorrect",
        ),
    ):
        item = CodeItem(
            id="out",
            completion=f"```python\n{body}```",
            time_limit_s=3.0,
            tests=[{"type": "call", "fn": "add", "args": [1, 2], "expected": 3}],
            hidden_tests=[{"type": "call", "fn": "add", "args": [5, 6], "expected": 11}],
        )
        verdict = score_code(item)
        assert verdict.status.value == status, verdict.reason
