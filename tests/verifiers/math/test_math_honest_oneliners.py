"""Honest one-line endings are paid; the same lines with a wrong value, or hedged, are not (math@4).

A model often ends a correct solution with one line and no marker: `Therefore, x = 816.`, `Hence, $x = 816$.`,
`So x = 816`, `Checking: 2(816) = 1632, so x = 816.`, `$17 \\bmod 5 = 2$`. Before math@4 the fallback read such a
line whole when it had no two words in a row (`Therefore, x = 816` was a list of two candidates, `So x = 816` an
equation whose left side is `So x`), so each of these lost its reward against a plain (`816`) and a labelled
(`x = 816`) reference alike, while Math-Verify paid them.

The corpus below is generated: templates (the lead-in words, with or without `$..$`, a display block, a box, a
check before the conclusion) x values (integers, digit groups, fractions, decimals, negatives, percentages,
currency, units, `\\bmod`) x where the line stands (alone, after a line of work, after a paragraph) x reference
styles (plain, labelled, in `$..$`). Each honest line must be paid; the same line with a wrong value must not; and
a hedged line (`x = 816 or x = 817`, `x = 816? maybe 817`, a list of both) must be paid against neither of its values,
so that no hedge is paid twice over references that exclude each other.

Measured on math@3 (default profile): 2,151 of the 3,116 honest lines paid, every one of the issue's 11 cases refused
(under `math_verify`, whose equations are unchecked, `$17 \\bmod 5 = 2$` was paid), no wrong value paid, and 202 of
the 1,632 hedged lines paid (lists, `and`, `or` inside `\\text{}` or before `(`, after a line of work or a paragraph:
read by their last number). math@4: 3,116 of
3,116, 11 of 11, none and none, under both profiles (docs/verifiers/math-answers.md, "Changes in math@4").
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from groupscore.verifiers.math.item import MathItem
from groupscore.verifiers.math.verify import score_math

PROFILES = ("default", "math_verify")


def _reward(completion: str, answer: str, profile: str = "default") -> float:
    return score_math(MathItem(completion=completion, answer=answer, profile=profile, timeout_s=10.0)).reward


@dataclass(frozen=True)
class Value:
    """One answer: how a completion writes it (in plain text, inside `$..$`), the reference, and a wrong value."""

    name: str
    var: str  # the unknown a labelled reference names
    plain: tuple[str, ...]  # spellings in plain text
    math: tuple[str, ...]  # spellings inside $..$
    reference: str  # the plain reference
    wrong_plain: str
    wrong_math: str
    check: str = ""  # a line of work that checks it, for `Checking: <check>, so x = <value>.`
    more_references: tuple[str, ...] = ()


VALUES = (
    Value("integer", "x", ("816",), ("816",), "816", "817", "817", check="2(816) = 1632"),
    Value(
        "digit groups",
        "n",
        ("1,632", "1632"),
        ("1,632", "1{,}632", "1,\\!632"),
        "1632",
        "1,634",
        "1{,}634",
        check="1632 / 2 = 816",
    ),
    Value(
        "fraction",
        "p",
        ("36/95",),
        ("\\frac{36}{95}", "\\dfrac{36}{95}", "36/95"),
        "\\frac{36}{95}",
        "37/95",
        "\\frac{37}{95}",
    ),
    Value("decimal", "t", ("2.5",), ("2.5",), "2.5", "2.6", "2.6", check="4(2.5) = 10"),
    Value("negative", "y", ("-3",), ("-3",), "-3", "-4", "-4", check="2(-3) + 6 = 0"),
    Value("percentage", "r", ("25%",), ("25\\%",), "25", "26%", "26\\%", more_references=("25\\%", "r = 25\\%")),
    Value("currency", "C", ("\\$1,632",), ("\\$1,632", "\\$1632"), "1632", "\\$1,633", "\\$1,633"),
    Value("units", "L", ("816 cm",), ("816 \\text{ cm}", "816\\,\\mathrm{cm}"), "816", "817 cm", "817 \\text{ cm}"),
)

# How the last line states `{v} = {x}`: plain text (`{x}` a plain spelling) or with LaTeX (`{x}` a math spelling).
PLAIN_TEMPLATES = (
    "Therefore, {v} = {x}.",
    "Therefore {v} = {x}.",
    "Hence, {v} = {x}.",
    "So {v} = {x}",
    "So, {v} = {x}.",
    "Thus, {v} = {x}.",
    "Thus {v} = {x}",
    "Therefore, {x}.",
    "so {v} = {x}",
    "This gives {v} = {x}.",
    "Finally, {v} = {x}.",
    "Solving, we find that {v} = {x}.",
    "Therefore, **{v} = {x}**.",
    "Putting it together: {v} = {x}.",
    "Therefore, {v} = {x}. I hope it is correct.",
)
MATH_TEMPLATES = (
    "Hence, ${v} = {x}$.",
    "Hence ${v} = {x}$.",
    "Therefore, ${v} = {x}$.",
    "So ${v} = {x}$",
    "Thus, ${v} = {x}$.",
    "Therefore, ${x}$.",
    "Hence, $\\boxed{{{v} = {x}}}$.",
    "Therefore, \\[ {v} = {x} \\]",
    "Thus,\n\\[\n{v} = {x}\n\\]",
    "Hence,\n$${v} = {x}$$",
    "We get ${v} = {x}$.",
    "Therefore, \\({v} = {x}\\).",
    "**Therefore, ${v} = {x}$.**",
)
CONTEXTS = {
    "alone": "{line}",
    "after a line of work": "We set up the equation 3a + 5 = 20 and solve it step by step.\n{line}",
    "after a paragraph": (
        "Let us read the problem carefully and write down what is known. There are 12 rows of 7 seats, and 5 seats "
        "in each row are taken. Substituting the given values, the remaining terms cancel, and what is left is one "
        "equation in one unknown, which we now solve.\n\n{line}"
    ),
}


def _lines(value: Value, wrong: bool = False) -> list[str]:
    """Every templated last line for `value` (or for its wrong value)."""
    lines = []
    for templates, spellings in ((PLAIN_TEMPLATES, value.plain), (MATH_TEMPLATES, value.math)):
        wrong_spelling = value.wrong_plain if templates is PLAIN_TEMPLATES else value.wrong_math
        for template in templates:
            for spelling in (wrong_spelling,) if wrong else spellings:
                lines.append(template.format(v=value.var, x=spelling))
    if value.check:
        shown = value.wrong_plain if wrong else value.plain[0]
        lines.append(f"Checking: {value.check}, so {value.var} = {shown}.")
        lines.append(f"Checking: ${value.check}$, so ${value.var} = {shown}$.")
    return lines


def _references(value: Value) -> list[str]:
    return [value.reference, f"{value.var} = {value.reference}", f"${value.reference}$", *value.more_references]


# The exact cases of the issue, each refused before math@4.
ISSUE_CASES = [
    ("Therefore, x = 816.", "816"),
    ("Therefore, x = 816.", "x = 816"),
    ("Hence, $x = 816$.", "816"),
    ("Hence, $x = 816$.", "x = 816"),
    ("So x = 816", "816"),
    ("So x = 816", "x = 816"),
    ("Hence $p = 36/95$.", "p = 36/95"),
    ("Hence $p = 36/95$.", "\\frac{36}{95}"),
    ("Checking: 2(816) = 1632, so x = 816.", "816"),
    ("Checking: 2(816) = 1632, so x = 816.", "x = 816"),
    ("$17 \\bmod 5 = 2$", "2"),
]


def honest_cases() -> dict[str, list[tuple[str, str]]]:
    """Family -> the (completion, reference) pairs that must be paid."""
    cases: dict[str, list[tuple[str, str]]] = {"issue": list(ISSUE_CASES)}
    for value in VALUES:
        found = cases.setdefault(value.name, [])
        for line in _lines(value):
            for context in CONTEXTS.values():
                found += [(context.format(line=line), reference) for reference in _references(value)]
    lines = ("$17 \\bmod 5 = 2$", "Therefore, $17 \\bmod 5 = 2$.", "So $r = 17 \\bmod 5 = 2$.", "So 17 mod 5 = 2.")
    cases["bmod"] = [(context.format(line=line), "2") for line in lines for context in CONTEXTS.values()]
    return {family: list(dict.fromkeys(found)) for family, found in cases.items()}


def wrong_cases() -> list[tuple[str, str]]:
    """The honest lines with a wrong value, against the right references: never paid."""
    cases = []
    for value in VALUES:
        for line in _lines(value, wrong=True):
            for context in CONTEXTS.values():
                cases += [(context.format(line=line), reference) for reference in _references(value)]
    for line in ("$17 \\bmod 5 = 3$", "Therefore, $17 \\bmod 5 = 3$.", "So $r = 17 \\bmod 5 = 3$."):
        cases += [(context.format(line=line), "2") for context in CONTEXTS.values()]
    return list(dict.fromkeys(cases))


HEDGE_TEMPLATES = (
    "{v} = {x} or {v} = {w}",
    "{v} = {x}? maybe {w}",
    "Therefore, {v} = {x} or {v} = {w}.",
    "Therefore, {v} = {x}, or maybe {v} = {w}.",
    "So {v} = {x}? Maybe {v} = {w}.",
    "Hence, ${v} = {x}$ or ${v} = {w}$.",
    "Hence, ${v} = {x}$ or ${w}$.",
    "Thus, {v} = {x}, {w}.",
    "Therefore, ${v} = {x}, {w}$.",
    "So {v} is either {x} or {w}.",
    "Therefore, {v} = {x} \\text{{ or }} {w}.",
    "Thus, $\\boxed{{{v} = {x} \\text{{ or }} {v} = {w}}}$.",
    "Checking: {v} = {x} works, so {v} = {x} or {v} = {w}.",
    "Therefore, ${v} = {x}$ (or ${w}$).",
    "Hence {v} = {x} and {v} = {w}.",
    "Therefore, ${v} \\in \\{{{x}, {w}\\}}$.",
    "So {v} = {x}. Or maybe {v} = {w}.",
)


def hedge_cases() -> list[tuple[str, tuple[str, str]]]:
    """(completion, (reference of one value, reference of the other)): a hedge is paid against neither."""
    cases = []
    for value in VALUES:
        spelling, wrong = value.math[0], value.wrong_math
        for template in HEDGE_TEMPLATES:
            for first, second in ((spelling, wrong), (wrong, spelling)):
                line = template.format(v=value.var, x=first, w=second)
                for context in CONTEXTS.values():
                    completion = context.format(line=line)
                    cases.append((completion, (value.reference, wrong)))
                    cases.append((completion, (f"{value.var} = {value.reference}", f"{value.var} = {wrong}")))
    return cases


HONEST_BY_FAMILY = honest_cases()
HONEST = [case for found in HONEST_BY_FAMILY.values() for case in found]
WRONG = wrong_cases()
HEDGES = hedge_cases()


def test_the_corpus_is_large_and_reaches_every_family():
    assert len(HONEST) >= 600 and len(WRONG) >= 300 and len(HEDGES) >= 400
    assert all(case in HONEST for case in ISSUE_CASES)
    every = " ".join(completion for completion, _ in HONEST)
    for piece in ("Therefore,", "Hence", "So ", "Thus", "\\boxed", "\\[", "$$", "Checking:", "\\bmod", "1,632", "\\%"):
        assert piece in every, piece


@pytest.mark.parametrize("completion, answer", ISSUE_CASES)
@pytest.mark.parametrize("profile", PROFILES)
def test_the_issues_cases_are_paid(profile, completion, answer):
    assert _reward(completion, answer, profile) == 1.0


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("family", sorted(HONEST_BY_FAMILY))
def test_every_honest_one_liner_is_paid(profile, family):
    unpaid = [(c[-60:], a) for c, a in HONEST_BY_FAMILY[family] if _reward(c, a, profile) != 1.0]
    assert not unpaid, f"{len(unpaid)} unpaid: {unpaid[:10]}"


@pytest.mark.parametrize("profile", PROFILES)
def test_a_wrong_value_is_never_paid(profile):
    paid = [(c[-60:], a) for c, a in WRONG if _reward(c, a, profile) != 0.0]
    assert not paid, f"{len(paid)} paid: {paid[:10]}"


@pytest.mark.parametrize("profile", PROFILES)
def test_a_hedge_is_paid_against_neither_value(profile):
    paid = []
    for completion, references in HEDGES:
        rewards = [_reward(completion, reference, profile) for reference in references]
        if any(rewards):
            paid.append((completion[-70:], references, rewards))
    assert not paid, f"{len(paid)} paid: {paid[:10]}"


@pytest.mark.parametrize(
    "completion, answer",
    [
        ("Therefore, x = 816 (cm).", "816"),  # a statement normalisation cannot read whole: its last number
        ("Therefore, x = 816 \u2713", "816"),
        ("Hence x = 816, as required.", "816"),  # prose after the value
        ("Thus p = 36/95 \u2248 0.379.", "0.379"),
        ("I had 3 apples and ate 1, so 2 are left.", "2"),
    ],
)
def test_a_sentence_is_never_read_whole(completion, answer):
    assert _reward(completion, answer) == 1.0


@pytest.mark.parametrize(
    "completion, answer",
    [
        ("\\left( \\frac{1}{2},\n \\frac{3}{4} \\right)", "\\left(\\frac12, \\frac34\\right)"),
        ("We solve the system.\n(x, y) = (3,\n 4).", "(3, 4)"),
        (
            "We solve the system.\n$$\\begin{pmatrix} 1 \\\\\n 2 \\end{pmatrix}$$",
            "\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}",
        ),
    ],
)
def test_an_answer_across_lines_is_one_statement(completion, answer):
    assert _reward(completion, answer) == 1.0


@pytest.mark.parametrize(
    "completion, answer",
    [
        ("Therefore, y = 816.", "x = 816"),  # another unknown, as `\boxed{y = 816}` is
        ("Therefore, x is not 816.", "816"),
        ("So the count is at most 816.", "816"),
        ("Therefore, x = 816 or more.", "816"),
        ("Either way, x = 816 or 817.", "816"),
        ("Hence, $x \\in \\{816, 817\\}$.", "816"),
        ("Thus, $x = \\pm 816$.", "816"),
        ("Therefore, $x = 816 \\lor x = 817$.", "817"),
    ],
)
@pytest.mark.parametrize("profile", PROFILES)
def test_what_the_statement_does_not_pay(profile, completion, answer):
    assert _reward(completion, answer, profile) == 0.0
