"""No hedge pays twice: for any completion and any set of references that exclude each other, the math rewards over
the set sum to at most 1, under every convention profile.

The references come from outside this test: every reference of the fixture corpus (cli/data/math/) and of
Math-Verify's suite (fixtures/peers/). From each one the generators derive sets of mutually exclusive references
(the permutations of an ordered or labelled answer, a value with its negation, double, half and square, a.m. against
p.m., the members of a list taken one at a time), and the completions are the hedges a policy would try against
such a set: several members in one box, joined by "or", `\\pm`, a false equation, boxes in a row, a prose sentence
without a marker, a clock time without a.m./p.m., value-changing words. The table of what these found before math@3
is in cli/data/math/README.md ("Exclusive references").
"""

from __future__ import annotations

import itertools
import json
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groupscore.verifiers.math.conventions import PROFILES
from groupscore.verifiers.math.item import MathItem
from groupscore.verifiers.math.normalize import normalize
from groupscore.verifiers.math.numeric import evaluate
from groupscore.verifiers.math.reference import parse_gold
from groupscore.verifiers.math.structures import ClockTime, Expr, Items, parse_structure
from groupscore.verifiers.math.verify import score_math

ROOT = Path(__file__).resolve().parents[3]
SETTINGS = settings(
    max_examples=150, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow]
)


