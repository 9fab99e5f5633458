"""Round-3 red team of the math reward verifier: what a GRPO policy could learn to aim at after the hedge fixes.

The invariant: for one completion and a set of references that exclude each other (the permutations of an ordered or
labelled answer, a value and its neighbour, a.m. against p.m., 1.22 against the list 1, 22, ...), the rewards over
the set sum to at most 1; a wrong value earns 0; an expression copied from the question earns 0.

Pinned here:
- the holes the review found, now closed, as plain tests asserting the secure behaviour: a decimal's `rel_tol`
  straddling two large integers (also through the plain-text decimal comma), an equation chain inside a labelled
  answer, a question about ratios turning clock times into ratios, question-copy bypasses (the name on the right, a
  rewritten number, a reference that is a fraction, percentage or assignment, a question in words), value-changing
  words dropped as units, a disjunction of assignments paid as their conjunction, the prose fallback reading the
  tail of a decimal-comma or Indian-grouped number; and the honest answers the first fixes refused;
- what is left, as `xfail(strict=True)` with its reason: labels with no order of their own follow the reference's
  text order (by design), and a few honest spellings still refused;
- the attacks that held, as plain tests, so that the defences stay in place.
"""

from __future__ import annotations

import itertools

import pytest

from groupscore.verifiers.math.item import MathItem
from groupscore.verifiers.math.verify import score_math

PROFILES = ("default", "math_verify")


def _reward(completion: str, answer: str, **options: object) -> float:
    return score_math(MathItem(completion=completion, answer=answer, timeout_s=10.0, **options)).reward


def _paid(completion: str, references: tuple[str, ...], **options: object) -> list[float]:
    return [_reward(completion, reference, **options) for reference in references]


# -- holes: the sum over exclusive references --------------------------------------------------------------------


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize(
    "completion, references",
    [
        ("$\\boxed{2000000.5}$", ("2000000", "2000001")),
        ("$\\boxed{1999999.9}$", ("2000000", "2000001")),
        ("$\\boxed{500000.5}$", ("500000", "500001")),
        ("$\\boxed{2,000,000.5}$", ("2000000", "2000001")),
        ("<answer>2000000.5</answer>", ("2000000", "2000001")),
    ],
)
def test_a_decimal_does_not_straddle_two_large_integers(profile, completion, references):
    assert sum(_paid(completion, references, profile=profile)) <= 1.0


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize(
    "completion",
    [
        "Final answer: 2000000,2000001",
        "Final answer: 2000001,2000000",
        "<answer>2000000,2000001</answer>",
        "#### 2000000,2000001",
        "The answer is 2000000,2000001.",
        "2000000,2000001",
        "Final answer: 2000000,5",
    ],
)
def test_a_decimal_comma_does_not_join_two_candidates(profile, completion):
    assert sum(_paid(completion, ("2000000", "2000001"), profile=profile)) <= 1.0


@pytest.mark.xfail(
    strict=True,
    reason="left by design: labels with no order of their own (`a, c`, `x, z`, `a_1, b_1`, Greek, `AB, CD`, `x, p`) "
    "are read in the reference's text order, the question's order, so a bare tuple pays a=3,c=4 and c=3,a=4 (which "
    "is a=4,c=3); over one reference's value permutations (labels in place) it pays once "
    "(tests/verifiers/math/test_math_exclusive_references.py). Sorting them would refuse `-5, 14/3` for `x = -5, p = 14/3`",
)
@pytest.mark.parametrize(
    "completion, references",
    [
        ("$\\boxed{(3, 4)}$", ("a = 3, c = 4", "c = 3, a = 4")),
        ("$\\boxed{3, 4}$", ("a = 3, c = 4", "c = 3, a = 4")),
        ("$\\boxed{(3, 4)}$", ("x = 3, z = 4", "z = 3, x = 4")),
        ("$\\boxed{(3, 4)}$", ("a_1 = 3, b_1 = 4", "b_1 = 3, a_1 = 4")),
        ("$\\boxed{(3, 4)}$", ("\\alpha = 3, \\beta = 4", "\\beta = 3, \\alpha = 4")),
        ("$\\boxed{(3, \\frac{\\pi}{2})}$", ("r = 3, \\theta = \\frac{\\pi}{2}", "\\theta = 3, r = \\frac{\\pi}{2}")),
        ("$\\boxed{4, 5}$", ("AB = 4, CD = 5", "CD = 4, AB = 5")),
        ("$\\boxed{(-5, \\frac{14}{3})}$", ("x = -5, p = \\frac{14}{3}", "p = -5, x = \\frac{14}{3}")),
        ("$\\boxed{(3, 4)}$", ("$a = 3$ and $c = 4$", "$c = 3$ and $a = 4$")),
    ],
)
def test_an_unlabelled_tuple_matches_one_assignment_only(completion, references):
    assert sum(_paid(completion, references)) <= 1.0


