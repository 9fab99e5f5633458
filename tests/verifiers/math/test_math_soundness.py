"""Where a sampled identity may pay, and what an `a:b` answer is (issue 10, family 3): the parts under the fixtures."""

from __future__ import annotations

import pytest

from groupscore.verifiers.math.conventions import conventions_for
from groupscore.verifiers.math.grader import compare_answers
from groupscore.verifiers.math.normalize import normalize
from groupscore.verifiers.math.numeric import evaluate
from groupscore.verifiers.math.structures import ClockTime, Ratio, parse_structure

POINT = {"x": complex(-1.13, 0.0), "n": complex(2.72, 0.0)}


@pytest.mark.parametrize(
    "text", ["x^2+1", "\\frac{x-1}{x+1}", "e^{2x}", "2^x", "\\sin x+\\cos(3x)", "\\sqrt{2}x", "|3-5|x", "\\sqrt{4}x^3"]
)
def test_analytic_expressions_are_sound_to_sample(text):
    value = evaluate(text, POINT)
    assert value is not None and value.sample_sound


@pytest.mark.parametrize(
    "text",
    ["|x-1|", "\\sqrt{x^2}", "\\sqrt{(x-2)^2}", "x^{1/2}", "\\ln(x^2)", "\\log_2 x", "x^x", "|x|+1", "\\sqrt[3]{x}"],
)
def test_piecewise_and_branchy_expressions_are_not(text):
    value = evaluate(text, {"x": complex(2.72, 0.0)})
    assert value is not None and not value.sample_sound


def test_without_variables_everything_is_a_constant():
    assert evaluate("|-3|+\\sqrt{2}").sample_sound


@pytest.mark.parametrize(
    "pred, gold",
    [
        ("\\lceil x \\rceil - 1", "\\lfloor x \\rfloor"),
        ("\\left\\lfloor \\frac{n}{2} \\right\\rfloor + 1", "\\left\\lceil \\frac{n}{2} \\right\\rceil"),
        ("|x-1|", "1-x"),
        ("\\sqrt{(x-2)^2}", "2-x"),
        ("\\max(x,1)", "1"),
        ("\\min(x,1)", "x"),
        ("\\gcd(n,2)", "1"),
        ("\\operatorname{lcm}(n,2)", "2n"),
        ("\\{x\\}", "x"),
        ("y=|x-3|", "y=3-x"),
    ],
)
def test_agreeing_at_samples_does_not_pay_without_a_proof(pred, gold):
    for symbolic in (False, True):
        assert compare_answers(normalize(pred), normalize(gold), 1e-6, symbolic).equal is not True


@pytest.mark.parametrize(
    "pred, gold",
    [
        ("\\sqrt{x}\\sqrt{x}", "x"),
        ("n!", "n(n-1)!"),
        ("\\frac{x^2-1}{x-1}", "x+1"),
        ("\\binom{n}{2}", "\\frac{n(n-1)}{2}"),
        ("2^{x+1}", "2\\cdot 2^x"),
    ],
)
def test_identities_still_pay(pred, gold):
    assert compare_answers(normalize(pred), normalize(gold), 1e-6, symbolic=True).equal is True


@pytest.mark.parametrize(
    "text, expected",
    [
        ("9:00", ClockTime(9, 0, 0, "", "9:00")),
        ("12:30pm", ClockTime(12, 30, 0, "pm", "12:30pm")),
        ("1:05:30", ClockTime(1, 5, 30, "", "1:05:30")),
        ("3:2", Ratio(("3", "2"))),
        ("1:2:3", Ratio(("1", "2", "3"))),
        ("25:30", Ratio(("25", "30"))),  # no such hour
        ("13:00pm", Ratio(("13", "00pm"))),  # no such hour on a 12-hour clock
    ],
)
def test_colon_answers_are_times_or_ratios(text, expected):
    assert parse_structure(text) == expected


@pytest.mark.parametrize(
    "raw, normal",
    [
        ("9:00 a.m.", "9:00am"),
        ("9\\text{ PM}", "9:00pm"),
        ("9 p.m.", "9:00pm"),
        ("11:30\\,\\text{pm}", "11:30pm"),
        ("2am", "2am"),
        ("x \\colon y", "x:y"),
    ],
)
def test_meridiem_spellings_normalise(raw, normal):
    assert normalize(raw) == normal


def test_a_question_about_ratios_reads_times_as_ratios():
    ratio = conventions_for("default", "Find the ratio of the areas of the two triangles.")
    plain = conventions_for("default", "At what time does the train arrive?")
    assert ratio.ratio_question and not plain.ratio_question
    assert compare_answers("1:15", "2:30", 1e-6, False, ratio).equal is True
    assert compare_answers("1:15", "2:30", 1e-6, False, plain).equal is False
