"""Round-3b red team of the math reward verifier: what a GRPO policy could aim at after round 3's fixes (math@3).

The invariant, as in tests/verifiers/math/test_math_redteam_round3.py: for one completion and a set of references that exclude each
other, the rewards over the set sum to at most 1; a wrong value earns 0; arithmetic left to do earns 0 when a question
is given; an honest right answer earns 1. Nothing here repeats round 3's attacks (that file,
tests/verifiers/math/test_math_exclusive_references.py, cli/data/math/hedges_round3.jsonl).

Pinned here, as plain tests now that each is closed: a decimal inside arithmetic (`2000000.5 + 0`), under
`\\approx`/`\\ldots` (the sympy path) or in a percent's fraction reading straddling two large integers; a digit window
closed at both ends (`2000000.1` paid 2000000 and 2000000.2); a tuple assignment `(x, y) = (3, 4)` against a list of
assignments matched in the list's text order; the copy guard ignoring references that are lists, tuples, sets or
intervals, or reading a labelled reference's last side as one number; value-changing words missing from the list,
and `squared` laundered by any word before it; and the honest answers the first fixes refused (a decimal more
precise than a rounded reference, calculator float noise, sign words before a fraction or in capitals, plural scale
words). Left, as an `xfail(strict=True)`: a gloss in number words after the value. And the attacks that held: sign
words used as hedges, chains (names at both ends, inside sets and tuples, `\\approx`, `\\neq`), the plain-text
decimal comma against exclusive pairs, label orders and `\\pm` in labelled answers, decimal literals in many
spellings, and the honest written numbers the copy guard accepts.
"""

from __future__ import annotations

import pytest

from groupscore.verifiers.math.item import MathItem
from groupscore.verifiers.math.verify import score_math

PROFILES = ("default", "math_verify")


def _reward(completion: str, answer: str, **options: object) -> float:
    return score_math(MathItem(completion=completion, answer=answer, timeout_s=10.0, **options)).reward


def _paid(completion: str, references: tuple[str, ...], **options: object) -> list[float]:
    return [_reward(completion, reference, **options) for reference in references]


def _boxed(text: str) -> str:
    return f"$\\boxed{{{text}}}$"


# -- holes: a decimal straddles two references ---------------------------------------------------------------------


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize(
    "completion, references",
    [
        ("2000000.5 \\cdot 1", ("2000000", "2000001")),
        ("2000000.5+0", ("2000000", "2000001")),
        ("2000000 + 0.5", ("2000000", "2000001")),
        ("1\\cdot 2000000.5", ("2000000", "2000001")),
        ("2000000.5^{1}", ("2000000", "2000001")),
        ("-(-2000000.5)", ("2000000", "2000001")),
        ("2000000.5 + 0i", ("2000000", "2000001")),
        ("\\sqrt{4000002000000.25}", ("2000000", "2000001")),
        ("1999999.9 \\cdot 1", ("2000000", "2000001")),
        ("2 \\times 10^{6} + 0.5", ("2000000", "2000001")),
        ("2.0000005 \\times 10^{6} \\cdot 1", ("2000000", "2000001")),
        ("2.0000005 \\times 10^{6} + 0", ("2000000", "2000001")),
        ("1000000.5+0", ("1000000", "1000001")),
        ("500000.5+0", ("500000", "500001")),
    ],
)
def test_a_decimal_inside_arithmetic_does_not_straddle_two_integers(profile, completion, references):
    assert sum(_paid(_boxed(completion), references, profile=profile)) <= 1.0


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize(
    "completion",
    ["x \\approx 2000000.5", "2000000.5 \\approx x", "2000000.5\\ldots", "2000000.4999\\ldots"],
)
def test_the_symbolic_path_keeps_the_last_digit_rule(profile, completion):
    assert sum(_paid(_boxed(completion), ("2000000", "2000001"), profile=profile)) <= 1.0


@pytest.mark.parametrize(
    "options",
    [
        {"profile": "math_verify"},
        {"percent": "both"},
        {"percent": "fraction"},
        {"profile": "math_verify", "question": "What is the total?"},
    ],
)
def test_a_percent_does_not_straddle_two_integers(options):
    assert sum(_paid(_boxed("2000000050.5\\%"), ("20000000", "20000001"), **options)) <= 1.0


