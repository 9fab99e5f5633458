"""Negation/comparison words and units around an answer's value (verifiers/math/qualifiers.py; red team F5, F6)."""

from __future__ import annotations

import pytest

from groupscore.verifiers.math.item import MathItem
from groupscore.verifiers.math.qualifiers import different_units, qualified_number, units_of, unqualified_in
from groupscore.verifiers.math.verify import score_math


@pytest.mark.parametrize(
    "word",
    [
        "not",
        "never",
        "except",
        "anything but",
        "less than",
        "more than",
        "at least",
        "at most",
        "up to",
        "over",
        "under",
        "fewer than",
        "greater than",
        "below",
        "above",
    ],
)
def test_a_qualified_number_is_not_the_number(word):
    assert unqualified_in(rf"\text{{{word} }} 3", "3")
    verdict = score_math(MathItem(completion=rf"\boxed{{\text{{{word} }} 3}}", answer="3"))
    assert verdict.reward == 0.0 and "qualifies" in verdict.reason


def test_the_reference_may_carry_the_same_qualifier():
    assert not unqualified_in(r"\text{at least } 3", r"\text{at least } 3")
    assert not unqualified_in(r"3 \text{ cm}", "3")


@pytest.mark.parametrize(
    "text, denied",
    [
        ("it is not 4.", True),
        ("less than 4", True),
        ("4 is wrong", True),
        ("4 or more", True),
        ("it is not hard to see that the total is 4", False),
        ("not 10, it is 4", False),
        ("then 4 more", False),
    ],
)
def test_the_fallback_number_in_a_denying_clause(text, denied):
    start = text.rfind("4")
    assert qualified_number(text, start, start + 1) is denied


@pytest.mark.parametrize(
    "text, units",
    [
        (r"3 \text{ cm}^2", {"centimeter^2"}),
        ("3 cm^2", {"centimeter^2"}),
        (r"\text{3 days}", {"day"}),
        (r"\$5", {"dollar"}),
        (r"30^\circ", {"degree"}),
        ("5 km/h", {"kilometer/hour"}),
        (r"5 \text{ kilometers per hour}", {"kilometer/hour"}),
        ("4 square feet", {"foot^2"}),
        (r"12 \text{ square units}", set()),
        (r"2\pi r", set()),
        ("3x", set()),
        (r"x = 3 \text{ or } x = 4", set()),
        (r"9:00 \text{ AM}", set()),
        ("(3, 4)", set()),
    ],
)
def test_units_of(text, units):
    assert units_of(text) == units


def test_different_units_need_a_unit_on_both_sides():
    assert different_units(r"3 \text{ days}", r"3 \text{ weeks}")
    assert different_units(r"3 \text{ m}", r"3 \text{ cm}")
    assert not different_units(r"3 \text{ cm}", r"3 \text{ centimeters}")
    assert not different_units(r"3 \text{ hour}", r"3 \text{ hours}")
    assert not different_units("3", r"3 \text{ cm}")
    assert not different_units(r"3 \text{ cm}", "3")
