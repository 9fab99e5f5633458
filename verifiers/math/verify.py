"""`score_math`: extraction, then the in-process fast path, then (only when needed) sympy in a bounded worker.

The fast path (extraction, normalisation, string and numeric tests) is bounded by construction: answers are capped
in length and every scan is linear. Only comparisons it cannot decide go to `run_bounded`, which kills the worker
when the item's budget runs out; the caller never uses signals, so this works from any thread or event loop.
"""

from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict
from dataclasses import replace
from math import gcd

from groupscore.schema.verdict import Status, Verdict
from groupscore.verifiers.math.caching import short_key_cache
from groupscore.verifiers.math.conventions import DEFAULT, Conventions, conventions_of
from groupscore.verifiers.math.grader import Comparison, compare_fast, symbolic_outcome
from groupscore.verifiers.math.guards import TooComplex, check_limits
from groupscore.verifiers.math.item import MathItem
from groupscore.verifiers.math.labels import unlabel
from groupscore.verifiers.math.normalize import PERCENT_MARK, DecimalComma, decimal_comma_reading, normalize
from groupscore.verifiers.math.numeric import free_variables
from groupscore.verifiers.math.parser import LENIENT, NO_FALLBACK, STRICT, STRICT_NO_FALLBACK, box_run, extract_answer
from groupscore.verifiers.math.qualifiers import (
    different_units,
    scaled,
    signed,
    units_of,
    unqualified_in,
    value_words_differ,
)
from groupscore.verifiers.math.reference import parse_gold
from groupscore.verifiers.math.structures import (
    Chain,
    Expr,
    Interval,
    Items,
    Node,
    Relation,
    is_name,
    parse_structure,
)

SYMBOLIC_CACHE_SIZE = 1 << 14
DEFAULT_REL_TOL = 1e-6
MAX_GOLD_CHARS = 4000


@short_key_cache(maxsize=1 << 13)
def gold_answer(answer: str, reference: str = "extract", decimal_comma: DecimalComma = "") -> str | None:
    """The normalised reference answer, or None if it is too long to be one (cached: batches repeat golds)."""
    text = parse_gold(answer, reference)
    return normalize(text, decimal_comma) if len(text) <= MAX_GOLD_CHARS else None


_CONFIGS = {
    (False, True): LENIENT,
    (True, True): STRICT,
    (False, False): NO_FALLBACK,  # (strict, fallback)
    (True, False): STRICT_NO_FALLBACK,
}


class _SymbolicCache:
    """Outcomes the workers computed, by (prediction, reference, rel_tol, conventions); timeouts are never cached."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._data: OrderedDict[tuple[str, str, float, Conventions], Comparison] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str, float, Conventions]) -> Comparison | None:
        with self._lock:
            outcome = self._data.get(key)
            if outcome is not None:
                self._data.move_to_end(key)
            return outcome

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def put(self, key: tuple[str, str, float, Conventions], outcome: Comparison) -> None:
        with self._lock:
            self._data[key] = outcome
            if len(self._data) > self._size:
                self._data.popitem(last=False)


_symbolic_cache = _SymbolicCache(SYMBOLIC_CACHE_SIZE)


def warm_up_symbolic() -> None:
    """Start this process's symbolic workers (sympy imported) now, once, outside any item's budget.

    `_symbolic` calls it before the first comparison the fast path cannot decide, so a process that never meets one
    (`groupscore score` on numeric answers) never starts them; the service calls it when a scoring process starts,
    so that no request waits for sympy."""
    from groupscore.bounded.workers import start_once

    start_once(["groupscore.verifiers.math.symbolic"])  # within the bounded workers' own start-up allowance


_ensure_workers = warm_up_symbolic  # what the scorer calls (tests replace it)


def _symbolic(
    pred: str, gold: str, rel_tol: float, budget_s: float, conventions: Conventions = DEFAULT
) -> Comparison | None:
    """The worker's outcome, or None if the budget ran out."""
    from groupscore.bounded.workers import BudgetExceeded, WorkerCrashed, WorkerUnavailable, run_bounded

    key = (pred, gold, rel_tol, conventions)
    cached = _symbolic_cache.get(key)
    if cached is not None:
        return cached
    if budget_s <= 0:
        return None  # the fast path spent the whole budget
    _ensure_workers()
    try:
        outcome = run_bounded(symbolic_outcome, pred, gold, rel_tol, conventions, timeout_s=budget_s)
    except (WorkerUnavailable, WorkerCrashed):
        raise  # nothing was compared: score_math reports an infra_error, not the answer's fault
    except BudgetExceeded:
        return None
    except MemoryError:
        # The worker's address-space cap stopped a runaway expansion: as good as a refusal, and deterministic.
        outcome = Comparison(
            None, "symbolic", "expression exceeds the symbolic limits: out of memory", too_complex=True
        )
    except Exception as exc:  # noqa: BLE001 - a sympy failure on one answer must not fail the batch
        return Comparison(None, "symbolic", f"symbolic step failed: {type(exc).__name__}")
    _symbolic_cache.put(key, outcome)
    return outcome


