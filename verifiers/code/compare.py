"""Host-side comparison of what a program produced with what a test expects: stdout text, and JSON call results."""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Any, Literal

StdioCompare = Literal["exact", "whitespace", "float"]

# Number tokens of stdout, as a judge reads them (no `1_000`, no `0x10`, no spaces: float() takes all of those).
_INTEGER = re.compile(r"[+-]?[0-9]+")
# Possessive quantifiers: `[0-9]+\.?[0-9]*` could split a run of digits n ways, and a long token that fails (a million
# digits, then `x`) cost n*n/2 steps of backtracking: hours of host CPU for one line of output.
_NUMBER = re.compile(
    r"[+-]?+(?:[0-9]++(?:\.[0-9]*+)?+|\.[0-9]++)(?:[eE][+-]?+[0-9]++)?+|[+-]?+(?:inf|infinity|nan)", re.IGNORECASE
)


def _tokens_match(got: str, want: str, tol: float) -> bool:
    """One token of `float` comparison. An integer expected token is exact: the output must be a number of exactly
    that value (`1000000`, `1000000.0` and `1e6` match `1000000`; `1000001` does not). The tolerance is for expected
    tokens written as real numbers (with a decimal point or an exponent); anything else must be equal as text."""
    if got == want:
        return True
    if not _NUMBER.fullmatch(got):
        return False
    if _INTEGER.fullmatch(want):
        # Decimal: exact whatever the size (float(123456789.00000001) is 123456789.0, a 20-digit int is rounded, and
        # two different 400-digit answers are both float('inf')); int() would refuse more than 4300 digits.
        try:
            value = Decimal(got)
            return value.is_finite() and value == Decimal(want)
        except ArithmeticError:  # an exponent beyond what Decimal holds: not this integer
            return False
    if not _NUMBER.fullmatch(want):
        return False
    return _close(float(got), float(want), tol)


def _close(actual: float, expected: float, tol: float) -> bool:
    if math.isnan(expected) or math.isnan(actual):
        return math.isnan(expected) and math.isnan(actual)
    if math.isinf(expected) or math.isinf(actual):
        return actual == expected
    return abs(actual - expected) <= tol * max(1.0, abs(expected))


def stdout_matches(actual: str, expected: str, mode: StdioCompare = "whitespace", float_tol: float = 1e-6) -> bool:
    """exact: byte for byte (after decoding); whitespace: same lines of same words, trailing blanks ignored;
    float: same whitespace-separated tokens; where the expected token is a real number (`0.5`, `1e-3`), a number within
    float_tol of it (absolute, or relative above 1); where it is an integer, a number of exactly its value."""
    if mode == "exact":
        return actual == expected
    if mode == "whitespace":
        return [line.split() for line in actual.strip().splitlines()] == [
            line.split() for line in expected.strip().splitlines()
        ]
    got, want = actual.split(), expected.split()
    return len(got) == len(want) and all(_tokens_match(g, w, float_tol) for g, w in zip(got, want))


def as_json_data(value: Any) -> Any:
    """A plain value as JSON would carry it: tuples become lists (JSON has no tuples), the rest is unchanged."""
    if type(value) in (list, tuple):
        return [as_json_data(v) for v in value]
    if type(value) is dict:
        return {k: as_json_data(v) for k, v in value.items()}
    return value


def json_values_equal(actual: Any, expected: Any, float_tol: float | None = None) -> bool:
    """Python equality on JSON-shaped data; with float_tol, numbers (not bools) compare within that tolerance."""
    actual = as_json_data(actual)
    if float_tol is None:
        try:
            return bool(actual == expected)
        except RecursionError:
            return False
    return _tolerant_equal(actual, expected, float_tol)


def _tolerant_equal(actual: Any, expected: Any, tol: float) -> bool:
    numeric = (int, float)
    if type(actual) in numeric and type(expected) in numeric and (type(actual) is float or type(expected) is float):
        try:
            return _close(float(actual), float(expected), tol)
        except OverflowError:  # an int beyond float range
            return actual == expected
    if type(actual) is list and type(expected) is list:
        return len(actual) == len(expected) and all(_tolerant_equal(a, e, tol) for a, e in zip(actual, expected))
    if type(actual) is dict and type(expected) is dict:
        return actual.keys() == expected.keys() and all(_tolerant_equal(actual[k], expected[k], tol) for k in expected)
    return bool(actual == expected)
