"""The symbolic step: guarded LaTeX-to-sympy parsing and equality tests. Imported only in bounded worker processes.

The guards run on the text before sympy sees it: towers of exponents, huge exponents or factorials and deep nesting
are refused outright (`TooComplex`), since sympy would happily try to expand them. Whatever passes is still bounded
by the worker's wall-clock budget.
"""

from __future__ import annotations

import re
from functools import lru_cache

import sympy
from latex2sympy2_extended import latex2sympy
from latex2sympy2_extended.latex2sympy2 import ConversionConfig
from latex2sympy2_extended.math_normalization import NormalizationConfig

from groupscore.verifiers.math.closeness import within_written_precision
from groupscore.verifiers.math.guards import TooComplex, check_limits
from groupscore.verifiers.math.numeric import free_variables
from groupscore.verifiers.math.sample_points import IDENTITY_TRIALS, sample_point

MAX_OPS = 400

# Our own normaliser has already run; latex2sympy's is kept to its basic command clean-up.
_NORMALIZATION = NormalizationConfig(
    basic_latex=True, units=False, malformed_operators=False, nits=False, boxed="none", equations=False
)
# Mixed numbers were resolved by our normaliser; `2\frac{\pi}{3}` is a product. Symbols keep their case.
_CONVERSION = ConversionConfig(interpret_as_mixed_fractions=False, lowercase_symbols=False)
# Functions analytic wherever they are defined: two of them agreeing at generic points is evidence they are equal.
_ANALYTIC = (
    sympy.exp,
    sympy.sin,
    sympy.cos,
    sympy.tan,
    sympy.cot,
    sympy.sec,
    sympy.csc,
    sympy.sinh,
    sympy.cosh,
    sympy.tanh,
)
# latex2sympy evaluates these on the spot with polynomial semantics (`\gcd(n, 2)` becomes 1), so with a variable
# inside, sympy's form is not the answer's meaning and nothing sympy says about it counts.
_INTEGER_FUNCTIONS = re.compile(r"gcd|lcm|\\[bp]?mod(?![a-zA-Z])|\\operatorname\{(?:mod|rem)\}")


@lru_cache(maxsize=4096)
def to_sympy(text: str) -> sympy.Basic | None:
    """The sympy form of a normalised answer, or None when latex2sympy cannot read it. Raises TooComplex."""
    check_limits(text)
    try:
        expr = latex2sympy(text, normalization_config=_NORMALIZATION, conversion_config=_CONVERSION)
    except Exception:  # noqa: BLE001 - the ANTLR parser raises bare Exceptions on bad input
        return None
    if not isinstance(expr, sympy.Basic):
        return None
    if sympy.count_ops(expr) > MAX_OPS:
        raise TooComplex("expression too large")
    imaginary = [s for s in expr.free_symbols if s.name == "i"]
    if imaginary:
        expr = expr.subs(imaginary[0], sympy.I)
    return expr


def _close(a: sympy.Expr, b: sympy.Expr, rel_tol: float) -> bool | None:
    va, vb = complex(sympy.N(a, 30)), complex(sympy.N(b, 30))
    if va != va or vb != vb:  # nan
        return None
    scale = max(abs(va), abs(vb))
    return abs(va - vb) <= max(rel_tol * scale, 1e-12)