def clear_caches() -> None:
    """Forget every cached parse and outcome in this process (benchmarks measure cold passes with it)."""
    from groupscore.verifiers.math.reference import parse_gold
    from groupscore.verifiers.math.structures import parse_structure

    for cached in (gold_answer, normalize, parse_gold, parse_structure, compare_fast, units_of):
        cached.cache_clear()
    _symbolic_cache.clear()


def _verdict(item: MathItem, status: Status, extracted: str | None, reason: str, **details: object) -> Verdict:
    reward = 1.0 if status == Status.correct else 0.0
    return Verdict(id=item.id, reward=reward, status=status, extracted=extracted, reason=reason, details=dict(details))


# A number as it is written, with no arithmetic left to do: a decimal, a fraction in lowest terms, a mantissa times a
# power of ten (brackets around it only group it; a percent sign and a label are read away before).
_DECIMAL = re.compile(r"[-+]?\d+(?:\.\d+)?|[-+]?\.\d+")
_FRACTION = re.compile(r"[-+]?(?:\\frac\{(-?\d+)\}\{(\d+)\}|(-?\d+)/(\d+))")
_SCIENTIFIC = re.compile(r"[-+]?(?:\d(?:\.\d+)?(?:\\times|\\cdot|\*))?10\^\{?[-+]?\d+\}?")


def _written_number(text: str, lowest_terms: bool = True) -> bool:
    text = text.removesuffix(PERCENT_MARK).strip()
    while len(text) > 2 and text[0] + text[-1] in ("()", "{}"):
        text = text[1:-1].strip()  # `(10)`, `{10}`: brackets around a number only group it
    if _DECIMAL.fullmatch(text) or _SCIENTIFIC.fullmatch(text):
        return True
    fraction = _FRACTION.fullmatch(text)
    if fraction is None:
        return False
    num, den = (int(g) for g in fraction.groups() if g is not None)
    return den > 0 and (not lowest_terms or gcd(num, den) == 1)


def _stated_values(answer: str) -> list[str] | None:
    """The values an answer states, one text each (`10`; `2, 3` for `x = 2, y = 3` or `(2, 3)`; `7+3` for
    `7+3 = x`; `10` for `x = 7+3 = 10`), or None for an answer of another shape (an interval, a matrix, ...)."""
    return _values_of(unlabel(parse_structure(answer)))