def _references() -> list[str]:
    found = []
    for path in sorted((ROOT / "cli" / "data" / "math").glob("*.jsonl")):
        found += [json.loads(line)["answer"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    suite = ROOT / "fixtures" / "peers" / "math_verify.jsonl"
    found += [c["gold"] for c in map(json.loads, suite.read_text(encoding="utf-8").splitlines()) if c.get("gold")]
    return sorted(set(found))


def _latex(value: Fraction) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    sign = "-" if value < 0 else ""
    return f"{sign}\\frac{{{abs(value.numerator)}}}{{{value.denominator}}}"


Exclusive = tuple[tuple[str, ...], tuple[str, ...]]  # (references that exclude each other, the values a hedge mixes)


def _exclusive_sets(reference: str) -> list[Exclusive]:
    """Sets of references that exclude each other, derived from one reference of the corpus, each with the values
    a hedge against it would combine."""
    text = normalize(parse_gold(reference, "extract"))
    node = parse_structure(text)
    sets: list[Exclusive] = []
    value = evaluate(text) if isinstance(node, Expr) else None
    if value is not None and value.is_exact and not value.approx and value.value != 0:
        v = value.value
        for other in (-v, 2 * v, v / 2, v * v):
            if other != v:
                pair = (_latex(v), _latex(other))
                sets.append((pair, pair))
    if isinstance(node, Items) and node.ordered and 2 <= len(node.items) <= 4:
        parts = tuple(part.text for part in node.items if isinstance(part, Expr))
        if len(parts) == len(node.items) and len(set(parts)) == len(parts):
            orders = list(itertools.permutations(parts))[:6]
            sets.append((tuple(f"({', '.join(order)})" for order in orders), parts))
            if len(parts) == 2:  # the same values as a labelled assignment, both ways
                sets.append((tuple(f"x = {a}, y = {b}" for a, b in itertools.permutations(parts)), parts))
    if isinstance(node, Items) and node.kind in ("list", "set", "or") and 2 <= len(node.items) <= 4:
        members = tuple(part.text for part in node.items if isinstance(part, Expr))
        if len(members) == len(node.items) and len(set(members)) == len(members):
            sets.append((members, members))  # one answer each: a single reference is one member or another
    if isinstance(node, ClockTime) and 1 <= node.hours <= 12:
        clock = f"{node.hours}:{node.minutes:02d}"
        sets.append(((f"{clock} a.m.", f"{clock} p.m."), (clock,)))
    return sets


EXCLUSIVE_SETS = sorted({s for reference in _references() for s in _exclusive_sets(reference)})


HEDGES = {
    "one box, a list": lambda vs: f"$\\boxed{{{', '.join(vs)}}}$",
    "one box, or": lambda vs: f"$\\boxed{{{' \\text{ or } '.join(vs)}}}$",
    "one box, a set": lambda vs: f"$\\boxed{{\\{{{', '.join(vs)}\\}}}}$",
    "boxes in a row": lambda vs: " and ".join(f"$\\boxed{{{v}}}$" for v in vs),
    "a false equation": lambda vs: f"$\\boxed{{{' = '.join(vs)}}}$",
    "a disjunction": lambda vs: f"$\\boxed{{{' \\lor '.join(f'x = {v}' for v in vs)}}}$",
    "a prose hedge": lambda vs: f"It is either {' or '.join(vs)}.",
    "a sentence per value": lambda vs: " ".join(f"Maybe {v}." for v in vs),
    "plus or minus": lambda vs: f"$\\boxed{{\\pm {vs[0].lstrip('-')}}}$",
    "each value alone": lambda vs: f"$\\boxed{{{vs[0]}}}$",
    "the values in order": lambda vs: f"$\\boxed{{({', '.join(vs)})}}$",
    "a value-changing word": lambda vs: f"$\\boxed{{\\text{{negative }} {vs[0].lstrip('-')}}}$",
    "a scale word": lambda vs: f"$\\boxed{{{vs[0]} \\text{{ thousand}}}}$",
}


def _paid(completion: str, references: tuple[str, ...], profile: str) -> list[float]:
    return [
        score_math(MathItem(completion=completion, answer=ref, profile=profile, timeout_s=10.0)).reward
        for ref in references
    ]


def test_the_generators_reach_every_family():
    """The corpus yields sets of each kind, so the property below is about real references, not a handful."""
    assert len(EXCLUSIVE_SETS) >= 300
    references = [refs for refs, _ in EXCLUSIVE_SETS]
    kinds = {
        "permutations": any(s[0].startswith("(") for s in references),
        "labelled": any(s[0].startswith("x = ") for s in references),
        "a.m./p.m.": any(s[0].endswith("a.m.") for s in references),
        "members": any(len(s) > 2 and not s[0].startswith("(") for s in references),
    }
    assert all(kinds.values()), kinds


@pytest.mark.parametrize("profile", sorted(PROFILES))
@SETTINGS
@given(data=st.data())
def test_a_hedge_is_paid_at_most_once_over_exclusive_references(profile, data):
    references, values = data.draw(st.sampled_from(EXCLUSIVE_SETS), label="references")
    name = data.draw(st.sampled_from(sorted(HEDGES)), label="hedge")
    order = data.draw(st.permutations(values), label="order")
    completion = HEDGES[name](order)
    paid = _paid(completion, references, profile)
    assert sum(paid) <= 1.0, (name, completion, references, paid)


@pytest.mark.parametrize("profile", sorted(PROFILES))
@pytest.mark.parametrize(
    "completion, references",
    [
        ("$\\boxed{3, 4}$", ("x=3, y=4", "x=4, y=3")),
        ("$\\boxed{4 \\text{ or } 3}$", ("(4, 3)", "(3, 4)")),
        ("$\\boxed{5 \\text{ or } 2 \\text{ or } 1}$", ("(5, 2, 1)", "(1, 2, 5)", "(2, 1, 5)")),
        ("$\\boxed{\\pm 3}$", ("(3, -3)", "(-3, 3)")),
        ("$\\boxed{1 \\pm \\sqrt{2}}$", ("(1+\\sqrt{2}, 1-\\sqrt{2})", "(1-\\sqrt{2}, 1+\\sqrt{2})")),
        ("$\\boxed{9:00}$", ("9:00 a.m.", "9:00 p.m.")),
        ("$\\boxed{2.000001 \\times 10^{6}}$", ("2000000", "2000001")),
        ("$\\boxed{\\text{negative } 3}$", ("3", "-3")),
        ("$\\boxed{3 \\text{ million}}$", ("3", "3000000")),
    ],
)
def test_the_reviews_hedges_are_paid_at_most_once(profile, completion, references):
    assert sum(_paid(completion, references, profile)) <= 1.0
