"""stdio `compare: "float"`: the tolerance is for numbers written as real numbers; integer tokens compare exactly."""

from __future__ import annotations

import pytest

from groupscore.verifiers.code.compare import stdout_matches
from groupscore.verifiers.code.item import CodeItem
from groupscore.verifiers.code.verify import score_code


@pytest.mark.parametrize(
    "got,want",
    [
        ("123456800", "123456789"),  # the examples: within 1e-6 relative, but another integer
        ("1000001", "1000000"),
        ("1000000.1", "1000000"),  # a real number near an integer answer is not that integer
        ("123456789.00000001", "123456789"),  # float() would round this one to the answer
        ("12345678901234567000", "12345678901234567891"),  # beyond float precision: 20-digit integers too
        ("1.2345678901234567e19", "12345678901234567891"),
        ("3 1000001", "3 1000000"),
        ("1_000_000", "1000000"),  # float() reads these; a judge does not
        ("0x10", "16"),
        ("inf", "1000000"),
        ("nan", "0"),
        ("9" * 400, "9" * 399 + "8"),  # both float('inf') once read as floats
        ("1" * 5000 + "0", "1" * 5000 + "1"),  # beyond int()'s 4300-digit limit
        ("1e999999999999999999999", "1"),  # beyond Decimal's exponent range: no match, no crash
        ("1e-999999999999999999999", "0"),
    ],
)
def test_integer_tokens_compare_exactly(got, want):
    assert not stdout_matches(got, want, "float", 1e-6)


@pytest.mark.parametrize(
    "got,want",
    [
        ("1000000", "1000000"),
        ("1000000.0", "1000000"),  # decided: a number of exactly the expected integer's value matches it
        ("1e6", "1000000"),
        ("+7", "7"),
        ("-0", "0"),
        ("2.000000000", "2"),
        ("12345678901234567891", "12345678901234567891"),
        ("0" + "7" * 5000, "7" * 5000),
    ],
)
def test_an_integer_token_matches_any_number_of_exactly_its_value(got, want):
    assert stdout_matches(got, want, "float", 1e-6)


@pytest.mark.parametrize(
    "got,want,ok",
    [
        ("0.3333333", "0.33333333", True),
        ("1000000.5", "1000000.0", True),  # relative tolerance above 1, for an expected real number
        ("1000001.5", "1000000.0", False),
        ("2", "2.0000001", True),  # an integer output near an expected real number
        ("1e3", "1000.0", True),
        ("0.334", "0.333", False),
        ("nan", "nan", True),
        ("-inf", "-inf", True),
        ("x", "1.5", False),
    ],
)
def test_the_tolerance_applies_to_expected_real_numbers(got, want, ok):
    assert stdout_matches(got, want, "float", 1e-6) is ok


def test_a_stdio_item_with_float_comparison_scores_integer_answers_exactly():
    tests = [{"type": "stdio", "stdin": "", "stdout": "123456789 0.5\n", "compare": "float"}]
    near = score_code(CodeItem(completion="```python\nprint(123456800, 0.5000001)\n```", tests=tests))
    assert near.reward == 0.0, near.reason
    exact = score_code(CodeItem(completion="```python\nprint(123456789, 0.5000001)\n```", tests=tests))
    assert exact.reward == 1.0, exact.reason
