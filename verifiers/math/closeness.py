"""When two numbers are the same answer: exact values exactly, a written decimal as a rounding (within the item's
`rel_tol` and within one unit of its last digit), and, under `significant_digits`, a correct rounding of an exact value.
"""

from __future__ import annotations

import cmath
import math
import re
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal, InvalidOperation
from fractions import Fraction

from groupscore.verifiers.math.numeric import FLOAT_NOISE, Number, fraction_of, to_complex


def numbers_equal(a: Number, b: Number, rel_tol: float) -> bool:
    """Exact values must match exactly (up to float noise for irrationals); a value written with decimals matches
    within `rel_tol`, since whoever wrote it rounded."""
    if a.is_exact and b.is_exact:
        if a.value == b.value:
            return True
        if not (a.approx or b.approx):
            return False
    tolerance = rel_tol if (a.approx or b.approx) else FLOAT_NOISE
    x, y = to_complex(a), to_complex(b)
    if x is None or y is None:
        return _huge_equal(a, b, tolerance)
    if cmath.isinf(x) or cmath.isinf(y):
        return x == y
    return abs(x - y) <= max(tolerance * max(abs(x), abs(y)), 1e-12)


def _huge_equal(a: Number, b: Number, tolerance: float) -> bool:
    """Compare when one side is an exact value beyond float range: in exact arithmetic, real parts only."""
    values = []
    for n in (a, b):
        if isinstance(n.value, Fraction):
            values.append(n.value)
        elif n.value.imag == 0 and not cmath.isinf(n.value):
            values.append(Fraction(n.value.real))
        else:
            return False
    x, y = values
    return abs(x - y) <= Fraction(tolerance) * max(abs(x), abs(y))


_DECIMAL_LITERAL = re.compile(r"-?\d*\.\d+")


def rounds_to(literal: str, exact: Number, min_digits: int) -> bool:
    """Whether the decimal `literal` is `exact` correctly rounded to its own number of significant digits, and that
    number is at least `min_digits` (`0.3333` for 1/3 with 4; `0.33` is not enough for 4, `0.3334` is wrong)."""
    if not _DECIMAL_LITERAL.fullmatch(literal) or exact.approx:
        return False
    digits = literal.lstrip("-").replace(".", "").lstrip("0")
    if len(digits) < min_digits:
        return False
    value = exact.value if isinstance(exact.value, Fraction) else to_complex(exact)
    if value is None or (isinstance(value, complex) and (value.imag != 0 or not math.isfinite(value.real))):
        return False
    if isinstance(value, Fraction):
        target = Decimal(value.numerator) / Decimal(value.denominator)
    else:
        target = Decimal(value.real)
    if target == 0:
        return False
    step = Decimal(1).scaleb(-len(literal.partition(".")[2]))
    try:  # half-even or half-up: either is a correct rounding of a tie
        written = Decimal(literal)
        return any(target.quantize(step, rounding=mode) == written for mode in (ROUND_HALF_EVEN, ROUND_HALF_UP))
    except InvalidOperation:  # more digits than the context holds: not a rounding anyone wrote
        return False


_WRITTEN_DECIMAL = re.compile(r"[-+]?\d*\.(\d+)")


def within_last_place(text: str, other: Number) -> bool:
    """A decimal is someone's rounding (or truncation) of a value: within one unit of its last written digit,
    never further, however large the number (`2000000.5` is within `rel_tol` of 2000000 and of 2000001 alike)."""
    written = _WRITTEN_DECIMAL.fullmatch(text)
    if written is None:
        return True
    place = Fraction(1, 10 ** len(written.group(1)))
    exact = fraction_of(other)
    if exact is not None:
        return abs(Fraction(text) - exact) <= place
    value = to_complex(other)
    return value is None or abs(value - float(text)) <= float(place) * (1 + 1e-9)
