"""pass@k: the running-product estimator against brute-force counting of k-subsets, and its edge cases."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import pytest

from groupscore.train.passk import pass_at_k


def brute_force_pass_at_k(n: int, c: int, k: int) -> Fraction:
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return Fraction(sum(any(samples[i] for i in s) for s in subsets), len(subsets))


@pytest.mark.parametrize("n", range(1, 9))
def test_pass_at_k_equals_share_of_k_subsets_holding_a_correct_sample(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(float(brute_force_pass_at_k(n, c, k)), abs=1e-12), (n, c, k)


def test_pass_at_1_is_the_share_correct_and_pass_at_n_is_any_correct():
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(10, 1, 10) == 1.0
    assert pass_at_k(10, 0, 10) == 0.0


def test_large_n_stays_exact_where_binomials_overflow_floats():
    n, c, k = 2000, 7, 500  # C(2000, 500) is far beyond float range
    exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
    assert pass_at_k(n, c, k) == pytest.approx(float(exact), rel=1e-12)


@pytest.mark.parametrize("n,c,k", [(5, 6, 1), (5, -1, 1), (5, 2, 0), (5, 2, 6)])
def test_impossible_counts_are_refused(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)
