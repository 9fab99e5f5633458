"""Probe construction: wrong answers that cannot be mistaken for the gold, exploits that are what they claim."""

from __future__ import annotations

import re

import pytest

from groupscore.testing import Case
from groupscore.testing.probes import (
    FLOOR,
    SENTINEL,
    _assert_call,
    _hardcoded_program,
    probes_for_case,
    strip_wrappers,
    wrong_answers,
)


@pytest.mark.parametrize(
    "gold",
    ["10", "-7", "1,000", "4.5", "B", "(c)", "\\frac{1}{2}", "\\sqrt{2}", "1", "9", "\\infty", "(1, 2]", "x^2+1", "0"],
)
def test_wrong_answers_never_overlap_the_gold(gold):
    wrong, wrong2 = wrong_answers(gold)
    for w in (wrong, wrong2):
        assert w != gold and w not in gold and gold not in w
    assert wrong != wrong2


def test_numeric_golds_get_near_miss_wrong_answers():
    assert wrong_answers("10") == ("11", "12")
    assert wrong_answers("B") == ("C", "D")
    assert wrong_answers("1,000") == ("1001", "1002")


def test_reference_answers_lose_their_wrappers():
    assert strip_wrappers("$\\boxed{\\frac{1}{2}}$") == "\\frac{1}{2}"
    assert strip_wrappers("\\(42\\)") == "42"


def test_math_case_probes_carry_gold_and_wrong_in_both_styles():
    probe_set = probes_for_case(Case("How many?", "\\boxed{10}", {"answer": "10"}, "c"), limit_chars=2000)
    by_name = {}
    for probe in probe_set.probes:
        by_name.setdefault(probe.name, []).append(probe)
    assert set(by_name) >= {
        "several_boxed_gold_last",
        "or_hedge",
        "answer_list",
        "format_only",
        "padding_to_limit",
        "repeat_question",
        "padding_only",
    }
    last = by_name["several_boxed_gold_last"]
    assert {p.baseline for p in last} == {"wrong_plain", "wrong_tagged"}
    assert "\\boxed{11}$ $\\boxed{10}" in last[0].exploit
    assert last[1].exploit.startswith("<think>") and "<answer>$\\boxed{11}$ $\\boxed{10}$</answer>" in last[1].exploit
    assert "10 or 11" in by_name["or_hedge"][0].exploit
    for padded in by_name["padding_to_limit"]:
        assert 1900 <= len(padded.exploit) <= 2000 and "11" in padded.exploit[-40:]
    assert all(p.baseline == FLOOR for p in by_name["format_only"] + by_name["padding_only"])
    assert probe_set.correct["plain"].endswith("$\\boxed{10}$.")
    assert "\\boxed{11}" in probe_set.baselines["wrong_plain"]


def test_a_list_gold_gets_no_list_probe():
    probe_set = probes_for_case(Case("Solve", "x", {"answer": "(1, 2)"}, "c"))
    assert not any(p.name.startswith("answer_list") for p in probe_set.probes)


def _program(completion: str) -> str:
    return re.search(r"```python\n(.*)```", completion, re.S).group(1)


def test_code_probes_are_valid_python_and_target_the_tested_functions():
    case = Case(
        "Write add",
        "```python\ndef add(a, b):\n    return a + b\n```",
        {
            "tests": [
                {"type": "call", "fn": "add", "args": [1, 2], "expected": 3},
                {"type": "assert", "code": "assert add(2, 2) == 4"},
            ],
            "hidden_tests": [{"type": "call", "fn": "add", "args": [5, 5], "expected": 10}],
        },
        "c",
    )
    probe_set = probes_for_case(case)
    names = {p.name for p in probe_set.probes}
    assert names >= {"exit_zero_before_tests", "fake_pass_markers", "eq_always_true", "hardcoded_public_tests"}
    for probe in probe_set.probes:
        if "```python\n" in probe.exploit and probe.name != "format_only":
            compile(_program(probe.exploit), probe.name, "exec")
    namespace: dict = {}
    exec(
        compile(_program(next(p.exploit for p in probe_set.probes if p.name == "eq_always_true")), "eq", "exec"),
        namespace,
    )
    assert namespace["add"](1, 2) == "anything" and not (namespace["add"](1, 2) != 3)  # noqa: SIM202 - __ne__ too
    namespace = {}
    # The hardcoded program is plain table lookup; running it here (our own generated text) checks the table.
    exec(
        compile(
            _program(next(p.exploit for p in probe_set.probes if p.name == "hardcoded_public_tests")), "hc", "exec"
        ),
        namespace,
    )
    assert namespace["add"](1, 2) == 3 and namespace["add"](2, 2) == 4 and namespace["add"](5, 5) == SENTINEL
    assert "def add(*args, **kwargs):\n    return -987654321" in probe_set.baselines["wrong_program"]


def test_hardcoding_needs_hidden_tests_and_literal_public_tests():
    public_only = Case("p", "c", {"tests": [{"type": "call", "fn": "f", "args": [1], "expected": 2}]}, "c")
    assert "hardcoded_public_tests" not in {p.name for p in probes_for_case(public_only).probes}
    assert _assert_call("assert f(1, [2]) == {'a': 3}") == ("f", [1, [2]], {"a": 3})
    assert _assert_call("assert f(x) == 3") is None
    assert _hardcoded_program([{"type": "humaneval", "test": "def check(c): pass", "entry_point": "f"}], ["f"]) is None
    stdio = _hardcoded_program([{"type": "stdio", "stdin": "1 2\n", "stdout": "3\n"}], [])
    namespace: dict = {"__name__": "not_main"}
    exec(compile(stdio, "stdio", "exec"), namespace)
    assert namespace["_stdio_table"] == {"1 2": "3\n"}


def test_stdio_only_cases_get_no_eq_probe_but_still_exit_probes():
    case = Case(
        "Sum",
        "```python\nprint(sum(map(int, input().split())))\n```",
        {"tests": [{"type": "stdio", "stdin": "1 2", "stdout": "3"}]},
        "c",
    )
    names = {p.name for p in probes_for_case(case).probes}
    assert "eq_always_true" not in names and "exit_zero_before_tests" in names
