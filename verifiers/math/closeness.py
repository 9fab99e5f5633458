"""When two numbers are the same answer: exact values exactly, a written decimal as a rounding (within the item's
`rel_tol` and within one unit of its last digit), and, under `significant_digits`, a correct rounding of an exact value.
"""

from __future__ import annotations

import cmath
import math
import re
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal, InvalidOperation
from fractions import Fraction

from groupscore.verifiers.math.numeric import FLOAT_NOISE, Number, to_complex


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


# The decimals a text writes: each one's digits after the point say how finely its writer rounded.
_DECIMAL_FRACTION = re.compile(r"(?<![\d.])\d*\.(\d+)")
# Float arithmetic (a calculator, a Python tool) leaves a few units in the 16th digit: never a different answer.
FLOAT_PRECISION = 1e-15


def _unit(text: str) -> Fraction | None:
    """One unit of the finest digit `text` writes after a decimal point, or None when it writes no decimal."""
    digits = [len(m) for m in _DECIMAL_FRACTION.findall(text)]
    return Fraction(1, 10 ** max(digits)) if digits else None


def within_written_precision(pred: str, p: complex | Fraction, gold: str, g: complex | Fraction) -> bool:
    """Whether a value written with decimals is a rounding or truncation of the other side at the precision it is
    written to, however large the numbers: `rel_tol` alone paid `2000000.5` (or `2000000 + 0.5`) against 2000000 and
    2000001 alike. Against an exact value, the written one may be up to half a unit above it (rounded up) or up to one
    unit below it (rounded down or truncated), in its last written digit; between two written decimals the coarser
    one decides; float noise (1e-15 relative) never matters. Texts without decimals are not restricted here."""
    p_unit, g_unit = _unit(pred), _unit(gold)
    if p_unit is None and g_unit is None:
        return True
    if isinstance(p, Fraction) and isinstance(g, Fraction):
        p_real, g_real = p, g
    else:
        pc, gc = complex(p), complex(g)
        if pc.imag != 0 or gc.imag != 0:
            return abs(pc - gc) <= float(max(u for u in (p_unit, g_unit) if u is not None))
        p_real, g_real = Fraction(pc.real), Fraction(gc.real)
    scale = max(abs(p_real), abs(g_real))
    if abs(p_real - g_real) <= Fraction(FLOAT_PRECISION) * scale:
        return True
    if p_unit is not None and g_unit is not None:
        return abs(p_real - g_real) <= max(p_unit, g_unit) / 2
    written, exact, unit = (p_real, g_real, p_unit) if p_unit is not None else (g_real, p_real, g_unit)
    assert unit is not None
    short = (exact - written) if written >= 0 else (written - exact)  # how far the written value falls short
    return -unit / 2 <= short < unit
