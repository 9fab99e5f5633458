"""Conventions graders disagree on (percent, decimal comma, precision, order, names, clocks, scales), as one value.

Each is a field of the math item (docs/verifiers/math-conventions.md); `profile` picks a bundle and explicit fields win.
The grader receives one frozen `Conventions`, so cached outcomes are keyed by it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields, replace
from typing import Any, Literal

Percent = Literal["number", "fraction", "both"]
Order = Literal["written", "any"]
Profile = Literal["default", "math_verify"]


@dataclass(frozen=True)
class Conventions:
    percent: Percent = "number"  # `10\%` is 10 ("number"), 0.1 ("fraction"), or either ("both")
    decimal_comma: bool = False  # `1,5` is 1.5 (when it cannot be a thousands group), not the list 1, 5
    significant_digits: int | None = None  # None: exact; N: a decimal that rounds the exact value to >= N digits
    order: Order = "written"  # "written": tuples ordered, lists/sets not; "any": tuples order-free as well
    rename_variables: bool = False  # `f(y) = y^2` for `f(x) = x^2`: one variable, consistently renamed
    clock_12h: bool = False  # a time without a.m./p.m. matches either (`9:00` for `9:00 p.m.`), not only 9 a.m.
    scale_words: bool = False  # `3 \\text{ million}` is 3000000 (off: a scale word is part of the answer, not a unit)
    scientific_tolerance: bool = False  # `2.000001 \\times 10^{6}` is a rounded value, matched within `rel_tol`
    check_equations: bool = True  # `2+3=5` states 5 because it holds; off: the last side counts (`3=4` states 4)
    # Read from the item's other fields, not set as such: a `rel_tol` the item sets is its tolerance, as stated; left
    # unset, a written decimal is also held to the precision it is written to (closeness.within_written_precision).
    written_precision: bool = True
    ratio_question: bool = False  # the question asks for a ratio: `1:15` is a ratio, not a clock time


PROFILES: dict[str, Conventions] = {
    # For RL rewards: the value as written, nothing a policy could learn to exploit (docs/verifiers/math-conventions.md)
    "default": Conventions(),
    # Math-Verify's choices: a percentage is its number or its fraction (`9\\%` = 9, `10\\%` = 0.1), an equation states
    # its last side unchecked (`x = 5+5+1 = 7 = 11` states 11). Its decimal comma
    # (plain `1,22` = 1.22, `\\boxed{1,2}` a list) is every profile's reading (normalize.decimal_comma_reading).
    "math_verify": Conventions(percent="both", check_equations=False),
}

_RATIO_QUESTION = re.compile(r"\bratios?\b|\bproportion|:\s*\?|\bin the form\s+\$?[a-z]\s*:\s*[a-z]", re.IGNORECASE)


# The conventions an item sets field by field (the item model has a field of each name); `ratio_question` is read
# from the question, `written_precision` from `rel_tol`.
DERIVED = frozenset({"ratio_question", "written_precision"})
_FIELDS = tuple(field.name for field in fields(Conventions) if field.name not in DERIVED)
_ASKED = frozenset((*_FIELDS, "question", "rel_tol"))


def conventions_for(
    profile: str, question: str | None = None, rel_tol: float | None = None, **explicit: Any
) -> Conventions:
    """The profile's conventions with the explicit fields (those not None) applied over them."""
    chosen = replace(PROFILES[profile], **{k: v for k, v in explicit.items() if v is not None})
    if question and _RATIO_QUESTION.search(question[-2000:]):  # the ask is at the end of a long statement
        chosen = replace(chosen, ratio_question=True)
    if rel_tol is not None:
        chosen = replace(chosen, written_precision=False)
    return chosen


def conventions_of(item: object) -> Conventions:
    """The conventions a math item asks for (its profile, its explicit fields, its question)."""
    profile = getattr(item, "profile", "default")
    if _ASKED.isdisjoint(getattr(item, "model_fields_set", _ASKED)):
        return PROFILES[profile]  # the common case in a batch: nothing beyond the profile was set
    explicit = {name: getattr(item, name, None) for name in _FIELDS}
    question, rel_tol = getattr(item, "question", None), getattr(item, "rel_tol", None)
    if question is None and rel_tol is None and all(value is None for value in explicit.values()):
        return PROFILES[profile]  # every field set, to None (an item round-tripped through model_dump)
    return conventions_for(profile, question, rel_tol, **explicit)


DEFAULT = Conventions()
