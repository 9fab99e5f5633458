"""Answer comparison: structures matched shape by shape, leaves through a cheapest-first cascade.

Leaf cascade: normalised string, then exact/toleranced numbers, then (for expressions in variables) a numeric
identity test at sample points (drawn from a hash of both answers: sample_points.py), then sympy. The fast path
(`symbolic=False`) never touches sympy: where it cannot decide it answers `equal=None`, and the caller re-runs the
comparison with `symbolic=True` in a bounded worker process (`symbolic_outcome`), where sympy is imported on first use.
"""

from __future__ import annotations

import cmath
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from groupscore.verifiers.math.caching import short_key_cache
from groupscore.verifiers.math.conventions import DEFAULT, Conventions
from groupscore.verifiers.math.normalize import PERCENT_MARK
from groupscore.verifiers.math.numeric import Number, evaluate, free_variables, numbers_equal, rounds_to, to_complex
from groupscore.verifiers.math.sample_points import IDENTITY_TRIALS, sample_point
from groupscore.verifiers.math.structures import (
    Choice,
    ClockTime,
    Expr,
    Interval,
    Items,
    Matrix,
    Node,
    Ratio,
    Relation,
    Union,
    as_interval,
    is_inequality,
    is_name,
    is_variable,
    parse_structure,
)

Tri = bool | None  # True, False, or "cannot tell here"
# Order-free matching compares every pair of parts; this caps the work one comparison may cost.
MAX_LEAF_COMPARISONS = 5000


class _TooManyComparisons(Exception):
    """The answers have so many parts that comparing them would not be bounded."""


@short_key_cache(maxsize=1 << 14)
def _value(text: str) -> Number | None:
    return evaluate(text)  # cached: order-free matching evaluates each part against every other

_CHOICE_PREFIX = re.compile(r"\(?([A-J])\)(?:\s|$|[^a-zA-Z])|([A-J])(?:[.:]|\s)|([A-J])$")
_CHOICE_WORD = re.compile(r"^(?:option|choice|answer)\s*", re.IGNORECASE)
_LOWER_CHOICE = re.compile(r"\(?([a-j])\)?")
_WORDS = re.compile(r"[A-Za-z]{3,}(?: [A-Za-z]+)*")


@dataclass(frozen=True)
class Comparison:
    """The result of comparing a predicted answer with the reference."""

    equal: Tri  # None: the fast path needs sympy, or (symbolic path) the prediction could not be read
    method: str  # the costliest test that decided: string, numeric, sample, symbolic, structure
    reason: str = ""
    hedge: bool = False
    too_complex: bool = False  # a guard refused to hand an expression to sympy


def all3(results: Iterable[Callable[[], Tri]]) -> Tri:
    """Kleene AND over lazily computed tri-states: stops at the first False."""
    unknown = False
    for result in results:
        value = result()
        if value is False:
            return False
        unknown |= value is None
    return None if unknown else True


def _perfect_matching(n: int, edge: Callable[[int, int], bool]) -> bool:
    """Kuhn's augmenting paths on an n x n bipartite graph (n <= 64)."""
    match_of: list[int] = [-1] * n

    def augment(i: int, seen: list[bool]) -> bool:
        for j in range(n):
            if edge(i, j) and not seen[j]:
                seen[j] = True
                if match_of[j] < 0 or augment(match_of[j], seen):
                    match_of[j] = i
                    return True
        return False

    return all(augment(i, [False] * n) for i in range(n))