@pytest.mark.parametrize(
    "completion, references",
    [
        ("$\\boxed{y = 2+2 = 4, x = 3}$", ("(4, 3)", "x = 3, y = 4")),
        ("$\\boxed{y = 2+2 = 4, x = 3}$", ("(4, 3)", "(3, 4)", "x = 4, y = 3")),
    ],
)
def test_a_chain_inside_a_labelled_answer_keeps_its_label(completion, references):
    assert sum(_paid(completion, references)) <= 1.0
    assert _reward(completion, "(4, 3)") == 0.0  # x = 3, y = 4 is the point (3, 4)


_RATIO_QUESTIONS = (
    "The ratio of boys to girls is 3:2. School starts at what time?",
    "In proportion to the distance, when does the train arrive?",
)


@pytest.mark.parametrize("question", _RATIO_QUESTIONS)
@pytest.mark.parametrize("completion", ["$\\boxed{9:00}$", "$\\boxed{9:00 \\text{ a.m.}}$"])
def test_a_ratio_question_keeps_a_time_of_day(question, completion):
    assert sum(_paid(completion, ("9:00 a.m.", "9:00 p.m."), question=question)) <= 1.0


# -- holes: the question-copy guard ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "completion", ["$\\boxed{7+3 = x}$", "$\\boxed{(7+3) = x}$", "$\\boxed{7 + 3 = n}$", "Final answer: 7+3 = x"]
)
def test_a_copy_with_the_name_on_the_right_is_no_answer(completion):
    assert _reward(completion, "10", question="What is 7+3?") == 0.0


@pytest.mark.parametrize(
    "completion, answer, question",
    [
        ("$\\boxed{7+\\sqrt{9}}$", "10", "What is 7+3?"),
        ("$\\boxed{7+2+1}$", "10", "What is 7+3?"),
        ("$\\boxed{\\frac{14}{2}+3}$", "10", "What is 7+3?"),
        ("$\\boxed{2^{5+5}}$", "1024", "What is 2^{10}?"),
        ("$\\boxed{(124-1)\\cdot(458-1)-(90-1)}$", "56122", "What is 123 \\cdot 457 - 89?"),
    ],
)
def test_a_copy_with_a_rewritten_number_is_no_answer(completion, answer, question):
    assert _reward(completion, answer, question=question) == 0.0


@pytest.mark.parametrize(
    "completion, answer, question",
    [
        ("$\\boxed{7+3}$", "10", "What is seven plus three?"),
        ("$\\boxed{\\frac{1}{2}+\\frac{1}{3}}$", "\\frac{5}{6}", "What is 1/2 + 1/3?"),
        ("$\\boxed{\\frac{5}{20} \\cdot 100}$", "25\\%", "What percent of 20 is 5?"),
        ("$\\boxed{7+3}$", "x = 10", "If x = 7+3, what is x?"),
        ("$\\boxed{1.5+2.5}$", "4", "Compute 1,5 + 2,5."),
    ],
)
def test_a_copy_is_no_answer_whatever_the_reference_looks_like(completion, answer, question):
    assert _reward(completion, answer, question=question) == 0.0


