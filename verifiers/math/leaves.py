"""One expression against another: the leaf cascade, and one equation or inequality against another.

Leaf cascade (`LeafJudge.leaf`): normalised string, then exact/toleranced numbers, then (for expressions in variables)
a numeric identity test at sample points (drawn from a hash of both answers: sample_points.py), then sympy, only when
the judge is symbolic (sympy is imported on first use, on the worker side). Two relations are equal when their
differences are proportional (`LeafJudge.relation`: samples first, sympy last). The structure matcher (matching.py)
builds on this class and hands it the single expressions it finds.
"""

from __future__ import annotations

import cmath
import re
from collections.abc import Iterator, Sequence
from dataclasses import replace

from groupscore.verifiers.math.caching import short_key_cache
from groupscore.verifiers.math.closeness import numbers_equal, rounds_to, within_written_precision
from groupscore.verifiers.math.conventions import DEFAULT, Conventions
from groupscore.verifiers.math.numeric import Number, evaluate, fraction_of, free_variables, to_complex
from groupscore.verifiers.math.sample_points import IDENTITY_TRIALS, sample_point
from groupscore.verifiers.math.structures import Relation

Tri = bool | None  # True, False, or "cannot tell here"
# Order-free matching compares every pair of parts; this caps the work one comparison may cost.
MAX_LEAF_COMPARISONS = 5000


class TooManyComparisons(Exception):
    """The answers have so many parts that comparing them would not be bounded."""


@short_key_cache(maxsize=1 << 14)
def cached_value(text: str) -> Number | None:
    return evaluate(text)  # cached: order-free matching evaluates each part against every other


_WORDS = re.compile(r"[A-Za-z]{3,}(?: [A-Za-z]+)*")
# A mantissa times a power of ten, as normalisation writes it (`2.000001\\times10^{6}`, from `2.000001e6` too).
_SCIENTIFIC = re.compile(r"[-+]?\d+(?:\.\d+)?\\(?:times|cdot)10\^\{?[-+]?\d+\}?")


def _as_written(text: str, value: Number, scientific_tolerance: bool) -> Number:
    """A number in scientific notation is exactly what it writes: its mantissa's decimals are digits, not a rounding
    that buys `rel_tol` (`2.000001 \\times 10^{6}` is 2000001, as `2000001.0` is), unless `scientific_tolerance`."""
    if value.approx and value.is_exact and not scientific_tolerance and _SCIENTIFIC.fullmatch(text):
        return replace(value, approx=False)
    return value


