"""Host-side comparison of what a program produced with what a test expects: stdout text, and JSON call results."""

from __future__ import annotations

import math
from typing import Any, Literal

StdioCompare = Literal["exact", "whitespace", "float"]


def _number(token: str) -> float | None:
    try:
        value = float(token)
    except ValueError:
        return None
    return value


def _close(actual: float, expected: float, tol: float) -> bool:
    if math.isnan(expected) or math.isnan(actual):
        return math.isnan(expected) and math.isnan(actual)
    if math.isinf(expected) or math.isinf(actual):
        return actual == expected
    return abs(actual - expected) <= tol * max(1.0, abs(expected))


def stdout_matches(actual: str, expected: str, mode: StdioCompare = "whitespace", float_tol: float = 1e-6) -> bool:
    """exact: byte for byte (after decoding); whitespace: same lines of same words, trailing blanks ignored;
    float: same whitespace-separated tokens, numbers equal within float_tol (absolute, or relative above 1)."""
    if mode == "exact":
        return actual == expected
    if mode == "whitespace":
        return [line.split() for line in actual.strip().splitlines()] == [line.split() for line in expected.strip().splitlines()]
    got, want = actual.split(), expected.split()
    if len(got) != len(want):
        return False
    for g, w in zip(got, want):
        if g == w:
            continue
        gn, wn = _number(g), _number(w)
        if gn is None or wn is None or not _close(gn, wn, float_tol):
            return False
    return True


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