def expressions_equal(pred: str, gold: str, rel_tol: float, written_precision: bool = True) -> bool | None:
    """True/False, or None when either side cannot be read."""
    if _integer_function_of_variables(pred) or _integer_function_of_variables(gold):
        return False  # only the same text (decided before sympy) counts
    a, b = to_sympy(pred), to_sympy(gold)
    if a is None or b is None:
        return None
    if a == b:
        return True
    if not (isinstance(a, sympy.Expr) and isinstance(b, sympy.Expr)):
        try:
            return bool(sympy.simplify(a) == sympy.simplify(b))
        except Exception:  # noqa: BLE001
            return False
    try:
        if a.is_Rational and b.is_Rational:
            return False  # two exact rationals that differ (a == b failed)
        symbols = a.free_symbols | b.free_symbols
        if not symbols:
            if a.is_number and b.is_number:
                both_exact = _is_exact(a) and _is_exact(b)
                if both_exact and sympy.simplify(a - b) == 0:
                    return True
                close = _close(a, b, rel_tol if not both_exact else 1e-12)
                if (
                    close and not both_exact and written_precision
                ):  # a written decimal is as precise as its digits, no more
                    return within_written_precision(pred, complex(sympy.N(a, 30)), gold, complex(sympy.N(b, 30)))
                return bool(close)
            return False
        if sympy.simplify(a - b) == 0:
            return True
        if not (sampling_sound(a) and sampling_sound(b)):
            return False  # floor, |x|, max, roots...: no proof, and agreeing at samples proves nothing
        return _agree_at_samples(a, b, sorted(symbols, key=lambda s: s.name))
    except (TypeError, ValueError, ZeroDivisionError, AttributeError, RecursionError):
        return False


def _integer_function_of_variables(text: str) -> bool:
    return bool(_INTEGER_FUNCTIONS.search(text)) and bool(free_variables(_INTEGER_FUNCTIONS.sub(" ", text)))


def sampling_sound(expr: sympy.Basic) -> bool:
    """Whether agreeing at sample points means anything for `expr`: built from its variables by field operations,
    integer powers, powers of a fixed positive base and analytic functions, with anything at all allowed in parts
    that hold no variable. Floor, ceiling, |x|, max/min, sign, piecewise, factorials, binomials, roots and logs of a
    variable are piecewise or branch-dependent: `\\lceil x \\rceil - 1` and `\\lfloor x \\rfloor` differ only at
    integers, which no sample hits."""
    if not expr.free_symbols or expr.is_Symbol:
        return True
    if isinstance(expr, sympy.Add | sympy.Mul):
        return all(sampling_sound(arg) for arg in expr.args)
    if isinstance(expr, sympy.Pow):
        base, exponent = expr.args
        if exponent.is_Integer:
            return sampling_sound(base)
        if not base.free_symbols and base.is_positive:
            return sampling_sound(exponent)
        return False
    if isinstance(expr, _ANALYTIC):
        return sampling_sound(expr.args[0])
    return False


def _is_exact(expr: sympy.Expr) -> bool:
    return not expr.has(sympy.Float)


def _agree_at_samples(a: sympy.Expr, b: sympy.Expr, symbols: list[sympy.Symbol]) -> bool:
    for trial in range(IDENTITY_TRIALS):  # points from a hash of both sides: no completion can plant roots at them
        point = {s: sympy.Float(v) for s, v in sample_point(str(a), str(b), symbols, trial).items()}
        va, vb = complex(a.evalf(20, subs=point)), complex(b.evalf(20, subs=point))
        if abs(va - vb) > 1e-9 * max(abs(va), abs(vb), 1.0):
            return False
    return True


def relations_equal(pred_diff: str, gold_diff: str, inequality: bool) -> bool | None:
    """`P = 0` against `G = 0` (or `< 0`): equal when P / G is a non-zero constant (positive for inequalities)."""
    if _integer_function_of_variables(pred_diff) or _integer_function_of_variables(gold_diff):
        return False
    a, b = to_sympy(pred_diff), to_sympy(gold_diff)
    if a is None or b is None:
        return None
    if not (isinstance(a, sympy.Expr) and isinstance(b, sympy.Expr)) or b == 0:
        return False
    ratio = sympy.simplify(a / b)
    if ratio.free_symbols or not ratio.is_number or ratio == 0:
        return False
    if inequality:
        return bool(ratio.is_positive)
    return True


# The first parse builds ANTLR's tables (a few hundred ms): pay for it when the worker imports this module.
to_sympy("x+1")
