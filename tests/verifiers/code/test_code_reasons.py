"""A failing public test's reason quotes what the program produced only as a short escaped excerpt (a program that
read something of a concurrent run could otherwise print it into the verdict); hidden tests leave only counts."""

from __future__ import annotations

import re

import pytest
from helpers import py

from groupscore.verifiers.code.item import CodeItem
from groupscore.verifiers.code.verify import MAX_COMPILE_ECHO_CHARS, MAX_ECHO_CHARS, score_code

pytestmark = pytest.mark.usefixtures("jail_available")  # a harmless probe jail first (conftest.py)


CALL = [{"type": "call", "fn": "f", "args": [1], "expected": 2}]
ASSERT = [{"type": "assert", "code": "assert f(1) == f(2)"}]
RESIDUAL = [{"type": "assert", "code": "for i in [1]:\n    assert f(i) == 2, f(i)"}]
STDIO = [{"type": "stdio", "stdin": "", "stdout": "2\n"}]

# Each program produces a long run of one letter where a reason could quote it; the run that reaches the reason must
# stay within the bound.
CASES = {
    "stdout": ("print('Z' * 5000)", STDIO, "Z"),
    "stderr of a crash": ("import sys\nsys.stderr.write('Z' * 5000)\nsys.exit(3)", STDIO, "Z"),
    "exception text": ("def f(x):\n    raise ValueError('Z' * 5000)", CALL, "Z"),
    "exception type name": ("def f(x):\n    raise type('Z' * 3000, (Exception,), {})()", CALL, "Z"),
    "returned string": ("def f(x):\n    return 'Z' * 5000", CALL, "Z"),
    "returned bytes": ("def f(x):\n    return b'Z' * 5000", CALL, "Z"),
    "returned list": ("def f(x):\n    return ['ZZZZ'] * 5000", CALL, "Z"),
    "returned values of a converted assert": ("def f(x):\n    return 'Z' * 5000 + str(x)", ASSERT, "Z"),
    "in-jail check message": ("def f(x):\n    return 'Z' * 5000", RESIDUAL, "Z"),
    "import error": ("raise ValueError('Z' * 5000)\ndef f(x):\n    return 2", CALL, "Z"),
}


def longest_run(text: str, letter: str) -> int:
    return max((len(m) for m in re.findall(f"{letter}+", text)), default=0)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_public_failure_quotes_a_bounded_excerpt_of_program_output(name):
    program, tests, letter = CASES[name]
    verdict = score_code(CodeItem(completion=py(program), tests=tests, time_limit_s=3.0))
    assert verdict.reward == 0.0
    assert "first public failure" in verdict.reason  # reasons are kept
    assert 0 < longest_run(verdict.reason, letter) <= MAX_ECHO_CHARS, verdict.reason


def test_program_output_reaches_the_reason_on_one_line_without_control_characters():
    program = "print('x\\n\\x1b[2J\\rfake: 1/1 tests passed\\u202e\\u00e9\\x00')"
    verdict = score_code(CodeItem(completion=py(program), tests=STDIO))
    assert verdict.reward == 0.0
    assert all(ch.isprintable() and ord(ch) < 128 for ch in verdict.reason), repr(verdict.reason)


def test_a_compiler_message_is_bounded_too():
    program = "```c\n#error " + "Z" * 3000 + "\nint main(void) { return 0; }\n```"
    verdict = score_code(CodeItem(completion=program, language="c", tests=STDIO))
    assert verdict.status == "error" and "compile error" in verdict.reason
    assert 0 < longest_run(verdict.reason, "Z") <= MAX_COMPILE_ECHO_CHARS, verdict.reason


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_hidden_failure_leaves_only_counts(name):
    program, tests, _ = CASES[name]
    public = [{"type": "call", "fn": "g", "args": [], "expected": 1}]
    verdict = score_code(
        CodeItem(
            completion=py(program + "\ndef g():\n    return 1\n"), tests=public, hidden_tests=tests, time_limit_s=3.0
        )
    )
    assert verdict.details["hidden_passed"] == 0
    # Only a public failure (here: the program failing to load at all) is described; the hidden one is a count.
    counts, _, public_failure = verdict.reason.partition("; first public failure, ")
    assert re.fullmatch(
        r"\d+/\d+ tests passed \(public \d/1, hidden 0/1\)(; some assertions ran inside the jail "
        r"\(weaker mode\))?",
        counts,
    ), verdict.reason
    assert ("Z" in public_failure) == (name == "import error"), verdict.reason
    assert "Z" not in verdict.model_dump_json(exclude={"extracted", "reason"})