def _values_of(node: Node) -> list[str] | None:
    if isinstance(node, Expr):
        return [node.text]
    if isinstance(node, Chain):
        return [node.value]
    if isinstance(node, Relation) and node.op == "=":
        if is_name(node.rhs):
            return [node.lhs]  # `7+3 = x`
        if is_name(node.lhs) or not free_variables(node.lhs):
            return _values_of(parse_structure(node.rhs))  # `x = 10`, `7+3 = 10` (checked by the comparison)
        return None
    if isinstance(node, Interval):
        return [node.lo, node.hi]
    if isinstance(node, Items) and node.items:
        values: list[str] = []
        for part in node.items:
            found = _values_of(part)
            if found is None:
                return None
            values += found
        return values
    return None


def _arithmetic_left(pred: str, gold: str) -> bool:
    """For a question whose reference is one number or several (a decimal, a fraction, a percentage, `x = 10`,
    `10, 4`): the answer states something other than written numbers, i.e. arithmetic left to do (`7+3`, `|7+3|`,
    `7+\\sqrt{9}`, `\\lfloor 7+3 \\rfloor`, `(7+3) e^0`, `\\frac{14}{2}+3`, `7+3 = x`, `7+3, 2 \\cdot 2`), which the
    symbolic comparison would otherwise pay: an expression built on the question's numbers in any disguise. A number
    written as a decimal, a fraction in lowest terms (or as the reference writes it), scientific notation or a
    percentage is an answer."""
    golds = _stated_values(gold)
    if not golds or not all(_written_number(value, lowest_terms=False) for value in golds):
        return False
    preds = _stated_values(pred)
    return preds is None or not all(_written_number(value) or value in golds for value in preds)


def _strict_hedge(boxes: tuple[str, ...], rel_tol: float) -> bool:
    """Several boxed answers that are not all the same value."""
    distinct = list(dict.fromkeys(normalize(b) for b in boxes))
    return any(compare_fast(other, distinct[0], rel_tol).equal is not True for other in distinct[1:])


def _words_read(text: str, conventions: Conventions) -> str:
    """Words that write a number's sign or scale, as the sign (`\\text{negative } 3` is -3) and, under
    `scale_words`, the factor (`3 \\text{ million}` is 3000000)."""
    return signed(scaled(text) if conventions.scale_words else text)


def score_math(item: MathItem) -> Verdict:
    """Score one math item within `item.timeout_s` of wall-clock time; never raises."""
    try:
        return _score(item)
    except Exception as exc:  # noqa: BLE001 - one item's failure is that item's error verdict, not the batch's
        from groupscore.bounded.workers import WorkerCrashed, WorkerUnavailable

        if isinstance(exc, (WorkerCrashed, WorkerUnavailable)):  # not cached: the next try may well work
            cause = "worker_died" if isinstance(exc, WorkerCrashed) else "worker_unavailable"
            return Verdict.infra_error(item.id, f"the symbolic step could not run: {exc}"[:300], cause)
        return Verdict.error(item.id, f"math verifier failed: {type(exc).__name__}: {exc}"[:300])


