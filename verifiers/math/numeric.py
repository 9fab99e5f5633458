"""A small, bounded evaluator for numeric answers (no sympy): the fast path's numeric step.

It reads the normalised LaTeX of a closed-form number (integers, decimals, fractions, roots, powers with modest
exponents, pi, e, i, infinity, a few functions) and returns its value, or None when the text is anything else.
Values are exact Fractions while only rational operations are involved; every size is capped so that no input
can make it slow (no huge powers or factorials, bounded nesting).

With variables bound to sample points it also reports whether the expression is one where agreeing at sample points
means anything: `|x|`, roots, logs and non-integer powers of a varying value are piecewise or branch-dependent, so
two such expressions can agree at every sample and still differ elsewhere (`|x-1|` and `1-x`).
"""

from __future__ import annotations

import cmath
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction

MAX_EXPONENT = 10_000
MAX_RESULT_BITS = 100_000
MAX_FACTORIAL = 1_000
MAX_DEPTH = 60
FLOAT_NOISE = 1e-10  # relative error float arithmetic may add to an exact closed form like e^{16}-1

_TOKEN = re.compile(r"\d+(?:\.\d+)?|\\[a-zA-Z]+|[a-zA-Z]|\S")
_FUNCS = {
    r"\exp": cmath.exp,
    r"\ln": cmath.log,
    r"\log": cmath.log,
    r"\sin": cmath.sin,
    r"\cos": cmath.cos,
    r"\tan": cmath.tan,
}
_MULTIVALUED = {r"\ln", r"\log"}  # branch cuts: log(x^2) and 2 log(x) agree for x > 0 only
_MULTIPLY = {"*", r"\cdot", r"\times"}
_DIVIDE = {"/", r"\div"}
_MODULO = {r"\bmod", r"\mod"}  # `17 \bmod 5` is 2: the remainder, an operator of the product's rank


class NotNumeric(Exception):
    """The text is not a closed-form number this evaluator handles."""


@dataclass(frozen=True)
class Number:
    value: Fraction | complex  # a Fraction while only rational operations took part
    approx: bool  # a decimal literal took part: someone rounded, so compare with the item's tolerance
    varying: bool = False  # a bound variable took part (the value depends on the sample point)
    sample_sound: bool = True  # no varying value went through |.|, a root, a log or a non-integer power

    @property
    def is_exact(self) -> bool:
        return isinstance(self.value, Fraction)


def _approx(value: complex, *operands: Number, sound: bool = True) -> Number:
    """A float result; it counts as approximate only if a decimal literal went into it."""
    if cmath.isnan(value):
        raise NotNumeric("nan")
    return Number(
        complex(value),
        any(o.approx for o in operands),
        any(o.varying for o in operands),
        sound and all(o.sample_sound for o in operands),
    )


def fraction_of(n: Number) -> Fraction | None:
    """The exact rational value, or None for a float result (`is_exact`, in a form the type checker reads)."""
    return n.value if isinstance(n.value, Fraction) else None


def _integer_of(n: Number) -> int | None:
    value = fraction_of(n)
    return value.numerator if value is not None and value.denominator == 1 else None


def _exact(value: Fraction, *operands: Number) -> Number:
    """An exact result of a rational operation on `operands`."""
    return Number(
        value, any(o.approx for o in operands), any(o.varying for o in operands), all(o.sample_sound for o in operands)
    )


def _unsound_if_varying(*operands: Number) -> bool:
    """The sound flag after a piecewise or multi-valued operation on `operands`."""
    return not any(o.varying for o in operands)


def _as_complex(n: Number) -> complex:
    return complex(n.value) if isinstance(n.value, Fraction) else n.value


def _int_root(n: int, k: int) -> int | None:
    if k == 2:
        r = math.isqrt(n)
        return r if r * r == n else None
    try:
        r = round(n ** (1 / k))
    except OverflowError:
        return None
    return next((c for c in (r - 1, r, r + 1) if c >= 0 and c**k == n), None)


def _exact_root(q: Fraction, k: int) -> Fraction | None:
    """The exact k-th root of a non-negative rational when it is rational, else None."""
    if q < 0:
        return None
    num, den = _int_root(q.numerator, k), _int_root(q.denominator, k)
    return Fraction(num, den) if num is not None and den is not None else None


GREEK = frozenset(
    (
        r"\alpha \beta \gamma \delta \theta \lambda \mu \phi \varphi \omega \sigma \tau \rho \psi"
        r" \xi \eta \zeta \kappa \nu"
    ).split()
)