class _Judge:
    """Compares structures; `leaf` decides single expressions. One judge per comparison (it records methods)."""

    def __init__(self, rel_tol: float, symbolic: bool, conventions: Conventions = DEFAULT) -> None:
        self.rel_tol = rel_tol
        self.conventions = conventions
        self.symbolic = symbolic
        self.methods: set[str] = set()
        self.too_complex = False
        self.leaves_left = MAX_LEAF_COMPARISONS

    # -- leaves -----------------------------------------------------------------------------------------------------

    def leaf(self, pred: str, gold: str) -> Tri:
        self.leaves_left -= 1
        if self.leaves_left < 0:
            raise _TooManyComparisons
        if pred == gold:
            self.methods.add("string")
            return True
        if not pred or not gold:
            return False
        if ":" in pred or ":" in gold:
            return False  # a colon left inside a leaf is no division (sympy would read `9:00` as 9/0)
        if _WORDS.fullmatch(pred) and _WORDS.fullmatch(gold):
            self.methods.add("string")
            return pred.casefold() == gold.casefold()  # "Yes" and "yes"; words are not products of variables
        pv, gv = _value(pred), _value(gold)
        if pv is not None and gv is not None:
            self.methods.add("numeric")
            if numbers_equal(pv, gv, self.rel_tol):
                return True
            digits = self.conventions.significant_digits
            return digits is not None and rounds_to(pred, gv, digits)
        names = free_variables(pred) | free_variables(gold)
        if names:
            # Also decides a number against an expression in x (`x - x + 2` is 2; `3x` is not 3).
            sampled = self._sample_equal(pred, gold, sorted(names))
            if sampled is not None:
                self.methods.add("sample")
                return sampled
        return self._symbolic_leaf(pred, gold)

    def _sample_equal(self, pred: str, gold: str, names: Sequence[str]) -> Tri:
        """False when the texts differ at a sample point; True only when they agree at every point and both are
        analytic in the variables (agreement at a few points proves nothing for `|x-1|` against `1-x`)."""
        decided_equal = True
        for x, y, sound in _sampled_values(pred, gold, names, trials=IDENTITY_TRIALS):
            if x is None or cmath.isinf(x) or cmath.isinf(y):
                return None
            scale = max(abs(x), abs(y), 1e-300)
            if abs(x - y) > 1e-6 * scale and abs(x - y) > 1e-9:
                return False
            if abs(x - y) > max(1e-10 * scale, 1e-12) or not sound:
                decided_equal = False
        return True if decided_equal else None

    def _symbolic_leaf(self, pred: str, gold: str) -> Tri:
        if not self.symbolic:
            return None
        from groupscore.verifiers.math import symbolic  # sympy lives only on the worker side

        self.methods.add("symbolic")
        try:
            return symbolic.expressions_equal(pred, gold, self.rel_tol)
        except symbolic.TooComplex:
            self.too_complex = True
            return None

    def relation(self, pred: Relation, gold: Relation) -> Tri:
        """Two equations (or inequalities) are equal when one is a non-zero (positive) multiple of the other."""
        if pred.op == gold.op and pred.lhs == gold.lhs:
            same_rhs = self.leaf(pred.rhs, gold.rhs)
            if same_rhs:
                return True
        p_diff, p_strict, p_kind = _as_difference(pred)
        g_diff, g_strict, g_kind = _as_difference(gold)
        if p_kind != g_kind or p_strict != g_strict:
            return False
        names = sorted(free_variables(p_diff) | free_variables(g_diff))
        ratio = self._sample_ratio(p_diff, g_diff, names)
        if ratio is not None:
            self.methods.add("sample")
            return ratio > 0 if p_kind == "ineq" else True
        if ratio is None and self._ratio_known_absent(p_diff, g_diff, names):
            self.methods.add("sample")
            return False
        if not self.symbolic:
            return None
        from groupscore.verifiers.math import symbolic

        self.methods.add("symbolic")
        try:
            return symbolic.relations_equal(p_diff, g_diff, p_kind == "ineq")
        except symbolic.TooComplex:
            self.too_complex = True
            return None

    def _ratios(self, p_diff: str, g_diff: str, names: Sequence[str], need_sound: bool) -> list[complex] | None:
        ratios = []
        for x, y, sound in _sampled_values(p_diff, g_diff, names, trials=IDENTITY_TRIALS):
            if x is None or (need_sound and not sound):
                return None
            if abs(y) < 1e-12 or cmath.isinf(x) or cmath.isinf(y):
                if abs(x) < 1e-12 and abs(y) < 1e-12:
                    continue
                return []  # one side vanishes where the other does not: not proportional
            ratios.append(x / y)
        return ratios or None  # None: both sides vanished at every sample, nothing learned

    def _sample_ratio(self, p_diff: str, g_diff: str, names: Sequence[str]) -> float | None:
        """The constant real ratio p/g if the samples show one (and both sides are analytic, so that it means one)."""
        ratios = self._ratios(p_diff, g_diff, names, need_sound=True)
        if not ratios:
            return None
        first = ratios[0]
        if abs(first) < 1e-12 or abs(first.imag) > 1e-9 * abs(first):
            return None
        if all(abs(r - first) <= 1e-9 * abs(first) for r in ratios):
            return first.real
        return None

    def _ratio_known_absent(self, p_diff: str, g_diff: str, names: Sequence[str]) -> bool:
        ratios = self._ratios(p_diff, g_diff, names, need_sound=False)
        if ratios is None:
            return False
        if not ratios:
            return True
        first = ratios[0]
        return any(abs(r - first) > 1e-6 * max(abs(first), 1e-12) for r in ratios) or abs(first) < 1e-12

    # -- structures -------------------------------------------------------------------------------------------------

    def match(self, pred: Node, gold: Node) -> Tri:
        if isinstance(gold, Choice) or isinstance(pred, Choice):
            return self._choice(pred, gold)
        if isinstance(pred, Items) and len(pred.items) == 1 and _unwraps(pred, gold):
            return self.match(pred.items[0], gold)
        if isinstance(gold, Items) and len(gold.items) == 1 and _unwraps(gold, pred):
            return self.match(pred, gold.items[0])
        colon = Ratio | ClockTime
        if (isinstance(pred, colon) and not isinstance(gold, Relation)) or isinstance(gold, colon):
            return self._colon(pred, gold)
        if isinstance(gold, Interval | Union) or isinstance(pred, Interval | Union):
            return self._intervals(pred, gold)
        if is_inequality(pred) != is_inequality(gold):  # `x > 3` against `(3, \infty)`
            return self._intervals(pred, gold)
        if isinstance(pred, Relation) and isinstance(gold, Relation):
            if pred.op not in ("=", "\\neq") and gold.op not in ("=", "\\neq"):
                p_int, g_int = as_interval(pred), as_interval(gold)
                if p_int is not None and g_int is not None:
                    return self._intervals(p_int, g_int)
            return self.relation(pred, gold)
        if isinstance(pred, Relation):
            value = _value_of(pred)
            return self.match(value, gold) if value is not None else False
        if isinstance(gold, Relation):
            value = _value_of(gold)
            return self.match(pred, value) if value is not None else False
        if isinstance(pred, Items) and isinstance(gold, Items):
            return self._items(pred, gold)
        for bars, other in ((pred, gold), (gold, pred)):
            if isinstance(bars, Matrix) and bars.determinant and isinstance(other, Expr):
                expansion = _determinant(bars.rows)  # `\\begin{vmatrix} 2 & 1 \\\\ 1 & 2 \\end{vmatrix}` against 3
                if expansion is None:
                    return False
                return self.leaf(expansion, other.text) if bars is pred else self.leaf(other.text, expansion)
        if isinstance(pred, Matrix) or isinstance(gold, Matrix):
            return self._matrix(pred, gold)
        if isinstance(pred, Expr) and isinstance(gold, Expr):
            return self.leaf(pred.text, gold.text)
        return False  # one answer against several, or different shapes

    def _colon(self, pred: Node, gold: Node) -> Tri:
        """Clock times and ratios. The reference (or a question about ratios) says which `a:b` is: a time matches
        only the same time of day; a ratio matches a proportional ratio, or the number a/b."""
        self.methods.add("string")
        if isinstance(gold, Ratio) or self.conventions.ratio_question:
            as_ratio = [n.as_ratio() if isinstance(n, ClockTime) else n for n in (pred, gold)]
            return self._ratio(as_ratio[0], as_ratio[1])
        if isinstance(gold, ClockTime):
            return isinstance(pred, ClockTime) and _same_time(pred, gold)
        return self._ratio(pred, gold) if isinstance(pred, Ratio) else False

    def _ratio(self, pred: Node, gold: Node) -> Tri:
        if isinstance(pred, Ratio) and isinstance(gold, Ratio):
            p, g = pred.parts, gold.parts
            if len(p) != len(g) or all(x == "0" for x in p) or all(x == "0" for x in g):
                return False
            # a:b:c = d:e:f when each part against the first is in the same proportion: a*e = b*d, ...
            return all3(lambda i=i: self.leaf(f"({p[i]})\\cdot({g[0]})", f"({p[0]})\\cdot({g[i]})")
                        for i in range(1, len(p)))
        ratio, other = (pred, gold) if isinstance(pred, Ratio) else (gold, pred)
        if isinstance(ratio, Ratio) and isinstance(other, Expr) and len(ratio.parts) == 2:
            quotient = f"\\frac{{{ratio.parts[0]}}}{{{ratio.parts[1]}}}"
            return self.leaf(quotient, other.text) if ratio is pred else self.leaf(other.text, quotient)
        return False

    def _choice(self, pred: Node, gold: Node) -> Tri:
        self.methods.add("string")
        if isinstance(pred, Choice) and isinstance(gold, Choice):
            return pred.letter == gold.letter
        if isinstance(gold, Choice) and isinstance(pred, Expr):
            text = _CHOICE_WORD.sub("", pred.text)  # "Option B"
            lower = _LOWER_CHOICE.fullmatch(text)
            if lower:
                return lower.group(1).upper() == gold.letter
            found = _CHOICE_PREFIX.match(text)  # "(B) 12", "B. 12"
            return bool(found) and next(g for g in found.groups() if g) == gold.letter
        return False

    def _items(self, pred: Items, gold: Items) -> Tri:
        if (gold.ordered and pred.kind == "set") or (pred.ordered and gold.kind == "set"):
            return False
        ordered = (gold.ordered and pred.kind in ("tuple", "list")) or (pred.ordered and gold.kind == "list")
        if ordered and self.conventions.order == "written":
            if len(pred.items) != len(gold.items):
                return False
            return all3(lambda p=p, g=g: self.match(p, g) for p, g in zip(pred.items, gold.items))
        return self._unordered(pred.items, gold.items)

    def _unordered(self, preds: Sequence[Node], golds: Sequence[Node]) -> Tri:
        # A repeated answer is one answer: `(3,17,3,7)` listed twice in a list of solutions is no extra claim.
        preds, golds = list(dict.fromkeys(preds)), list(dict.fromkeys(golds))
        if len(preds) != len(golds):
            return False
        before = len(preds)
        preds, golds = _without_common(preds, golds)
        if len(preds) < before:
            self.methods.add("numeric")
        n = len(preds)
        table = []
        for p in preds:
            row = [self.match(p, g) for g in golds]
            if all(cell is False for cell in row):
                return False  # this element matches nothing in the reference
            table.append(row)
        if _perfect_matching(n, lambda i, j: table[i][j] is True):
            return True
        if not _perfect_matching(n, lambda i, j: table[i][j] is not False):
            return False
        return None

    def _intervals(self, pred: Node, gold: Node) -> Tri:
        p, g = as_interval(pred), as_interval(gold)
        if p is None or g is None:
            return False
        if isinstance(p, Union) and len(p.parts) == 1:
            p = as_interval(p.parts[0])
        if isinstance(g, Union) and len(g.parts) == 1:
            g = as_interval(g.parts[0])
        if isinstance(p, Interval) and isinstance(g, Interval):
            if (p.left_closed, p.right_closed) != (g.left_closed, g.right_closed):
                return False
            return all3((lambda: self.leaf(p.lo, g.lo), lambda: self.leaf(p.hi, g.hi)))
        if isinstance(p, Union) and isinstance(g, Union):
            return self._unordered(p.parts, g.parts)
        return False

    def _matrix(self, pred: Node, gold: Node) -> Tri:
        p_rows, g_rows = _matrix_rows(pred), _matrix_rows(gold)
        if p_rows is None or g_rows is None:
            return False
        if len(p_rows) != len(g_rows) or any(len(a) != len(b) for a, b in zip(p_rows, g_rows)):
            if isinstance(pred, Matrix) and isinstance(gold, Matrix):
                return False  # a row is not a column
            # A vector written as a tuple against the same vector as a one-column (or one-row) matrix.
            p_flat, g_flat = _as_vector(p_rows), _as_vector(g_rows)
            if p_flat is None or g_flat is None or len(p_flat) != len(g_flat):
                return False
            return all3(lambda a=a, b=b: self.leaf(a, b) for a, b in zip(p_flat, g_flat))
        return all3(lambda a=a, b=b: self.leaf(a, b) for ra, rb in zip(p_rows, g_rows) for a, b in zip(ra, rb))