def _score(item: MathItem) -> Verdict:
    started = time.monotonic()
    config = _CONFIGS[item.strict, item.fallback]
    extracted = extract_answer(item.completion, config)
    if extracted is None:
        return _verdict(item, Status.no_answer, None, "no final answer found")
    if extracted.too_long:
        return _verdict(item, Status.unparsable, extracted.text[:200], "answer too long", source=extracted.source)
    conventions = conventions_of(item)
    rel_tol = DEFAULT_REL_TOL if item.rel_tol is None else item.rel_tol
    gold_comma = decimal_comma_reading(item.answer, conventions.decimal_comma) if "," in item.answer else ""
    gold = gold_answer(item.answer, item.reference, gold_comma)
    if gold is None:
        return Verdict.error(item.id, f"the reference answer is longer than {MAX_GOLD_CHARS} characters")
    reference = parse_gold(item.answer, item.reference)
    read = _words_read(reference, conventions)
    if read != reference:
        reference, gold = read, normalize(read, gold_comma)
    if not gold:
        return Verdict.error(item.id, "the reference answer is empty")
    boxes = extracted.boxes
    several = extracted.source == "boxed" and item.completion.count("boxed") + item.completion.count("fbox") > 1
    run = box_run(item.completion, config) if several else ()
    if len(set(map(normalize, run))) > 1:
        # One box per answer (`\\boxed{1} and \\boxed{-2}`) is a list of answers, whatever the reference: read from
        # the completion alone, boxing every candidate with the likeliest last cannot pay (it once paid against `4`
        # and against `3, 4` alike). Boxes with reasoning between them are a correction: the last one counts.
        joined = ", ".join(run)
        boxes = boxes[: max(len(boxes) - len(run), 0)] + (joined,)
        extracted = replace(extracted, text=joined)
    read = _words_read(extracted.text, conventions)
    if read != extracted.text:
        extracted = replace(extracted, text=read)
    pred_comma = decimal_comma_reading(item.completion, conventions.decimal_comma) if "," in read else ""
    pred = normalize(read, pred_comma)
    if not pred:
        return _verdict(item, Status.no_answer, extracted.text, "empty answer", source=extracted.source)
    if item.strict and len(boxes) > 1 and _strict_hedge(boxes, rel_tol):
        return _verdict(
            item,
            Status.incorrect,
            extracted.text,
            "hedge: several different boxed answers",
            source=extracted.source,
            hedge=True,
        )
    if item.question and _arithmetic_left(pred, gold):
        return _verdict(
            item,
            Status.incorrect,
            extracted.text,
            "the answer is arithmetic left to do, not the number the question asks for",
            source=extracted.source,
            hedge=True,
        )
    denied = unqualified_in(extracted.text, reference)
    if denied:  # `\\text{not } 3`, `less than 3`, `3 \\text{ is wrong}`: words that make the answer not the number
        return _verdict(
            item,
            Status.incorrect,
            extracted.text,
            f"the answer qualifies its value ({', '.join(sorted(denied))})",
            source=extracted.source,
            hedge=True,
        )
    changed = value_words_differ(extracted.text, reference)
    if changed:  # `\\text{negative } 3`, `\\text{half of } 10`, `3 \\text{ squared}`: the words change the value
        return _verdict(
            item,
            Status.incorrect,
            extracted.text,
            f"words that change the value on one side only ({', '.join(sorted(changed))})",
            source=extracted.source,
            hedge=True,
        )
    units = different_units(extracted.text, reference)
    if units:  # `3 days` against `3 weeks`: a unit on one side only is noise, two different units are two answers
        return _verdict(
            item,
            Status.incorrect,
            extracted.text,
            f"different units: {', '.join(sorted(units[0]))} against {', '.join(sorted(units[1]))}",
            source=extracted.source,
        )
    outcome = compare_fast(pred, gold, rel_tol, conventions)
    if outcome.equal is None and not outcome.too_complex:
        try:  # refuse here what the worker would refuse, without occupying a worker
            check_limits(pred)
            check_limits(gold)
        except TooComplex as exc:
            return _verdict(
                item,
                Status.unparsable,
                extracted.text,
                f"expression exceeds the symbolic limits: {exc}",
                source=extracted.source,
            )
        budget = item.timeout_s - (time.monotonic() - started)
        symbolic = _symbolic(pred, gold, rel_tol, budget, conventions)
        if symbolic is None:
            return _verdict(
                item,
                Status.timeout,
                extracted.text,
                f"symbolic comparison ran past {item.timeout_s:g}s",
                source=extracted.source,
            )
        outcome = symbolic
    if outcome.equal is None:
        return _verdict(item, Status.unparsable, extracted.text, outcome.reason, source=extracted.source)
    status = Status.correct if outcome.equal else Status.incorrect
    return _verdict(
        item,
        status,
        extracted.text,
        outcome.reason,
        source=extracted.source,
        method=outcome.method,
        **({"hedge": True} if outcome.hedge else {}),
    )