class _Reader:
    def __init__(self, text: str, variables: Mapping[str, complex]) -> None:
        self.tokens = _TOKEN.findall(text)
        self.pos = 0
        self.depth = 0
        self.variables = variables

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        tok = self.peek()
        if tok is None or (expected is not None and tok != expected):
            raise NotNumeric(f"expected {expected!r}")
        self.pos += 1
        return tok

    def group(self) -> Number:
        """A braced group, or (as LaTeX allows) a single token: `\\frac12`, `x^2`."""
        if self.peek() == "{":
            self.take("{")
            value = self.expr()
            self.take("}")
            return value
        return self.atom()

    def expr(self) -> Number:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise NotNumeric("nesting too deep")
        value = self.term()
        while self.peek() in ("+", "-"):
            op = self.take()
            rhs = self.term()
            value = _add(value, rhs if op == "+" else _neg(rhs))
        self.depth -= 1
        return value

    def term(self) -> Number:
        value = self.unary()
        while True:
            tok = self.peek()
            if tok in _MULTIPLY:
                self.take()
                value = _mul(value, self.unary())
            elif tok in _DIVIDE:
                self.take()
                value = _div(value, self.unary())
            elif tok in _MODULO:
                self.take()
                value = _mod(value, self.unary())
            elif tok is not None and _starts_atom(tok):
                value = _mul(value, self.power())  # implicit product: 2\pi, 3\sqrt{2}, 2(3+1)
            else:
                return value

    def unary(self) -> Number:
        if self.peek() == "-":
            self.take()
            return _neg(self.unary())
        if self.peek() == "+":
            self.take()
            return self.unary()
        return self.power()

    def power(self) -> Number:
        base = self.postfix()
        if self.peek() == "^":
            self.take()
            if self.peek() == "-":
                self.take()
                exponent = _neg(self.group())
            else:
                exponent = self.group()
            return _pow(base, exponent)
        return base

    def postfix(self) -> Number:
        value = self.atom()
        while self.peek() == "!":
            self.take()
            value = _factorial(value)
        return value

    def atom(self) -> Number:
        tok = self.take()
        if tok[0].isdecimal():
            if "." in tok:
                return Number(Fraction(tok), True)
            if len(tok) > 400:
                raise NotNumeric("literal too long")
            return Number(Fraction(int(tok)), False)
        if tok == "|":  # |x|; an implicit product like 2|x| is left to sympy
            inner = self.expr()
            self.take("|")
            inner_value = fraction_of(inner)
            if inner_value is not None:
                return _exact(abs(inner_value), inner)
            return _approx(abs(_as_complex(inner)), inner, sound=_unsound_if_varying(inner))
        if tok == r"\binom":
            n, k = self.group(), self.group()
            return _binomial(n, k)
        if tok in ("(", "[", "{"):
            close = {"(": ")", "[": "]", "{": "}"}[tok]
            value = self.expr()
            self.take(close)
            return value
        if tok == r"\frac":
            num = self.group()
            den = self.group()
            return _div(num, den)
        if tok == r"\sqrt":
            index = 2
            if self.peek() == "[":
                self.take("[")
                idx = _integer_of(self.expr())
                self.take("]")
                if idx is None or not 2 <= idx <= 64:
                    raise NotNumeric("root index")
                index = idx
            return _root(self.group(), index)
        if tok == r"\pi":
            return Number(complex(math.pi, 0.0), False)
        if tok == "e":
            return Number(complex(math.e, 0.0), False)
        if tok == "i":
            return Number(1j, False)
        if tok == r"\infty":
            return Number(complex(math.inf, 0.0), False)
        if tok in self.variables:
            return Number(self.variables[tok], False, varying=True)
        if tok == r"\log" and self.peek() == "_":
            self.take("_")
            base = self.group()
            arg = self.power() if self.peek() in ("(", "{") else self.unary()
            logs = (_apply_function(cmath.log, x, analytic=False) for x in (arg, base))
            return _div(next(logs), next(logs))
        if tok in _FUNCS:
            exponent = None
            if self.peek() == "^":  # \sin^2 x is (\sin x)^2; \sin^{-1} is arcsin, left to sympy
                self.take("^")
                exponent = self.group()
                power = _integer_of(exponent)
                if power is None or power <= 0:
                    raise NotNumeric("inverse function")
            arg = self.power() if self.peek() in ("(", "{") else self.unary()
            value = _apply_function(_FUNCS[tok], arg, analytic=tok not in _MULTIVALUED)
            return value if exponent is None else _pow(value, exponent)
        raise NotNumeric(f"unsupported token {tok!r}")


def _apply_function(fn: Callable[[complex], complex], arg: Number, analytic: bool) -> Number:  # fn: from cmath
    try:
        return _approx(fn(_as_complex(arg)), arg, sound=analytic or _unsound_if_varying(arg))
    except (OverflowError, ValueError, ZeroDivisionError) as exc:
        raise NotNumeric(str(exc)) from None


def _starts_atom(tok: str) -> bool:
    return (
        tok[0].isdecimal()
        or (len(tok) == 1 and tok.isalpha())
        or tok in ("(", r"\frac", r"\sqrt", r"\pi", r"\infty", r"\log", r"\binom")
        or tok in _FUNCS
        or tok in GREEK
    )


def _neg(a: Number) -> Number:
    value = fraction_of(a)
    return _exact(-value, a) if value is not None else _approx(-_as_complex(a), a)


def _add(a: Number, b: Number) -> Number:
    x, y = fraction_of(a), fraction_of(b)
    if x is not None and y is not None:
        return _exact(x + y, a, b)
    return _approx(_as_complex(a) + _as_complex(b), a, b)


