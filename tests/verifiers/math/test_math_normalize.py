"""Normalisation: the common spellings of one answer come out as one string; different answers stay different."""

from __future__ import annotations

import pytest

from groupscore.verifiers.math.closeness import numbers_equal
from groupscore.verifiers.math.normalize import normalize
from groupscore.verifiers.math.numeric import evaluate, free_variables


@pytest.mark.parametrize(
    "raw, canonical",
    [
        (r"\dfrac{9}{7}", r"\frac{9}{7}"),
        (r"\tfrac{3}{4}", r"\frac{3}{4}"),
        (r"\frac12", r"\frac{1}{2}"),
        (r"\frac1{10}", r"\frac{1}{10}"),
        (r"\left( 1, 2 \right)", "(1,2)"),
        (r"5\text{ cm}", "5"),
        (r"5 \text{cm}^2", "5"),
        (r"12 \mathrm{meters}", "12"),
        ("5 apples", "5"),
        (r"\$1{,}000", "1000"),
        ("1,000", "1000"),
        ("1,000,000", "1000000"),
        ("1 000", "1000"),
        (r"12\,345", "12345"),
        (r"2\frac12", r"\frac{5}{2}"),
        (r"-3\frac{1}{4}", r"-\frac{13}{4}"),
        ("2 1/2", r"\frac{5}{2}"),
        (".5", "0.5"),
        ("2.50", "2.5"),
        ("3.000", "3"),
        (r"50\%", "50\\%"),  # one percentage keeps its sign for the `percent` convention
        (r"90^\circ", "90"),
        (r"90^{\circ}", "90"),
        (r"\$ 12.00", "12"),
        (r"\displaystyle \frac{1}{2}", r"\frac{1}{2}"),
        (r"\text{(B)}", "(B)"),
        (r"14-\mathrm{i}", "14-i"),
        (r"x \le 3", r"x\leq3"),
        (r"\varnothing", r"\emptyset"),
        (r"\mathbb{R}", r"(-\infty,\infty)"),
        ("sqrt(2)+exp(3)", r"\sqrt{2}+\exp(3)"),
        ("1e3", r"1\times10^3"),
        ("\u22122", "-2"),
        (r"6 \text{ or } 7", "6 or 7"),
        (r"\log_2 8", r"\log_2 8"),
    ],
)
def test_spellings_are_normalised(raw, canonical):
    assert normalize(raw) == canonical


def test_a_mixed_number_needs_an_integer_fraction():
    # 2\frac{\pi}{3} is a product, and 2\frac{3}{2} is not a proper mixed number.
    assert normalize(r"2\frac{\pi}{3}") == r"2\frac{\pi}{3}"
    assert normalize(r"2\frac{3}{2}") == r"2\frac{3}{2}"


def test_a_single_letter_in_text_is_kept_not_dropped_as_a_unit():
    assert normalize(r"3+4\mathrm{i}") == "3+4i"
    assert normalize(r"\text{no solution}") == "no solution"


def test_a_list_of_numbers_is_not_read_as_thousands():
    assert normalize("1, 2, 3") == "1,2,3"
    assert normalize("12,34") == "12,34"


@pytest.mark.parametrize(
    "a, b, equal",
    [
        ("0.5", r"\frac{1}{2}", True),
        ("123456788", "123456789", False),  # integers compare exactly, whatever the tolerance
        ("0.3333333333", r"\frac{1}{3}", True),  # a decimal was rounded: tolerance applies
        ("0.333", r"\frac{1}{3}", False),
        (r"e^{16}+1", r"e^{16}-1", False),  # exact forms: only float noise is forgiven
        (r"2\sqrt{2}", r"\sqrt{8}", True),
        (r"\sin(\pi/6)", r"\frac{1}{2}", True),
        (r"3+4i", r"4i+3", True),
        (r"14-i", "14", False),
        (r"\infty", r"\infty", True),
        ("5!", "120", True),
        (r"\binom{5}{2}", "10", True),
        ("|-7|", "7", True),
        (r"\log_2 8", "3", True),
    ],
)
def test_numeric_values(a, b, equal):
    va, vb = evaluate(normalize(a)), evaluate(normalize(b))
    assert va is not None and vb is not None
    assert numbers_equal(va, vb, 1e-6) is equal


@pytest.mark.parametrize("text", [r"10^{10^{10}}", "9999999999!", "2^{99999999}", "x+1", r"\frac{1}{0}", ""])
def test_the_evaluator_refuses_what_it_cannot_bound_or_read(text):
    assert evaluate(text) is None


def test_free_variables_skip_constants_and_commands():
    assert free_variables(r"\sin(x)+y\alpha+e^{i\pi}") == {"x", "y", r"\alpha"}


def test_exact_values_beyond_float_range_still_compare():
    huge = evaluate("2^{2000}")
    assert huge is not None
    assert numbers_equal(huge, evaluate("1.5"), 1e-6) is False
    assert numbers_equal(huge, evaluate("2^{2000}"), 1e-6) is True
    assert numbers_equal(huge, evaluate("2^{2000}+1"), 1e-6) is False