def _unwraps(one: Items, other: Node) -> bool:
    """A one-element list or set stands for its element (`\\{3\\}` for 3), except a set around an expression
    in variables, which may as well be the fractional part `\\{x\\}`: that one only matches another set."""
    if isinstance(other, Items):
        return False  # compared part by part
    if one.kind != "set":
        return True
    element = one.items[0]
    return not (isinstance(element, Expr) and free_variables(element.text))


def _same_time(pred: ClockTime, gold: ClockTime) -> bool:
    """The same time of day. Where only one side says am/pm, the other is read on a 12-hour clock if it can be."""
    if (pred.minutes, pred.seconds) != (gold.minutes, gold.seconds):
        return False
    if bool(pred.meridiem) == bool(gold.meridiem):
        return _hour_of_day(pred) == _hour_of_day(gold)
    bare = gold if pred.meridiem else pred
    if bare.hours > 12:
        return _hour_of_day(pred) == _hour_of_day(gold)
    return pred.hours % 12 == gold.hours % 12


def _hour_of_day(time: ClockTime) -> int:
    if not time.meridiem:
        return time.hours % 24
    return time.hours % 12 + (12 if time.meridiem == "pm" else 0)


def _match_key(node: Node) -> object:
    """A key that equal parts share for sure: the exact value of a rational, else the node itself."""
    if isinstance(node, Expr):
        value = _value(node.text)
        if value is not None and value.is_exact and not value.approx:
            return value.value
    return node