@pytest.mark.parametrize(
    "completion, references",
    [
        ("2000000.1", ("2000000", "2000000.2")),
        ("1999999.9", ("2000000", "1999999.8")),
        ("2000000.10", ("2000000", "2000000.2")),
        ("1999999.90", ("2000000", "1999999.8")),
    ],
)
def test_a_decimal_does_not_pay_both_neighbours_of_its_last_digit(completion, references):
    assert sum(_paid(_boxed(completion), references)) <= 1.0


# -- holes: labels -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize(
    "completion, references",
    [
        ("(x, y) = (3, 4)", ("x = 3, y = 4", "y = 3, x = 4")),
        ("(x,y)=(3,4)", ("x = 3, y = 4", "y = 3 \\text{ and } x = 4")),
        ("(y, x) = (3, 4)", ("x = 3, y = 4", "y = 3, x = 4")),
        ("(y, x) = (4, 3)", ("(3, 4)", "x = 4, y = 3")),
        ("(b, a) = (3, 4)", ("(4, 3)", "x = 3, y = 4")),
    ],
)
def test_a_tuple_assignment_keeps_its_labels_against_assignments(profile, completion, references):
    assert sum(_paid(_boxed(completion), references, profile=profile)) <= 1.0


@pytest.mark.parametrize("profile", PROFILES)
def test_a_tuple_assignment_is_read_by_its_labels(profile):
    assert _paid(_boxed("(y, x) = (3, 4)"), ("x = 3, y = 4", "x = 4, y = 3"), profile=profile) == [0.0, 1.0]


# -- holes: the copy guard -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "completion, answer",
    [
        ("7+3, 2 \\cdot 2", "10, 4"),
        ("(7+3, 2 \\cdot 2)", "(10, 4)"),
        ("\\{7+3, 2\\cdot 2\\}", "\\{4, 10\\}"),
        ("[7+3, 2 \\cdot 2]", "[10, 4]"),
        ("7+3 \\text{ and } 2 \\cdot 2", "10 \\text{ and } 4"),
    ],
)
def test_a_copy_is_no_answer_against_several_numbers(completion, answer):
    assert _reward(_boxed(completion), answer, question="Compute 7+3 and 2 \\cdot 2.") == 0.0


# -- holes: words that change the value ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "completion, wrong",
    [
        ("1 \\text{ third}", "1"),
        ("1 \\text{ tenth}", "1"),
        ("3 \\text{ thousandth}", "3"),
        ("3 \\text{ quadrillion}", "3"),
        ("3 \\text{ bn}", "3"),
        ("3 \\text{ mn}", "3"),
        ("3 \\text{ quadrupled}", "3"),
        ("3 \\text{ halved}", "3"),
        ("\\text{halved } 3", "3"),
        ("3 \\text{ tenfold}", "3"),
        ("3 \\text{ inverted}", "3"),
        ("\\text{the negation of } 3", "3"),
        ("\\text{sqrt of } 9", "9"),
        ("\\text{the squareroot of } 9", "9"),
        ("3 \\text{ to the fourth}", "3"),
        ("3 \\text{ then squared}", "3"),
        ("3 \\text{ is squared}", "3"),
        ("3 \\text{ all squared}", "3"),
    ],
)
def test_more_value_changing_words_are_not_units(completion, wrong):
    assert _reward(_boxed(completion), wrong) == 0.0


# -- honest answers that round 3's fixes refused -------------------------------------------------------------------


@pytest.mark.parametrize(
    "completion, answer",
    [
        ("0.333333333", "0.3333333"),
        ("3.14159265", "3.1415927"),
        ("2.718281828", "2.7182818"),
        ("1.41421356", "1.414214"),
        ("1234567.891", "1234567.9"),
    ],
)
def test_a_more_precise_decimal_is_paid(completion, answer):
    assert _reward(_boxed(completion), answer) == 1.0


@pytest.mark.parametrize(
    "completion, answer",
    [
        ("0.30000000000000004", "0.3"),
        ("1.2100000000000002", "1.21"),
        ("434.99999999999994", "435"),
        ("0.49999999999999994", "\\frac{1}{2}"),
        ("3.3333333333333335", "\\frac{10}{3}"),
        ("2.4494897427831783", "\\sqrt{6}"),
        ("1.7320508075688767", "\\sqrt{3}"),
    ],
)
def test_calculator_float_noise_is_paid(completion, answer):
    assert _reward(_boxed(completion), answer) == 1.0