def _mul(a: Number, b: Number) -> Number:
    x, y = fraction_of(a), fraction_of(b)
    if x is not None and y is not None:
        if x.numerator.bit_length() + y.numerator.bit_length() > MAX_RESULT_BITS:
            raise NotNumeric("too large")
        return _exact(x * y, a, b)
    return _approx(_as_complex(a) * _as_complex(b), a, b)


def _div(a: Number, b: Number) -> Number:
    if b.value == 0:
        raise NotNumeric("division by zero")
    x, y = fraction_of(a), fraction_of(b)
    if x is not None and y is not None:
        return _exact(x / y, a, b)
    return _approx(_as_complex(a) / _as_complex(b), a, b)


def _mod(a: Number, b: Number) -> Number:
    """The remainder of one integer by another, the modulus's sign (`17 \\bmod 5` = 2, `-3 \\bmod 5` = 2). Only for
    integers that do not vary: the remainder of a variable is piecewise, left to the exact comparison."""
    x, y = _integer_of(a), _integer_of(b)
    if x is None or y is None or y == 0 or a.varying or b.varying:
        raise NotNumeric("remainder of non-integers")
    return _exact(Fraction(x % y), a, b)


def _root(a: Number, index: int) -> Number:
    value = fraction_of(a)
    if value is not None:
        exact = _exact_root(value, index)
        if exact is not None:
            return _exact(exact, a) if not a.varying else _approx(complex(exact), a, sound=False)
        if value < 0:
            if index % 2 == 1:  # the real odd root, as a student means it
                return _approx(-(float(-value) ** (1 / index)), a, sound=_unsound_if_varying(a))
            return _approx(1j * float(-value) ** (1 / index), a, sound=_unsound_if_varying(a))
        return _approx(float(value) ** (1 / index), a, sound=_unsound_if_varying(a))
    return _approx(_as_complex(a) ** (1 / index), a, sound=_unsound_if_varying(a))


def _pow(base: Number, exponent: Number) -> Number:
    e = _integer_of(exponent)
    if e is not None:
        if abs(e) > MAX_EXPONENT:
            raise NotNumeric("exponent too large")
        value = fraction_of(base)
        if value is not None:
            if value == 0 and e < 0:
                raise NotNumeric("division by zero")
            bits = max(value.numerator.bit_length(), value.denominator.bit_length())
            if bits * abs(e) > MAX_RESULT_BITS:
                raise NotNumeric("power too large")
            return _exact(value**e, base, exponent)
    # x^n and b^x with a fixed positive b (exp(x log b)) are analytic; other powers of a varying value have branches.
    integer_power = e is not None
    try:
        b, x = _as_complex(base), _as_complex(exponent)
        fixed_base = not base.varying and b.imag == 0 and b.real > 0
        sound = integer_power or fixed_base or not (base.varying or exponent.varying)
        if abs(x) > MAX_EXPONENT:
            raise NotNumeric("exponent too large")
        if b.imag == 0 and x.imag == 0 and b.real < 0 and x.real != int(x.real):
            raise NotNumeric("negative base, fractional power")
        if b == complex(math.e, 0):
            return _approx(cmath.exp(x), base, exponent, sound=sound)
        return _approx(b**x, base, exponent, sound=sound)
    except (OverflowError, ZeroDivisionError, ValueError) as exc:
        raise NotNumeric(str(exc)) from None


def _binomial(n: Number, k: Number) -> Number:
    top, bottom = _integer_of(n), _integer_of(k)
    if top is None or bottom is None:
        raise NotNumeric("binomial arguments")
    if not (0 <= top <= MAX_FACTORIAL):
        raise NotNumeric("binomial too large")
    return Number(Fraction(math.comb(top, bottom) if bottom >= 0 else 0), n.approx or k.approx)


def _factorial(a: Number) -> Number:
    whole = _integer_of(a)
    if whole is None or not 0 <= whole <= MAX_FACTORIAL:
        raise NotNumeric("factorial argument")
    return Number(Fraction(math.factorial(whole)), a.approx)


def evaluate(text: str, variables: Mapping[str, complex] | None = None) -> Number | None:
    """The value of a normalised closed-form number (with `variables` bound, if given), or None if it is not one."""
    if not text or len(text) > 2000:
        return None
    reader = _Reader(text, variables or {})
    try:
        value = reader.expr()
        if reader.peek() is not None:
            return None
        return value
    except (NotNumeric, RecursionError, OverflowError, ZeroDivisionError):
        return None


def to_complex(n: Number) -> complex | None:
    """The value as a complex float, or None when an exact value is too large for a float."""
    try:
        return _as_complex(n)
    except OverflowError:
        return None


_COMMAND = re.compile(r"\\[a-zA-Z]+")
_LETTER = re.compile(r"[a-zA-Z]")


def free_variables(text: str) -> frozenset[str]:
    """The variables a normalised text names: letters other than the constants e and i, and Greek letters."""
    names = {cmd for cmd in _COMMAND.findall(text) if cmd in GREEK}
    names.update(ch for ch in _LETTER.findall(_COMMAND.sub(" ", text)) if ch not in "ei")
    return frozenset(names)
