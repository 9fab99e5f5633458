"""Limits checked on an answer's text before sympy may see it: no towers, huge powers or factorials, deep nesting.

Pure string work, linear in the text, with no sympy import: the fast path runs these checks too, so an answer past
the limits is refused in-process instead of occupying a worker until its budget runs out.
"""

from __future__ import annotations

import re

from groupscore.verifiers.math.numeric import MAX_EXPONENT, MAX_FACTORIAL, evaluate

MAX_CHARS = 1000
MAX_DEPTH = 30

_DIGITS = re.compile(r"\d+")


class TooComplex(Exception):
    """The expression is past the limits we hand to sympy."""


def _group_after(text: str, i: int) -> str:
    """The exponent (or other argument) starting at text[i]: a braced group, a number, or one character."""
    if i >= len(text):
        return ""
    if text[i] == "{":
        depth = 0
        for j in range(i, len(text)):
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            if depth == 0:
                return text[i + 1 : j]
        return text[i + 1 :]
    match = _DIGITS.match(text, i)
    return match.group(0) if match else text[i]


def _group_before(text: str, i: int) -> str:
    """The operand that ends just before text[i] (for a postfix `!`)."""
    if i == 0:
        return ""
    if text[i - 1] in ")}":
        close, opener = text[i - 1], "(" if text[i - 1] == ")" else "{"
        depth = 0
        for j in range(i - 1, -1, -1):
            depth += {close: 1, opener: -1}.get(text[j], 0)
            if depth == 0:
                return text[j + 1 : i - 1]
        return text[: i - 1]
    j = i
    while j > 0 and text[j - 1].isdigit():
        j -= 1
    return text[j:i] if j < i else text[i - 1]


def check_limits(text: str) -> None:
    """Raise TooComplex for input that could make sympy run away; linear in the text's length."""
    if len(text) > MAX_CHARS:
        raise TooComplex(f"longer than {MAX_CHARS} characters")
    depth = 0
    for ch in text:
        if ch in "([{":
            depth += 1
            if depth > MAX_DEPTH:
                raise TooComplex(f"nested deeper than {MAX_DEPTH}")
        elif ch in ")]}":
            depth -= 1
    for i, ch in enumerate(text):
        if ch == "^":
            exponent = _group_after(text, i + 1).strip().lstrip("-+")
            if "^" in exponent or "!" in exponent:
                raise TooComplex("tower of exponents")
            value = evaluate(exponent)
            if value is not None and abs(complex(value.value)) > MAX_EXPONENT:
                raise TooComplex("exponent too large")
            if value is None and any(len(d) > 5 for d in _DIGITS.findall(exponent)):
                raise TooComplex("exponent too large")
        elif ch == "!" and not text.startswith("!=", i):
            operand = _group_before(text, i)
            value = evaluate(operand)
            if "^" in operand or "!" in operand:
                raise TooComplex("factorial of a power")
            if value is not None and (abs(complex(value.value)) > MAX_FACTORIAL):
                raise TooComplex("factorial too large")
            if value is None and any(len(d) > 3 for d in _DIGITS.findall(operand)):
                raise TooComplex("factorial too large")
