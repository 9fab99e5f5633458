"""Hidden tests stay hidden: no input, expected value, assert text or message of theirs reaches any verdict field,
error message or log line, whatever way the program fails. Only counts leave."""

from __future__ import annotations

import logging

import pytest

from groupscore.verifiers.code.item import CodeItem
from groupscore.verifiers.code.verify import score_code

# Every hidden detail carries one of these markers; none may show up in a verdict.
HIDDEN_MARKS = ("HIN", "HOUT", "HTXT")

PUBLIC = [{"type": "call", "fn": "echo", "args": ["public-in"], "expected": "public-in"}]
HIDDEN = [
    {"type": "call", "fn": "echo", "args": ["HIN-call-1"], "expected": "HOUT-call-1"},
    {"type": "call", "fn": "echo", "args": [], "kwargs": {"text": "HIN-kw-2"}, "expected": "HOUT-kw-2"},
    {"type": "assert", "code": "assert echo('HIN-assert-3') == 'HOUT-assert-3', 'HTXT-message-3'"},
    {"type": "assert", "code": "for s in ['HIN-loop-4']:\n    assert echo(s) == 'HOUT-loop-4', 'HTXT-message-4'"},
    {
        "type": "humaneval",
        "entry_point": "echo",
        "test": "HTXT_META = 'HTXT-meta-5'\ndef check(candidate):\n    assert candidate('HIN-he-5') == 'HOUT-he-5'\n"
        "    for s in ['HIN-he-6']:\n        assert candidate(s) == 'HOUT-he-6', 'HTXT-message-6'\n",
    },
    {"type": "call", "fn": "echo", "args": ["HIN-slow-7"], "expected": "HOUT-slow-7", "time_limit_s": 0.5},
]

PROGRAMS = {
    "wrong value echoing the input": "def echo(text='x'):\n    return text\n",
    "exception quoting the input": "def echo(text='x'):\n    if text != 'public-in':\n        raise ValueError('got ' + text)\n    return text\n",
    "prints the input everywhere": "import sys\ndef echo(text='x'):\n    print(text); sys.stderr.write(text)\n    return text + '!'\n",
    "hangs on hidden input": "def echo(text='x'):\n    while text != 'public-in':\n        pass\n    return text\n",
    "returns an object": "class Box:\n    def __repr__(self): return 'Box'\ndef echo(text='x'):\n    return text if text == 'public-in' else Box()\n",
    "dies on hidden input": "import os\ndef echo(text='x'):\n    if text != 'public-in':\n        os._exit(3)\n    return text\n",
}


def assert_no_hidden_detail(text: str) -> None:
    for mark in HIDDEN_MARKS:
        assert mark not in text, f"{mark} leaked: {text[:2000]}"


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_verdict_carries_only_counts_of_hidden_tests(name, caplog, capfd):
    caplog.set_level(logging.DEBUG)
    item = CodeItem(completion=f"```python\n{PROGRAMS[name]}```", tests=PUBLIC, hidden_tests=HIDDEN, time_limit_s=1.0)
    verdict = score_code(item)
    assert verdict.details["public_total"] == 1 and verdict.details["hidden_total"] == len(HIDDEN)
    assert verdict.details["hidden_passed"] == 0
    assert_no_hidden_detail(verdict.model_dump_json())
    assert_no_hidden_detail(caplog.text)
    captured = capfd.readouterr()
    assert_no_hidden_detail(captured.out + captured.err)


def test_public_failures_are_described():
    item = CodeItem(
        completion="```python\ndef echo(text='x'):\n    return 'nope'\n```", tests=PUBLIC, hidden_tests=HIDDEN[:1]
    )
    verdict = score_code(item)
    assert "echo('public-in') returned 'nope'" in verdict.reason
    assert_no_hidden_detail(verdict.model_dump_json())


@pytest.mark.parametrize(
    "bad_test",
    [
        {"type": "assert", "code": "assert echo('HIN-bad') == ('HOUT-bad'"},
        {
            "type": "humaneval",
            "entry_point": "echo",
            "test": "def HTXT_not_check(candidate):\n    assert candidate('HIN-x') == 'HOUT-x'\n",
        },
        {"type": "assert", "code": "x = 'HTXT-no-assert'"},
    ],
)
def test_a_malformed_hidden_test_is_reported_by_position_only(bad_test):
    item = CodeItem(
        completion="```python\ndef echo(t):\n    return t\n```", tests=PUBLIC, hidden_tests=[HIDDEN[0], bad_test]
    )
    verdict = score_code(item)
    assert verdict.status == "error" and "hidden_tests[1]" in verdict.reason
    assert_no_hidden_detail(verdict.model_dump_json())


def test_a_malformed_public_test_is_described():
    item = CodeItem(
        completion="```python\ndef echo(t):\n    return t\n```", tests=[{"type": "assert", "code": "x = 1"}]
    )
    verdict = score_code(item)
    assert verdict.status == "error" and "tests[0]" in verdict.reason and "no assertion" in verdict.reason


def test_stdio_hidden_tests_stay_hidden():
    item = CodeItem(
        completion="```python\nimport sys\ndata = sys.stdin.read()\nprint(data.upper())\n"
        "raise SystemExit('failing with ' + data)\n```",
        tests=[{"type": "stdio", "stdin": "pub", "stdout": "PUB"}],
        hidden_tests=[{"type": "stdio", "stdin": "HIN-stdio", "stdout": "HOUT-stdio"}],
    )
    verdict = score_code(item)
    assert verdict.details["hidden_passed"] == 0
    assert_no_hidden_detail(verdict.model_dump_json())
