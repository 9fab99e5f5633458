"""Answer comparison: the entry points, the conventions that rewrite a whole answer, and the verdict's wording.

`compare_answers` reads both answers into structures (structures.py), drops a label only one side carries
(labels.py), refuses a hedge, and lets a `Judge` match them shape by shape (matching.py), single expressions through
the cheapest-first leaf cascade (leaves.py: string, numbers, sample points, sympy). The fast path (`symbolic=False`)
never touches sympy: where it cannot decide it answers `equal=None`, and the caller re-runs the comparison with
`symbolic=True` in a bounded worker process (`symbolic_outcome`), where sympy is imported on first use.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from groupscore.verifiers.math.caching import short_key_cache
from groupscore.verifiers.math.conventions import DEFAULT, Conventions
from groupscore.verifiers.math.labels import assigned_names, has_relation, one_label, unlabel
from groupscore.verifiers.math.leaves import MAX_LEAF_COMPARISONS, TooManyComparisons, Tri
from groupscore.verifiers.math.matching import Judge
from groupscore.verifiers.math.normalize import PERCENT_MARK
from groupscore.verifiers.math.numeric import free_variables
from groupscore.verifiers.math.structures import (
    Choice,
    ClockTime,
    Expr,
    Items,
    Node,
    Ratio,
    Relation,
    is_variable,
    parse_structure,
)


@dataclass(frozen=True)
class Comparison:
    """The result of comparing a predicted answer with the reference."""

    equal: Tri  # None: the fast path needs sympy, or (symbolic path) the prediction could not be read
    method: str  # the costliest test that decided: string, numeric, sample, symbolic, structure
    reason: str = ""
    hedge: bool = False
    too_complex: bool = False  # a guard refused to hand an expression to sympy


def _describe(pred: Node, gold: Node) -> tuple[bool, str]:
    """Whether the prediction hedges against this reference, and why."""
    single_gold = isinstance(gold, Expr | Choice | ClockTime | Ratio) or (isinstance(gold, Relation) and gold.op == "=")
    if isinstance(pred, Items) and len(pred.items) > 1 and single_gold:
        return True, f"hedge: {len(pred.items)} candidate answers against a single reference"
    if (
        isinstance(pred, Expr)
        and is_variable(pred.text)
        and not isinstance(gold, Choice)
        and not (isinstance(gold, Expr) and is_variable(gold.text))
    ):
        return True, "hedge: a bare variable is not an answer"
    return False, ""


def compare_answers(
    pred: str, gold: str, rel_tol: float, symbolic: bool, conventions: Conventions = DEFAULT
) -> Comparison:
    """Compare two normalised answers. With symbolic=False this never imports sympy and may answer equal=None.

    The conventions that rewrite a whole answer act here: the percent reading(s), a renamed variable (a decimal comma
    is read by `normalize`, which sees the spaces).
    """
    if conventions.rename_variables:
        pred = _renamed(pred, gold)
    readings = _percent_readings(pred, gold, conventions.percent)
    outcome = _compare(*readings[0], rel_tol, symbolic, conventions)
    for other in readings[1:]:  # "both": either reading of the percentage may pay
        if outcome.equal is True:
            break
        alternative = _compare(*other, rel_tol, symbolic, conventions)
        if alternative.equal is True or (alternative.equal is None and outcome.equal is False):
            outcome = alternative
    return outcome


def _percent_readings(pred: str, gold: str, percent: str) -> list[tuple[str, str]]:
    """(pred, gold) as the percent convention reads them: `25\\%` as 25 ("number") or as 1/4 ("fraction")."""
    marked = (pred.endswith(PERCENT_MARK), gold.endswith(PERCENT_MARK))
    number = (pred.removesuffix(PERCENT_MARK), gold.removesuffix(PERCENT_MARK))
    if not any(marked):
        return [number]
    pred_f, gold_f = (f"\\frac{{{t}}}{{100}}" if m else t for t, m in zip(number, marked))
    fraction = (pred_f, gold_f)
    if percent == "number":
        return [number]
    if percent == "fraction":
        return [fraction]
    return [number, fraction]


_LETTER_NAME = "(?<![\\\\a-zA-Z]){}(?![a-zA-Z])"


def _renamed(pred: str, gold: str) -> str:
    """`pred` with its one variable renamed to the reference's one (`f(y) = y^2` -> `f(x) = x^2`), when the two
    answers differ in exactly that one name and the new name is not already used."""
    mine, theirs = free_variables(pred), free_variables(gold)
    extra, missing = mine - theirs, theirs - mine
    if len(extra) != 1 or len(missing) != 1:
        return pred
    (old,), (new,) = extra, missing
    if len(old) != 1 or len(new) != 1:
        return pred  # single letters only; a Greek command is not renamed
    return re.sub(_LETTER_NAME.format(old), new, pred)


def _compare(pred: str, gold: str, rel_tol: float, symbolic: bool, conventions: Conventions) -> Comparison:
    pred_node, gold_node = parse_structure(pred), parse_structure(gold)
    # A label on one side only (`(p,q)=(3,2)` against `(3,2)`) is dropped; two relations are compared as relations.
    if not has_relation(gold_node):
        pred_node = unlabel(pred_node)
    if not has_relation(pred_node):
        gold_node = unlabel(gold_node)
    if one_label(pred_node) and one_label(gold_node):  # `W(x)=1 or W(x)=-1` against `W(n)=1, W(n)=-1`
        pred_node, gold_node = unlabel(pred_node), unlabel(gold_node)
    names = assigned_names(pred_node)
    if names and names == assigned_names(gold_node) and type(pred_node) is not type(gold_node):
        # `(x, y) = (3, 4)` against `x = 3, y = 4`: the same unknowns, each side in its labels' order
        pred_node, gold_node = unlabel(pred_node), unlabel(gold_node)
    hedge, why = _describe(pred_node, gold_node)
    if hedge:
        return Comparison(False, "structure", why, hedge=True)
    judge = Judge(rel_tol, symbolic, conventions)
    try:
        equal = judge.match(pred_node, gold_node)
    except RecursionError:
        return Comparison(None, "structure", "answer nested too deeply", too_complex=True)
    except TooManyComparisons:
        return Comparison(None, "structure", f"more than {MAX_LEAF_COMPARISONS} parts to compare", too_complex=True)
    method = next((m for m in ("symbolic", "sample", "numeric", "string") if m in judge.methods), "structure")
    if equal is None and symbolic:
        reason = "expression exceeds the symbolic limits" if judge.too_complex else "could not read the answer"
        return Comparison(None, method, reason, too_complex=judge.too_complex)
    if equal is None:
        return Comparison(None, method, "needs symbolic comparison")
    return Comparison(equal, method, f"{method} {'match' if equal else 'mismatch'}")


@short_key_cache(maxsize=1 << 14)
def compare_fast(pred: str, gold: str, rel_tol: float, conventions: Conventions = DEFAULT) -> Comparison:
    """The in-process fast path (no sympy); cached because RL batches repeat the same (answer, reference) pairs."""
    return compare_answers(pred, gold, rel_tol, False, conventions)


def symbolic_outcome(pred: str, gold: str, rel_tol: float, conventions: Conventions = DEFAULT) -> Comparison:
    """Worker entry point: the full comparison, sympy included. Picklable in and out."""
    return compare_answers(pred, gold, rel_tol, True, conventions)