@pytest.mark.parametrize("completion", ["(2, 3)", "(x, y) = (2, 3)", "2, 3"])
def test_a_labelled_reference_does_not_switch_the_copy_guard_on(completion):
    assert _reward(_boxed(completion), "x = 2, y = 3", question="Solve the system x + y = 5, x - y = -1.") == 1.0


@pytest.mark.parametrize(
    "completion, answer, options",
    [
        ("\\frac{6}{8}", "\\frac{6}{8}", {"question": "What fraction of the pizza is left?"}),
        ("\\text{negative } \\frac{1}{2}", "-\\frac{1}{2}", {}),
        ("\\text{minus}\\ 3", "-3", {}),
        ("\\text{MINUS } 3", "-3", {}),
        ("5 \\text{ millions}", "5 \\text{ million}", {}),
        ("x = 3, y = 4", "(x, y) = (3, 4)", {}),
    ],
)
def test_honest_spellings_are_paid(completion, answer, options):
    assert _reward(_boxed(completion), answer, **options) == 1.0


@pytest.mark.xfail(
    strict=True,
    reason="left: a gloss in words after the number (`(two thirds)`) holds a value word, and words on one side only "
    "are refused: reading the gloss would need to parse number words",
)
def test_a_gloss_in_words_is_still_refused():
    assert _reward("\\frac{2}{3} \\text{ (two thirds)}", "\\frac{2}{3}") == 1.0


# -- what held -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize(
    "completion",
    [
        "2000000.5",
        "(2000000.5)",
        "\\left(2000000.5\\right)",
        "x = 2000000.5",
        "\\{2000000.5\\}",
        "2000000.50",
        "2,000,000.5",
        "2\\,000\\,000.5",
        "2000000{,}5",
        "\\frac{4000001}{2}",
        "\\frac{4000001.0}{2}",
        "20000005 \\times 10^{-1}",
        "0.20000005\\times 10^{7}",
        "2000000\\frac{1}{2}",
        "2000000.5e0",
        "2.0000005E6",
        "2000000.5\\%",
        "2000000.5 \\text{ m}",
        "\\$2000000.5",
        "\\textbf{2000000.5}",
        "2000000 \\cdot 1.0",
        "2000000.5 \\pm 0.5",
    ],
)
def test_decimal_spellings_that_held(profile, completion):
    for wrapper in (_boxed, "Final answer: {}".format):
        assert sum(_paid(wrapper(completion), ("2000000", "2000001"), profile=profile)) <= 1.0


_SIGN_HEDGES = [
    "5 minus 3",
    "\\text{minus } 3 \\text{ or } 3",
    "\\text{plus or minus } 3",
    "3 \\text{ plus or minus } 3",
    "\\text{minus negative } 3",
    "\\text{negative } -3",
    "-\\text{negative } 3",
    "\\text{minus } 3 = 3",
    "3 = \\text{minus } 3",
    "\\text{minus }3, 3",
    "\\{\\text{minus } 3, 3\\}",
    "\\text{either minus } 3 \\text{ or } 3",
    "\\text{minus } 3 \\lor 3",
    "\\text{negative }3\\text{ or positive }3",
    "3 \\text{ or } \\text{negative } 3",
    "8 \\text{ minus } 5 \\text{ or } 3",
]


@pytest.mark.parametrize("completion", _SIGN_HEDGES)
def test_sign_words_do_not_hedge(completion):
    for references in (("3", "-3"), ("2", "8"), ("x = 3", "x = -3")):
        assert sum(_paid(_boxed(completion), references)) <= 1.0


@pytest.mark.parametrize(
    "completion, answer",
    [("5 minus 3", "2"), ("\\text{minus } 3", "-3"), ("x = \\text{minus } 3", "-3"), ("\\textrm{negative} 3", "-3")],
)
def test_sign_words_read_as_signs(completion, answer):
    assert _reward(_boxed(completion), answer) == 1.0


_CHAINS = [
    "x = y = 3 = 4",
    "x = 3 = y = 4",
    "x = 3 = 4 = y",
    "3 = x = 4",
    "3 = 4 = x",
    "x = 3 = x = 4",
    "\\{x = 3 = 4\\}",
    "(x = 3 = 4, 5)",
    "[x = 3 = 4]",
    "x \\in \\{3 = 4\\}",
    "x \\approx 3 = 4",
    "x = 3 \\approx 4",
    "x = 3 \\neq 4",
    "x \\neq 3 = 4",
    "y = x = 3 = 4",
    "(x, y) = (3, 4) = (4, 3)",
    "x = y = (3, 4)",
    "x = 3 = y \\text{ and } y = 4",
    "y = 2 + 2 = 4, x = 3 = 4",
    "x = \\boxed{3} = 4",
]


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("completion", _CHAINS)
def test_chains_that_held(profile, completion):
    for references in (("3", "4"), ("x = 3", "x = 4"), ("(3, 4)", "(4, 3)"), ("x = 3, y = 4", "x = 4, y = 3")):
        assert sum(_paid(_boxed(completion), references, profile=profile)) <= 1.0