# -- holes: wrong values paid ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "completion, wrong",
    [
        ("$\\boxed{2 \\text{ thirds}}$", "2"),
        ("$\\boxed{3 \\text{ tenths}}$", "3"),
        ("$\\boxed{5 \\text{ hundredths}}$", "5"),
        ("$\\boxed{7 \\text{ thousandths}}$", "7"),
        ("$\\boxed{5 \\text{ lakh}}$", "5"),
        ("$\\boxed{2 \\text{ crore}}$", "2"),
        ("$\\boxed{3 \\text{ negated}}$", "3"),
        ("$\\boxed{3 \\text{ deficit}}$", "3"),
        ("$\\boxed{\\text{neg } 3}$", "3"),
        ("$\\boxed{\\text{the square of } 3}$", "3"),
    ],
)
def test_value_changing_words_are_not_units(completion, wrong):
    assert _reward(completion, wrong) == 0.0


@pytest.mark.parametrize(
    "completion, counted",
    [
        ("$\\boxed{3 \\text{ quarters}}$", "3"),
        ("$\\boxed{3 \\text{ grand}}$", "3"),
        ("$\\boxed{4 \\text{ score}}$", "4"),
        ("$\\boxed{2 \\text{ gross}}$", "2"),
        ("$\\boxed{3 \\text{ tens}}$", "3"),
    ],
)
def test_count_nouns_stay_units(completion, counted):
    """Left by design: these words are also things counted (`5 quarters` answers a question about coins), so they are
    read as a unit beside the number, not as a factor; against a reference that is the number they pay."""
    assert _reward(completion, counted) == 1.0


@pytest.mark.parametrize("completion", ["$\\boxed{x = 3 \\text{ or } y = 4}$", "$\\boxed{x = 3 \\lor y = 4}$"])
@pytest.mark.parametrize("reference", ["(3, 4)", "x = 3, y = 4"])
def test_a_disjunction_of_assignments_is_not_the_point(completion, reference):
    assert _reward(completion, reference) == 0.0


@pytest.mark.parametrize(
    "completion, wrong",
    [
        ("The value is 2,5.", "5"),
        ("So we have 1,5 liters", "5"),
        ("The total is Rs. 12,50,000 in all", "50000"),
    ],
)
def test_the_fallback_reads_the_whole_number(completion, wrong):
    assert _reward(completion, wrong) == 0.0


# -- regressions: honest answers refused -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "completion, answer, options",
    [
        # value words: `squared`/`cubed` as part of a unit, `double root`, a spelled-out sign
        ("$\\boxed{25 \\text{ meters squared}}$", "25", {}),
        ("$\\boxed{25 \\text{ cm squared}}$", "25 \\text{ cm}^2", {}),
        ("$\\boxed{8 \\text{ feet cubed}}$", "8", {}),
        ("$\\boxed{\\text{minus } 3}$", "-3", {}),
        ("$\\boxed{\\text{negative } 3}$", "-3", {}),
        # the question guard: a negative numerator is a way of writing a number
        ("$\\boxed{\\frac{-1}{2}}$", "-0.5", {"question": "What is 1 - 3/2?"}),
        # label order: the same assignment written in another order
        # Indian grouping and a LaTeX decimal comma outside the marker paths
        ("The total is 1,00,000 rupees", "100000", {}),
        ("$\\boxed{3{,}14}$", "3.14", {}),
        # a chain ending in a name
        ("$\\boxed{2+3 = 5 = x}$", "5", {}),
    ],
)
def test_honest_answers_are_paid(completion, answer, options):
    assert _reward(completion, answer, **options) == 1.0


@pytest.mark.xfail(
    strict=True,
    reason="left: honest answers still refused. `(double root)` reads as a product of letters with 3; a sign "
    "spelled out after the number (`-3 (minus three)`) counts as a value word; and labels with no order of their own "
    "(`a, c`) are read in the reference's text order, so `c = 4, a = 3` is (4, 3) and a bare tuple follows the "
    "order the reference writes (one reading per reference; the question's order is what datasets write)",
)
@pytest.mark.parametrize(
    "completion, answer",
    [
        ("$\\boxed{3 \\text{ (double root)}}$", "3"),
        ("$\\boxed{-3 \\text{ (minus three)}}$", "-3"),
        ("$\\boxed{c = 4, a = 3}$", "(3, 4)"),
        ("$\\boxed{(3, 4)}$", "c = 4, a = 3"),
    ],
)
def test_honest_answers_still_refused(completion, answer):
    assert _reward(completion, answer) == 1.0


