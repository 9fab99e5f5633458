"""The length verifier: full reward inside the range, a linear or hard penalty outside, always within [0, 1]."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from groupscore.schema.verdict import Status
from groupscore.verifiers.registry import describe_error, parse_item, score_item


def score(completion: str, **fields):
    return score_item(parse_item({"verifier": "length", "completion": completion, **fields}))


def words(n: int) -> str:
    return " ".join(["word"] * n)


@pytest.mark.parametrize(
    "n, expected",
    [
        (10, 1.0),
        (15, 1.0),
        (20, 1.0),  # inside [10, 20]
        (5, 0.5),
        (0, 0.0),  # short: relative to min=10
        (30, 0.5),
        (40, 0.0),
        (99, 0.0),  # long: relative to max=20
    ],
)
def test_relative_linear_penalty(n, expected):
    assert score(words(n), min=10, max=20).reward == pytest.approx(expected)


def test_statuses_follow_the_reward():
    assert score(words(12), min=10, max=20).status == Status.correct
    assert score(words(25), min=10, max=20).status == Status.partial
    assert score(words(45), min=10, max=20).status == Status.incorrect


def test_configured_slope_is_reward_lost_per_unit():
    assert score(words(23), min=10, max=20, slope=0.1).reward == pytest.approx(0.7)
    assert score(words(7), min=10, max=20, slope=0.25).reward == pytest.approx(0.25)
    assert score(words(40), min=10, max=20, slope=0.1).reward == 0.0


def test_hard_penalty_is_zero_outside():
    assert score(words(21), min=10, max=20, penalty="hard").reward == 0.0
    assert score(words(20), min=10, max=20, penalty="hard").reward == 1.0


def test_units_chars_and_whitespace_tokens():
    text = "  one\ttwo\n\nthree   four  "
    assert score(text, unit="tokens", min=4, max=4).reward == 1.0
    assert score(text, unit="chars", min=len(text.strip()), max=len(text.strip())).reward == 1.0
    assert score(text, unit="chars", strip=False, max=len(text)).reward == 1.0
    assert score("é" * 5, unit="chars", max=5).reward == 1.0  # characters, not bytes


def test_open_upper_bound():
    assert score(words(10_000), min=5).reward == 1.0
    assert score(words(1), min=5).reward == pytest.approx(0.2)


@given(
    text=st.text(max_size=300),
    low=st.integers(0, 60),
    span=st.integers(0, 60),
    unit=st.sampled_from(["chars", "tokens"]),
    slope=st.one_of(st.none(), st.floats(0.001, 1.0)),
)
@settings(max_examples=150, deadline=None)
def test_reward_in_unit_interval_and_one_exactly_inside(text, low, span, unit, slope):
    high = low + span
    if low == 0 and high == 0:
        high = 1
    verdict = score(text, unit=unit, min=low, max=high, slope=slope)
    n = len(text.strip()) if unit == "chars" else len(text.split())
    assert 0.0 <= verdict.reward <= 1.0
    assert (verdict.reward == 1.0) == (low <= n <= high)
    assert verdict.details["length"] == n


@pytest.mark.parametrize(
    "fields, path",
    [
        ({"min": 5, "max": 2}, "length"),
        ({}, "length"),  # no range at all
        ({"min": -1, "max": 2}, "length.min"),
        ({"max": 10, "unit": "bytes"}, "length.unit"),
        ({"max": 10, "slope": 0}, "length.slope"),
        ({"max": 10, "penalty": "quadratic"}, "length.penalty"),
    ],
)
def test_bad_fields_are_validation_errors_with_the_field_path(fields, path):
    with pytest.raises(ValidationError) as info:
        parse_item({"verifier": "length", "completion": "x", **fields})
    assert describe_error(info.value).startswith(path + ":")