def _without_common(preds: Sequence[Node], golds: Sequence[Node]) -> tuple[list[Node], list[Node]]:
    """Drop the pairs that are plainly equal (same text, same exact value) before any pairwise comparison."""
    unmatched: dict[object, list[Node]] = {}
    for gold in golds:
        unmatched.setdefault(_match_key(gold), []).append(gold)
    rest_preds = []
    for pred in preds:
        bucket = unmatched.get(_match_key(pred))
        if bucket:
            bucket.pop()
        else:
            rest_preds.append(pred)
    return rest_preds, [g for bucket in unmatched.values() for g in bucket]


def _sampled_values(
    a: str, b: str, names: Sequence[str], trials: int
) -> Iterator[tuple[complex | None, complex, bool]]:
    """Both texts evaluated at the same points (drawn from a hash of both, so a completion cannot plant roots at them),
    and whether both are analytic there (agreement can pay);
    (None, 0, False) where either cannot be evaluated."""
    for trial in range(trials):
        point = {name: complex(value, 0.0) for name, value in sample_point(a, b, names, trial).items()}
        va, vb = evaluate(a, point), evaluate(b, point)
        x = to_complex(va) if va is not None else None
        y = to_complex(vb) if vb is not None else None
        if x is None or y is None:
            yield None, 0j, False
            return
        yield x, y, va.sample_sound and vb.sample_sound  # type: ignore[union-attr]