# -- what held ---------------------------------------------------------------------------------------------------

_EXCLUSIVE = [
    (("(3, 4)", "(4, 3)"), ("3", "4")),
    (("(1, 2, 5)", "(5, 2, 1)", "(2, 1, 5)"), ("1", "2", "5")),
    (("x = 3, y = 4", "x = 4, y = 3"), ("3", "4")),
    (("a = 3, b = 4", "a = 4, b = 3"), ("3", "4")),
    (("x = 3", "x = 4"), ("3", "4")),
    (("3", "-3"), ("3", "-3")),
    (("12", "144"), ("12", "144")),
    (("1.22", "1, 22"), ("1.22", "1, 22")),
    (("A", "B"), ("A", "B")),
    (("[1, 2]", "(1, 2)", "[1, 2)", "(1, 2]"), ("1", "2")),
    (("y = 2x + 1", "y = 2x + 2"), ("2x+1", "2x+2")),
]


def _hedges(values: tuple[str, ...]) -> list[str]:
    perms = list(itertools.permutations(values))
    joined = [
        ", ".join(values),
        ",".join(values),
        " \\text{ or } ".join(values),
        " and ".join(values),
        " \\lor ".join(f"x = {v}" for v in values),
        "; ".join(values),
        " \\quad ".join(f"x = {v}" for v in values),
        "x = " + " = ".join(values),
        " = ".join(values),
        "\\{" + ", ".join(values) + "\\}",
        "x \\in \\{" + ", ".join(values) + "\\}",
        "\\pm " + values[0].lstrip("-"),
        " \\text{ or } ".join("(" + ", ".join(p) + ")" for p in perms),
        " and ".join(", ".join(p) for p in perms),
        " and ".join(", ".join(f"{label}={v}" for label, v in zip("xyz", p)) for p in perms),
        "; ".join(", ".join(f"{label}={v}" for label, v in zip("xyz", p)) for p in perms),
        "(y, x) = (" + ", ".join(values) + ")",
    ]
    wrappers = ("$\\boxed{{{}}}$", "<answer>{}</answer>", "Final answer: {}", "{}", "The answer is ${}$.")
    return [w.format(s) for s in joined for w in wrappers]


_HELD = [(refs, c) for refs, values in _EXCLUSIVE for c in _hedges(values)]


@pytest.mark.parametrize("profile", PROFILES)
def test_the_round3_hedge_grid_pays_at_most_once(profile):
    """A wider grid of these hedges (83k scorings, both profiles) held on the tree under attack; this keeps a slice."""
    broken = []
    for references, completion in _HELD:
        paid = _paid(completion, references, profile=profile)
        if sum(paid) > 1.0:
            broken.append((completion, references, paid))
    assert not broken


@pytest.mark.parametrize(
    "completion, references",
    [
        ("Final answer: 1,22", ("1.22", "1, 22")),
        ("$\\boxed{1,22}$", ("1.22", "1, 22")),
        ("$\\boxed{9:00}$", ("9:00 a.m.", "9:00 p.m.")),
        ("$\\boxed{9:00 \\text{ a.m. or p.m.}}$", ("9:00 a.m.", "9:00 p.m.")),
        ("$\\boxed{(3,4) = (4,3)}$", ("(3, 4)", "(4, 3)")),
        ("$\\boxed{\\{3,4\\} = \\{4,3\\}}$", ("(3, 4)", "(4, 3)")),
        ("$\\boxed{x = 3 = 4}$", ("3", "4")),
        ("$\\boxed{x = 3, y = 4 \\text{ and } x = 4, y = 3}$", ("x = 3, y = 4", "x = 4, y = 3")),
        ("$\\boxed{3, 4 \\text{ and } 4, 3}$", ("(3, 4)", "(4, 3)")),
        ("$\\boxed{2.0000005 \\times 10^{6}}$", ("2000000", "2000001")),
        ("$\\boxed{2.0000005e6}$", ("2000000", "2000001")),
        ("$\\boxed{|x| = 3}$", ("x = 3", "x = -3")),
        ("$\\boxed{x^2 = 9}$", ("x = 3", "x = -3")),
        ("$\\boxed{x \\in \\{3, -3\\}}$", ("(3, -3)", "(-3, 3)")),
        ("$\\boxed{3 \\text{ million}}$", ("3", "3000000")),
        ("$\\boxed{\\text{twice } 3}$", ("3", "6")),
    ],
)
@pytest.mark.parametrize("profile", PROFILES)
def test_single_hedges_that_held(completion, references, profile):
    assert sum(_paid(completion, references, profile=profile)) <= 1.0