@pytest.mark.parametrize(
    "completion",
    ["1,5", "Final answer: 1,5", "The value is 1,5.", "#### 1,5", "**1,5**", "$\\boxed{1{,}5}$", "Final answer: 1,50"],
)
@pytest.mark.parametrize("decimal_comma", [None, True])
def test_the_decimal_comma_pays_one_reading(completion, decimal_comma):
    for references in (("1.5", "1, 5"), ("1.5", "15"), ("1.5", "5"), ("1.5", "150"), ("1.5", "(1, 5)")):
        assert sum(_paid(completion, references, decimal_comma=decimal_comma)) <= 1.0


@pytest.mark.parametrize("completion", ["12,5", "Final answer: 12,5", "The answer is 12,5."])
def test_a_decimal_comma_is_not_a_digit_run(completion):
    for references in (("12.5", "125"), ("12.5", "12, 5"), ("12.5", "5")):
        assert sum(_paid(completion, references)) <= 1.0


_LABEL_HEDGES = [
    "x = \\pm 3, y = \\mp 3",
    "x = \\pm 3, y = \\pm 3",
    "(x, y) = (\\pm 3, \\mp 3)",
    "(\\pm 3, \\mp 3)",
    "x = 3 \\text{ or } 4, y = 4 \\text{ or } 3",
    "x = 3, y = 4 \\text{ or } x = 4, y = 3",
    "x = 3, y = 4 \\lor x = 4, y = 3",
    "(x, y) \\in \\{(3, 4), (4, 3)\\}",
    "(x, y) = (3, 4) \\text{ or } (4, 3)",
    "x = 3, X = 4",
    "b = 3, a = 4",
    "B = 3, A = 4",
    "q = 3, p = 4",
    "x = 3, y = 4 \\quad x = 4, y = 3",
    "x \\in \\{3,4\\}, y \\in \\{3,4\\}",
]


@pytest.mark.parametrize("completion", _LABEL_HEDGES)
def test_labelled_hedges_that_held(completion):
    for references in (
        ("x = 3, y = 4", "x = 4, y = 3"),
        ("x = 3, y = -3", "x = -3, y = 3"),
        ("a = 3, b = 4", "b = 3, a = 4"),
        ("x = 3, y = 4", "y = 3, x = 4"),
    ):
        assert sum(_paid(_boxed(completion), references)) <= 1.0


_QUESTION = "A shop sells 250 pens each day for 4 days. How many pens?"


@pytest.mark.parametrize(
    "completion, answer",
    [
        ("\\$1{,}000", "1000"),
        ("1\\,000", "1000"),
        ("1,000", "1000"),
        ("-0.5", "-0.5"),
        (".5", "0.5"),
        ("50\\%", "50\\%"),
        ("3 \\frac{1}{2}", "\\frac{7}{2}"),
        ("\\dfrac{1}{2}", "0.5"),
        ("\\frac12", "0.5"),
        ("10^{-2}", "0.01"),
        ("-10^{-2}", "-0.01"),
        ("1.5 \\times 10^{3}", "1500"),
        ("1.5e3", "1500"),
        ("1000 \\text{ pens}", "1000"),
        ("x = 1000", "1000"),
        ("1000 = x", "1000"),
        ("1000.00", "1000"),
        ("\\$10.50", "10.5"),
        ("\\frac{-1}{2}", "-\\frac12"),
        ("\\left(1000\\right)", "1000"),
        ("\\textbf{1000}", "1000"),
        ("1\\,000\\,000", "1000000"),
        ("0.\\overline{3}", "\\frac{1}{3}"),
        ("2\\frac{1}{2} \\text{ hours}", "2.5"),
        ("\\text{negative } 0.5", "-0.5"),
        ("x=-3", "-3"),
        ("\\sqrt{2}", "\\sqrt{2}"),
    ],
)
def test_written_numbers_pass_the_copy_guard(completion, answer):
    assert _reward(_boxed(completion), answer, question=_QUESTION) == 1.0