def _matrix_rows(node: Node) -> tuple[tuple[str, ...], ...] | None:
    if isinstance(node, Matrix):
        return node.rows
    if isinstance(node, Items) and node.kind == "tuple" and all(isinstance(i, Expr) for i in node.items):
        return (tuple(i.text for i in node.items),)  # type: ignore[union-attr]
    return None


def _as_vector(rows: tuple[tuple[str, ...], ...]) -> tuple[str, ...] | None:
    if len(rows) == 1:
        return rows[0]
    if all(len(r) == 1 for r in rows):
        return tuple(r[0] for r in rows)
    return None


MAX_DETERMINANT_SIZE = 4  # 24 products: a bigger determinant is no final answer anyone writes


def _determinant(rows: tuple[tuple[str, ...], ...]) -> str | None:
    """The determinant as a sum of products (Laplace expansion along the first row), for the leaf cascade."""
    n = len(rows)
    if not 1 <= n <= MAX_DETERMINANT_SIZE or any(len(r) != n for r in rows):
        return None
    if n == 1:
        return f"({rows[0][0]})"
    terms = []
    for j, entry in enumerate(rows[0]):
        minor = tuple(tuple(c for k, c in enumerate(r) if k != j) for r in rows[1:])
        terms.append(f"{'-' if j % 2 else '+'}({entry})\\cdot({_determinant(minor)})")
    return "".join(terms).lstrip("+")


