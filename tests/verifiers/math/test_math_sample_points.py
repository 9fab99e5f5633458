"""Sample points of the identity tests are drawn from the pair, not fixed (red team F8), and labels order values (F7)."""

from __future__ import annotations

from groupscore.verifiers.math import symbolic
from groupscore.verifiers.math.grader import compare_answers
from groupscore.verifiers.math.sample_points import IDENTITY_TRIALS, sample_point

PLANTED = "x^2 + (x-0.7390851332)(x+1.1342865808)(x+6.7082039325)"  # roots at the old fixed points


def test_points_are_deterministic_and_move_with_the_pair():
    first = [sample_point("x^2", PLANTED, ["x", "y"], t) for t in range(IDENTITY_TRIALS)]
    assert first == [sample_point("x^2", PLANTED, ["x", "y"], t) for t in range(IDENTITY_TRIALS)]
    other = [sample_point("x^2", PLANTED + "+0", ["x", "y"], t) for t in range(IDENTITY_TRIALS)]
    assert all(a != b for a, b in zip(first, other))
    values = [v for point in first for v in point.values()]
    assert len(set(values)) == len(values) and all(0.25 <= abs(v) < 3.0 for v in values)


def test_roots_planted_at_the_old_points_do_not_pay():
    assert compare_answers(PLANTED, "x^2", 1e-6, False).equal is not True  # the fast path
    assert symbolic.expressions_equal(PLANTED, "x^2", 1e-6) is False  # the worker's sampled fallback
    assert compare_answers("(x+1)^3", "x^3+3x^2+3x+1", 1e-6, False).equal is True


def test_labelled_values_follow_their_labels_against_a_tuple():
    assert compare_answers("y=3, x=4", "(3, 4)", 1e-6, False).equal is False
    assert compare_answers("y=4, x=3", "(3, 4)", 1e-6, False).equal is True
    assert compare_answers("x_2=3, x_1=4", "(3, 4)", 1e-6, False).equal is False
    assert compare_answers("AB=4, CD=5", "4, 5", 1e-6, False).equal is True  # not single letters: text order
    assert compare_answers("(y,x)=(3,4)", "(3,4)", 1e-6, False).equal is False
    assert compare_answers("(y,x)=(4,3)", "(3,4)", 1e-6, False).equal is True