class LeafJudge:
    """Decides single expressions and relations, and counts what it costs. One judge per comparison (it records the
    methods that decided and whether a guard refused sympy an expression)."""

    def __init__(self, rel_tol: float, symbolic: bool, conventions: Conventions = DEFAULT) -> None:
        self.rel_tol = rel_tol
        self.conventions = conventions
        self.symbolic = symbolic
        self.methods: set[str] = set()
        self.too_complex = False
        self.leaves_left = MAX_LEAF_COMPARISONS

    def leaf(self, pred: str, gold: str) -> Tri:
        self.leaves_left -= 1
        if self.leaves_left < 0:
            raise TooManyComparisons
        if pred == gold:
            self.methods.add("string")
            return True
        if not pred or not gold:
            return False
        if ":" in pred or ":" in gold:
            return False  # a colon left inside a leaf is no division (sympy would read `9:00` as 9/0)
        if _WORDS.fullmatch(pred) and _WORDS.fullmatch(gold):
            self.methods.add("string")
            return pred.casefold() == gold.casefold()  # "Yes" and "yes"; words are not products of variables
        pv, gv = cached_value(pred), cached_value(gold)
        if pv is not None and gv is not None:
            self.methods.add("numeric")
            pv = _as_written(pred, pv, self.conventions.scientific_tolerance)
            gv = _as_written(gold, gv, self.conventions.scientific_tolerance)
            if numbers_equal(pv, gv, self.rel_tol) and self._as_precise_as_written(pred, pv, gold, gv):
                return True
            digits = self.conventions.significant_digits
            return digits is not None and rounds_to(pred, gv, digits)
        names = free_variables(pred) | free_variables(gold)
        if names:
            # Also decides a number against an expression in x (`x - x + 2` is 2; `3x` is not 3).
            sampled = self._sample_equal(pred, gold, sorted(names))
            if sampled is not None:
                self.methods.add("sample")
                return sampled
        return self._symbolic_leaf(pred, gold)

    def _as_precise_as_written(self, pred: str, pv: Number, gold: str, gv: Number) -> bool:
        if not self.conventions.written_precision or not (pv.approx or gv.approx):
            return True  # the item's own rel_tol, as stated; or two exact values, already compared exactly
        if self.conventions.scientific_tolerance and (_SCIENTIFIC.fullmatch(pred) or _SCIENTIFIC.fullmatch(gold)):
            return True  # the convention reads a mantissa's digits as a rounding at its own scale: rel_tol decides
        p, g = fraction_of(pv), fraction_of(gv)
        if p is not None and g is not None:
            return within_written_precision(pred, p, gold, g)
        x, y = to_complex(pv), to_complex(gv)
        return x is None or y is None or within_written_precision(pred, x, gold, y)

    def _sample_equal(self, pred: str, gold: str, names: Sequence[str]) -> Tri:
        """False when the texts differ at a sample point; True only when they agree at every point and both are
        analytic in the variables (agreement at a few points proves nothing for `|x-1|` against `1-x`)."""
        decided_equal = True
        for x, y, sound in _sampled_values(pred, gold, names, trials=IDENTITY_TRIALS):
            if x is None or cmath.isinf(x) or cmath.isinf(y):
                return None
            scale = max(abs(x), abs(y), 1e-300)
            if abs(x - y) > 1e-6 * scale and abs(x - y) > 1e-9:
                return False
            if abs(x - y) > max(1e-10 * scale, 1e-12) or not sound:
                decided_equal = False
        return True if decided_equal else None

    def _symbolic_leaf(self, pred: str, gold: str) -> Tri:
        if not self.symbolic:
            return None
        from groupscore.verifiers.math import symbolic  # sympy lives only on the worker side

        self.methods.add("symbolic")
        try:
            return symbolic.expressions_equal(pred, gold, self.rel_tol, self.conventions.written_precision)
        except symbolic.TooComplex:
            self.too_complex = True
            return None

    def relation(self, pred: Relation, gold: Relation) -> Tri:
        """Two equations (or inequalities) are equal when one is a non-zero (positive) multiple of the other."""
        if pred.op == gold.op and pred.lhs == gold.lhs:
            same_rhs = self.leaf(pred.rhs, gold.rhs)
            if same_rhs:
                return True
        p_diff, p_strict, p_kind = _as_difference(pred)
        g_diff, g_strict, g_kind = _as_difference(gold)
        if p_kind != g_kind or p_strict != g_strict:
            return False
        names = sorted(free_variables(p_diff) | free_variables(g_diff))
        ratio = self._sample_ratio(p_diff, g_diff, names)
        if ratio is not None:
            self.methods.add("sample")
            return ratio > 0 if p_kind == "ineq" else True
        if ratio is None and self._ratio_known_absent(p_diff, g_diff, names):
            self.methods.add("sample")
            return False
        if not self.symbolic:
            return None
        from groupscore.verifiers.math import symbolic

        self.methods.add("symbolic")
        try:
            return symbolic.relations_equal(p_diff, g_diff, p_kind == "ineq")
        except symbolic.TooComplex:
            self.too_complex = True
            return None

    def _ratios(self, p_diff: str, g_diff: str, names: Sequence[str], need_sound: bool) -> list[complex] | None:
        ratios = []
        for x, y, sound in _sampled_values(p_diff, g_diff, names, trials=IDENTITY_TRIALS):
            if x is None or (need_sound and not sound):
                return None
            if abs(y) < 1e-12 or cmath.isinf(x) or cmath.isinf(y):
                if abs(x) < 1e-12 and abs(y) < 1e-12:
                    continue
                return []  # one side vanishes where the other does not: not proportional
            ratios.append(x / y)
        return ratios or None  # None: both sides vanished at every sample, nothing learned

    def _sample_ratio(self, p_diff: str, g_diff: str, names: Sequence[str]) -> float | None:
        """The constant real ratio p/g if the samples show one (and both sides are analytic, so that it means one)."""
        ratios = self._ratios(p_diff, g_diff, names, need_sound=True)
        if not ratios:
            return None
        first = ratios[0]
        if abs(first) < 1e-12 or abs(first.imag) > 1e-9 * abs(first):
            return None
        if all(abs(r - first) <= 1e-9 * abs(first) for r in ratios):
            return first.real
        return None

    def _ratio_known_absent(self, p_diff: str, g_diff: str, names: Sequence[str]) -> bool:
        ratios = self._ratios(p_diff, g_diff, names, need_sound=False)
        if ratios is None:
            return False
        if not ratios:
            return True
        first = ratios[0]
        return any(abs(r - first) > 1e-6 * max(abs(first), 1e-12) for r in ratios) or abs(first) < 1e-12


def _sampled_values(
    a: str, b: str, names: Sequence[str], trials: int
) -> Iterator[tuple[complex | None, complex, bool]]:
    """Both texts evaluated at the same points (drawn from a hash of both, so a completion cannot plant roots at them),
    and whether both are analytic there (agreement can pay);
    (None, 0, False) where either cannot be evaluated."""
    for trial in range(trials):
        point = {name: complex(value, 0.0) for name, value in sample_point(a, b, names, trial).items()}
        va, vb = evaluate(a, point), evaluate(b, point)
        x = to_complex(va) if va is not None else None
        y = to_complex(vb) if vb is not None else None
        if va is None or vb is None or x is None or y is None:
            yield None, 0j, False
            return
        yield x, y, va.sample_sound and vb.sample_sound


def _as_difference(relation: Relation) -> tuple[str, bool, str]:
    """`L op R` as `D op' 0` with op' one of =, <, <=: (D, strict, kind)."""
    lhs, rhs = relation.lhs or "0", relation.rhs or "0"
    if relation.op in ("=", "\\neq"):
        return f"({lhs})-({rhs})", relation.op == "\\neq", "eq"
    if relation.op in ("<", "\\leq"):
        return f"({lhs})-({rhs})", relation.op == "<", "ineq"
    return f"({rhs})-({lhs})", relation.op == ">", "ineq"