# A left side that names a number, not an unknown: a limit, sum, product, integral, determinant, f at a number.
_CLOSED_FORM = re.compile(r"\\(?:lim|sum|prod|int|iint|oint|det)(?![a-zA-Z])|\\begin\{vmatrix\}|[a-zA-Z]\(-?[\d.]+\)$")


def _value_of(relation: Relation) -> Node | None:
    """The answer a relation states: `x = 3` -> 3, `2+3=5` -> 5, `\\lim_{x \\to 0} \\frac{\\sin x}{x} = 1` -> 1;
    None for a genuine equation or inequality."""
    if relation.op != "=":
        return None
    if relation.is_assignment:
        return parse_structure(relation.rhs)
    if _CLOSED_FORM.match(relation.lhs) and relation.rhs and not free_variables(relation.rhs):
        return parse_structure(relation.rhs)
    if not free_variables(relation.lhs):
        # `5 = x` states 5; `2+3 = 5` states 5; `7 = 11a+c` is an equation, and states neither side.
        if is_name(relation.rhs):
            return parse_structure(relation.lhs)
        return None if free_variables(relation.rhs) else parse_structure(relation.rhs)
    return None


def _has_relation(node: Node) -> bool:
    return isinstance(node, Relation) or (isinstance(node, Items) and any(_has_relation(i) for i in node.items))


def _unlabel(node: Node) -> Node:
    """The answer without its labels: `(p,q)=(3,2)` -> (3,2); `AB=4, CD=5` -> 4, 5; `p=5,q=2;p=7,q=2` -> the
    list of lists 5, 2 and 7, 2 (a tuple on the other side still fixes the order). Only a name (structures.is_name) is
    a label: `7 = 11a+c` keeps its meaning."""
    if isinstance(node, Relation):
        if not node.is_assignment:
            return node
        value = parse_structure(node.rhs)
        labels = _tuple_labels(node.lhs)
        if labels and isinstance(value, Items) and value.kind == "tuple" and len(value.items) == len(labels):
            # `(y, x) = (3, 4)` is (x, y) = (4, 3): the values follow their labels, as for `y=3, x=4`.
            order = sorted(range(len(labels)), key=lambda k: _label_key(labels[k]))
            value = Items(tuple(value.items[k] for k in order), value.kind)
        return _unlabel(value)
    if not isinstance(node, Items):
        return node
    return Items(tuple(_unlabel(i) for i in _by_label(node.items)), node.kind)


_LETTER_LABEL = re.compile(r"([a-zA-Z])(?:_\{?(\w{1,3})\}?)?")


def _by_label(items: tuple[Node, ...]) -> tuple[Node, ...]:
    """Values labelled by distinct letters (`y=3, x=4`, `b=3, a=4`, `x_2=3, x_1=4`) in the order of their labels:
    x before y, a before b, x_1 before x_2, as an unlabelled tuple lists them. Read in text order, `y=3, x=4` paid
    against `(3, 4)`, which is (x, y) = (4, 3). Other labels (`AB`, `V_1:V_2`) keep the text's order."""
    labels = [_LETTER_LABEL.fullmatch(i.lhs.strip()) if isinstance(i, Relation) and i.is_assignment else None
              for i in items]
    if len(items) < 2 or not all(labels) or len({m.group(0) for m in labels}) < len(labels):  # type: ignore[union-attr]
        return items
    return tuple(item for _, item in sorted(zip(labels, items), key=lambda pair: _label_key(pair[0])))  # type: ignore


def _label_key(label: re.Match[str]) -> tuple:
    letter, sub = label.group(1), label.group(2) or ""
    return (letter.lower(), letter, (0, int(sub), "") if sub.isdigit() else (1, 0, sub))