@pytest.mark.parametrize(
    "completion",
    [
        "$\\boxed{7+3}$",
        "$\\boxed{x = 7+3}$",
        "$\\boxed{10 = 7+3}$",
        "$\\boxed{7 \\cdot 1 + 3}$",
        "$\\boxed{7+3.0}$",
        "$\\boxed{07+03}$",
        "$\\boxed{\\{7+3\\}}$",
        "$\\boxed{(7+3)^{1}}$",
        "$\\boxed{\\sqrt{(7+3)^2}}$",
        "$\\boxed{\\frac{7+3}{1}}$",
        "$\\boxed{(7+3)\\%}$",
        "$\\boxed{7+3 \\text{ cm}}$",
        "$\\boxed{7+3 \\approx x}$",
        "$\\boxed{x \\in \\{7+3\\}}$",
        "$\\boxed{7+3 = 7+3}$",
        "The answer is 7+3.",
        "7+3",
    ],
)
def test_the_question_guard_held(completion):
    assert _reward(completion, "10", question="What is 7+3?") == 0.0


@pytest.mark.parametrize(
    "completion, answer, options",
    [
        ("$\\boxed{x = 10}$", "10", {"question": "If x + 10 = 20 and 10 is given, find x"}),
        ("$\\boxed{5 = x}$", "5", {"question": "x + 5 = 10. Find x."}),
        ("$\\boxed{7+3=10}$", "10", {"question": "What is 7+3?"}),
        ("$\\boxed{x = 7+3 = 10}$", "10", {"question": "What is 7+3?"}),
        ("$\\boxed{-\\frac{1}{2}}$", "-0.5", {"question": "What is 1 - 3/2?"}),
        ("$\\boxed{\\frac{3}{4}}$", "0.75", {"question": "What fraction: 3 of 4 parts?"}),
        ("$\\boxed{2 \\times 10^{5}}$", "200000", {"question": "What is 2 times 10^5?"}),
        ("Final answer: 1,22", "1.22", {}),
        ("Final answer: 1,000", "1000", {}),
        ("$\\boxed{1,\\!00,\\!000}$", "100000", {}),
        ("$\\boxed{12,\\!34,\\!567}$", "1234567", {}),
        ("<answer>1,00,000</answer>", "100000", {}),
        ("$\\boxed{(2,2) \\text{ and } (6,2)}$", "(2,2), (6,2)", {}),
        ("$\\boxed{p=5, q=2 \\text{ and } p=7, q=2}$", "(5,2),(7,2)", {}),
        ("$\\boxed{3, 4 \\text{ and } 5}$", "3, 4, 5", {}),
        ("$\\boxed{y = 4, x = 3}$", "(3, 4)", {}),
        ("$\\boxed{z=3, x=1, y=2}$", "(1,2,3)", {}),
        ("$\\boxed{n = 4, m = 3}$", "(3, 4)", {}),
        ("$\\boxed{AB = 2+3 = 5}$", "5", {}),
        ("$\\boxed{21:00}$", "9:00 p.m.", {}),
        ("$\\boxed{6.02e23}$", "6.02\\times 10^{23}", {}),
        ("$\\boxed{2.50 \\times 10^{6}}$", "2500000", {}),
    ],
)
def test_honest_answers_still_paid(completion, answer, options):
    assert _reward(completion, answer, **options) == 1.0
