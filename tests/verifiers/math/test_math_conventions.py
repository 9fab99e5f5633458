"""The comparison conventions (percent, decimal comma, significant digits, order, renaming, profiles) in isolation."""

from __future__ import annotations

import pytest

from groupscore.verifiers.math.closeness import rounds_to
from groupscore.verifiers.math.conventions import DERIVED, PROFILES, Conventions, conventions_of
from groupscore.verifiers.math.grader import compare_answers
from groupscore.verifiers.math.item import MathItem
from groupscore.verifiers.math.normalize import normalize
from groupscore.verifiers.math.numeric import evaluate
from groupscore.verifiers.math.verify import score_math


def equal(pred: str, gold: str, **conventions: object) -> bool | None:
    return compare_answers(normalize(pred), normalize(gold), 1e-6, True, Conventions(**conventions)).equal


@pytest.mark.parametrize(
    "literal, exact, digits, expected",
    [
        ("0.3333", "\\frac{1}{3}", 4, True),
        ("0.333", "\\frac{1}{3}", 4, False),  # too few digits
        ("0.3334", "\\frac{1}{3}", 4, False),  # not the rounding
        ("0.6667", "\\frac{2}{3}", 4, True),
        ("0.6666", "\\frac{2}{3}", 4, False),  # truncated, not rounded
        ("2.5", "\\frac{5}{2}", 2, True),
        ("0.125", "\\frac{1}{8}", 2, True),  # exact: three digits are at least two
        ("3.1416", "\\pi", 5, True),
        ("3.1415", "\\pi", 5, False),
        ("0.0", "0", 1, False),
        ("1" + "0" * 40 + ".5", "1", 2, False),
    ],
)
def test_a_decimal_pays_only_as_a_correct_rounding_of_enough_digits(literal, exact, digits, expected):
    value = evaluate(exact)
    assert value is not None and rounds_to(literal, value, digits) is expected


def test_a_decimal_reference_is_no_exact_value_to_round():
    assert not rounds_to("0.33", evaluate("0.333"), 2)


@pytest.mark.parametrize(
    "pred, gold, percent, expected",
    [
        ("25\\%", "25", "number", True),
        ("25\\%", "0.25", "number", False),
        ("25\\%", "25", "fraction", False),
        ("25\\%", "0.25", "fraction", True),
        ("0.25", "25\\%", "fraction", True),
        ("25\\%", "25", "both", True),
        ("25\\%", "0.25", "both", True),
        ("25\\%", "0.26", "both", False),
        ("12.5\\%", "\\frac{1}{8}", "both", True),
        ("10\\%, 20\\%", "0.1, 0.2", "both", False),  # lists read as written
    ],
)
def test_percent_readings(pred, gold, percent, expected):
    assert equal(pred, gold, percent=percent) is expected


def comma_equal(pred: str, gold: str, decimal_comma: bool) -> bool | None:
    reading = "any" if decimal_comma else "plain"
    return compare_answers(normalize(pred, reading), normalize(gold, reading), 1e-6, True).equal


@pytest.mark.parametrize(
    "pred, gold, by_default, with_option",
    [
        ("1,5", "1.5", True, True),  # a comma before fewer than three digits is no digit group
        ("1,22", "1.22", True, True),
        ("0,111", "0.111", True, True),  # a first group of 0 is no group
        ("-0,5", "-0.5", True, True),
        ("1000,99", "1000.99", True, True),  # nor is a first group of four digits
        ("1,500", "1.5", False, True),  # ambiguous: 1500 by default, 1.5 under the convention
        ("1,500", "1500", True, False),
        ("1,000", "1", False, True),
        ("1,5", "1,5", True, True),
        ("4, 5", "4.5", False, False),  # with a space it is a list
        ("(1,5)", "(1.5)", False, False),  # only a whole answer is read as a decimal
    ],
)
def test_decimal_comma(pred, gold, by_default, with_option):
    assert comma_equal(pred, gold, False) is by_default
    assert comma_equal(pred, gold, True) is with_option


@pytest.mark.parametrize(
    "completion, answer, reward",
    [
        ("1,22", "1.22", 1.0),  # plain text: a decimal comma, as Math-Verify reads it
        ("The answer is 0,111", "0.111", 1.0),
        ("$\\boxed{1,2}$", "1.2", 0.0),  # inside LaTeX math a comma separates items
        ("$\\boxed{1,2}$", "$\\boxed{1}\\boxed{2}$", 1.0),
        ("1,2", "$1, 2$", 0.0),  # one reading per text: plain `1,2` is 1.2, never also the list
        ("$1,2$", "1.2", 0.0),
    ],
)
def test_a_decimal_comma_is_read_in_plain_text_only(completion, answer, reward):
    assert score_math(MathItem(completion=completion, answer=answer)).reward == reward


def test_order_any_makes_tuples_order_free_and_nothing_else():
    assert equal("(2,1)", "(1,2)") is False
    assert equal("(2,1)", "(1,2)", order="any") is True
    assert equal("(2,3)", "(1,2)", order="any") is False
    assert equal("[1,2)", "(1,2]", order="any") is False  # intervals keep their ends


@pytest.mark.parametrize(
    "pred, gold, expected",
    [
        ("f(y)", "f(x)", True),
        ("y^2+1", "x^2+1", True),
        ("f(y)=y^2", "f(x)=x^2", True),
        ("y^2+x", "x^2+x", False),
        ("\\alpha+1", "x+1", False),
        ("y^2+2", "x^2+1", False),
    ],
)
def test_renaming_one_variable(pred, gold, expected):
    assert equal(pred, gold, rename_variables=True) is expected


def test_items_resolve_their_conventions():
    assert conventions_of(MathItem(completion="", answer="1")) is PROFILES["default"]
    mv = conventions_of(MathItem(completion="", answer="1", profile="math_verify"))
    assert mv.percent == "both" and not mv.decimal_comma and not mv.clock_12h
    mixed = conventions_of(MathItem(completion="", answer="1", profile="math_verify", percent="number", clock_12h=True))
    assert mixed.percent == "number" and mixed.clock_12h  # an explicit field wins over the profile
    assert conventions_of(MathItem(completion="", answer="1", question="Find the ratio of AB to BC.")).ratio_question


def test_every_convention_is_an_item_field_and_a_service_default():
    """One list of option names: the conventions, the item model, and what GROUPSCORE_MATH_DEFAULTS may set agree."""
    from dataclasses import fields

    from groupscore.schema.columns import BASE_FIELDS
    from groupscore.service.settings import MATH_DEFAULTABLE

    conventions = {f.name for f in fields(Conventions)} - DERIVED
    assert conventions <= set(MathItem.model_fields)
    assert conventions | {"profile", "reference", "fallback", "strict", "rel_tol", "timeout_s"} == set(MATH_DEFAULTABLE)
    # every option of the item model, and nothing else, may have a service default (the answer and question are data)
    options = set(MathItem.model_fields) - BASE_FIELDS - {"answer", "question"}
    assert set(MATH_DEFAULTABLE) == options