def _tuple_labels(lhs: str) -> list[re.Match[str]] | None:
    """The labels of a tuple of distinct single letters on a left side (`(y, x)`), else None."""
    lhs = lhs.strip()
    if not (lhs.startswith("(") and lhs.endswith(")")):
        return None
    labels = [_LETTER_LABEL.fullmatch(part.strip()) for part in lhs[1:-1].split(",")]
    if len(labels) < 2 or not all(labels) or len({m.group(0) for m in labels}) < len(labels):  # type: ignore
        return None
    return labels  # type: ignore[return-value]


def _one_label(node: Node) -> str | None:
    """The label of an answer that gives several values of one unknown (`W(x)=1 or W(x)=-1`), else None."""
    if not (isinstance(node, Items) and node.items):
        return None
    labels = {i.lhs for i in node.items if isinstance(i, Relation) and i.is_assignment}
    count = sum(1 for i in node.items if isinstance(i, Relation) and i.is_assignment)
    return labels.pop() if count == len(node.items) and len(labels) == 1 else None


def _as_difference(relation: Relation) -> tuple[str, bool, str]:
    """`L op R` as `D op' 0` with op' one of =, <, <=: (D, strict, kind)."""
    lhs, rhs = relation.lhs or "0", relation.rhs or "0"
    if relation.op in ("=", "\\neq"):
        return f"({lhs})-({rhs})", relation.op == "\\neq", "eq"
    if relation.op in ("<", "\\leq"):
        return f"({lhs})-({rhs})", relation.op == "<", "ineq"
    return f"({rhs})-({lhs})", relation.op == ">", "ineq"


def _describe(pred: Node, gold: Node) -> tuple[bool, str]:
    """Whether the prediction hedges against this reference, and why."""
    single_gold = isinstance(gold, Expr | Choice | ClockTime | Ratio) or (isinstance(gold, Relation) and gold.op == "=")
    if isinstance(pred, Items) and len(pred.items) > 1 and single_gold:
        return True, f"hedge: {len(pred.items)} candidate answers against a single reference"
    if (isinstance(pred, Expr) and is_variable(pred.text) and not isinstance(gold, Choice)
            and not (isinstance(gold, Expr) and is_variable(gold.text))):
        return True, "hedge: a bare variable is not an answer"
    return False, ""


def compare_answers(
    pred: str, gold: str, rel_tol: float, symbolic: bool, conventions: Conventions = DEFAULT
) -> Comparison:
    """Compare two normalised answers. With symbolic=False this never imports sympy and may answer equal=None.

    The conventions that rewrite a whole answer act here: the percent reading(s), a decimal comma, a renamed variable.
    """
    if conventions.decimal_comma:
        pred, gold = _decimal_comma(pred), _decimal_comma(gold)
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
    number = tuple(t.removesuffix(PERCENT_MARK) for t in (pred, gold))
    if not any(marked):
        return [number]  # type: ignore[list-item]
    fraction = tuple(f"\\frac{{{t}}}{{100}}" if m else t for t, m in zip(number, marked))
    if percent == "number":
        return [number]  # type: ignore[list-item]
    if percent == "fraction":
        return [fraction]  # type: ignore[list-item]
    return [number, fraction]  # type: ignore[list-item]


_DECIMAL_COMMA = re.compile(r"([-+]?\d+),(\d{1,2}|\d{4,})|([-+]?0),(\d+)")


def _decimal_comma(text: str) -> str:
    """`1,5` -> `1.5` for a whole answer whose comma cannot be a thousands separator (not three digits after it, or
    a first group of 0: `0,111`)."""
    return text.replace(",", ".") if _DECIMAL_COMMA.fullmatch(text) else text


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
    if not _has_relation(gold_node):
        pred_node = _unlabel(pred_node)
    if not _has_relation(pred_node):
        gold_node = _unlabel(gold_node)
    if _one_label(pred_node) and _one_label(gold_node):  # `W(x)=1 or W(x)=-1` against `W(n)=1, W(n)=-1`
        pred_node, gold_node = _unlabel(pred_node), _unlabel(gold_node)
    hedge, why = _describe(pred_node, gold_node)
    if hedge:
        return Comparison(False, "structure", why, hedge=True)
    judge = _Judge(rel_tol, symbolic, conventions)
    try:
        equal = judge.match(pred_node, gold_node)
    except RecursionError:
        return Comparison(None, "structure", "answer nested too deeply", too_complex=True)
    except _TooManyComparisons:
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
