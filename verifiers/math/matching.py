"""Answer structures matched shape by shape: choices, clock times and ratios, intervals and unions, tuples, lists and
sets (in order, or order-free through a perfect matching), matrices and determinants, relations that state a value.

`Judge.match` dispatches on the two shapes and hands the single expressions it finds to the leaf cascade it inherits
(leaves.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from functools import partial

from groupscore.verifiers.math.labels import distinct_unknowns, unlabel
from groupscore.verifiers.math.leaves import LeafJudge, Tri, cached_value
from groupscore.verifiers.math.numeric import free_variables
from groupscore.verifiers.math.structures import (
    Chain,
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
    parse_structure,
)

_CHOICE_PREFIX = re.compile(r"\(?([A-J])\)(?:\s|$|[^a-zA-Z])|([A-J])(?:[.:]|\s)|([A-J])$")
_CHOICE_WORD = re.compile(r"^(?:option|choice|answer)\s*", re.IGNORECASE)
_LOWER_CHOICE = re.compile(r"\(?([a-j])\)?")


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


class Judge(LeafJudge):
    """Compares structures; the inherited `leaf` decides single expressions. One judge per comparison."""

    def match(self, pred: Node, gold: Node) -> Tri:
        if isinstance(gold, Choice) or isinstance(pred, Choice):
            return self._choice(pred, gold)
        if isinstance(pred, Chain):  # what the chain claims must hold before its last member counts
            return all3((*self._claims(pred), partial(self.match, parse_structure(pred.value), gold)))
        if isinstance(gold, Chain):
            return self.match(pred, parse_structure(gold.value))
        assigned = _assigned_chain(pred)
        if assigned is not None:  # `y = 2+2 = 4`: y is assigned 4 if 2+2 = 4
            name, chain = assigned
            return all3((*self._claims(chain), partial(self.match, Relation(name, "=", chain.value), gold)))
        assigned = _assigned_chain(gold)
        if assigned is not None:
            return self.match(pred, Relation(assigned[0], "=", assigned[1].value))
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
            if value is None:
                return False
            if self.conventions.check_equations and not free_variables(pred.lhs) and not is_name(pred.rhs):
                # `2+3 = 5` states 5 because it holds; `3 = 4` states nothing (and its last side is no answer)
                return all3((partial(self.leaf, pred.lhs, pred.rhs), partial(self.match, value, gold)))
            return self.match(value, gold)
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

    def _claims(self, chain: Chain) -> list[Callable[[], Tri]]:
        """The equalities a chain claims, each to hold before its value counts (none when equations are trusted)."""
        checked = chain.closed if self.conventions.check_equations else ()
        return [partial(self.leaf, member, chain.value) for member in checked]

    def _colon(self, pred: Node, gold: Node) -> Tri:
        """Clock times and ratios. The reference (or a question about ratios) says which `a:b` is: a time matches
        only the same time of day; a ratio matches a proportional ratio, or the number a/b."""
        self.methods.add("string")
        said_meridiem = any(isinstance(n, ClockTime) and n.meridiem for n in (pred, gold))
        if isinstance(gold, Ratio) or (self.conventions.ratio_question and not said_meridiem):
            # A time with a.m. or p.m. is a time whatever the question asks: as a ratio it would lose the half of
            # the day, and `9:00` would be paid against `9:00 a.m.` and `9:00 p.m.` alike.
            if said_meridiem:
                return False
            as_ratio = [n.as_ratio() if isinstance(n, ClockTime) else n for n in (pred, gold)]
            return self._ratio(as_ratio[0], as_ratio[1])
        if isinstance(gold, ClockTime):
            return isinstance(pred, ClockTime) and _same_time(pred, gold, self.conventions.clock_12h)
        return self._ratio(pred, gold) if isinstance(pred, Ratio) else False

    def _ratio(self, pred: Node, gold: Node) -> Tri:
        if isinstance(pred, Ratio) and isinstance(gold, Ratio):
            p, g = pred.parts, gold.parts
            if len(p) != len(g) or all(x == "0" for x in p) or all(x == "0" for x in g):
                return False
            # a:b:c = d:e:f when each part against the first is in the same proportion: a*e = b*d, ...
            return all3(
                partial(self.leaf, f"({p[i]})\\cdot({g[0]})", f"({p[0]})\\cdot({g[i]})") for i in range(1, len(p))
            )
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
            return found is not None and next(g for g in found.groups() if g) == gold.letter
        return False

    def _items(self, pred: Items, gold: Items) -> Tri:
        if (gold.ordered and pred.kind == "set") or (pred.ordered and gold.kind == "set"):
            return False
        one_answer = (gold.ordered or _of_distinct_unknowns(gold), pred.ordered or _of_distinct_unknowns(pred))
        if (one_answer[0] and pred.alternatives) or (one_answer[1] and gold.alternatives):
            # `4 or 3`, `\pm 3` name values without an order: read against a point or an assignment in any order,
            # one answer would be paid against every permutation of it; `x = 3 or y = 4` is not `x = 3, y = 4`.
            return False
        ordered = (gold.ordered and pred.kind in ("tuple", "list", "labelled")) or (
            pred.ordered and gold.kind == "list"
        )
        if ordered and self.conventions.order == "written":
            if len(pred.items) != len(gold.items):
                return False
            return all3(partial(self.match, p, g) for p, g in zip(pred.items, gold.items))
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
            return all3((partial(self.leaf, p.lo, g.lo), partial(self.leaf, p.hi, g.hi)))
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
            return all3(partial(self.leaf, a, b) for a, b in zip(p_flat, g_flat))
        return all3(partial(self.leaf, a, b) for ra, rb in zip(p_rows, g_rows) for a, b in zip(ra, rb))


def _of_distinct_unknowns(items: Items) -> bool:
    """`x = 3, y = 4` with its labels: one answer of two unknowns, which `x = 3 or y = 4` does not give."""
    return items.kind == "list" and distinct_unknowns(items.items)


def _assigned_chain(node: Node) -> tuple[str, Chain] | None:
    """(name, chain) of an assignment whose right side is a chain (`y = 2+2 = 4`), else None."""
    if isinstance(node, Relation) and node.is_assignment and "=" in node.rhs:
        inner = parse_structure(node.rhs)
        if isinstance(inner, Relation) and inner.op == "=" and not free_variables(inner.lhs):
            inner = Chain((inner.lhs,), inner.rhs)  # `x = 2+3 = 5`: the rest is the one claim 2+3 = 5
        return (node.lhs, inner) if isinstance(inner, Chain) else None
    return None


def _unwraps(one: Items, other: Node) -> bool:
    """A one-element list or set stands for its element (`\\{3\\}` for 3), except a set around an expression
    in variables, which may as well be the fractional part `\\{x\\}`: that one only matches another set."""
    if isinstance(other, Items):
        return False  # compared part by part
    if one.kind != "set":
        return True
    element = one.items[0]
    return not (isinstance(element, Expr) and free_variables(element.text))


def _same_time(pred: ClockTime, gold: ClockTime, clock_12h: bool) -> bool:
    """The same time of day. A time without am/pm is on a 24-hour clock (`9:00` is 9 a.m.): read on a 12-hour
    clock, one bare `9:00` would be paid against `9:00 a.m.` and `9:00 p.m.` alike. `clock_12h` is that reading."""
    if (pred.minutes, pred.seconds) != (gold.minutes, gold.seconds):
        return False
    if clock_12h and bool(pred.meridiem) != bool(gold.meridiem) and (gold if pred.meridiem else pred).hours <= 12:
        return pred.hours % 12 == gold.hours % 12
    return _hour_of_day(pred) == _hour_of_day(gold)


def _hour_of_day(time: ClockTime) -> int:
    if not time.meridiem:
        return time.hours % 24
    return time.hours % 12 + (12 if time.meridiem == "pm" else 0)


def _match_key(node: Node) -> object:
    """A key that equal parts share for sure: the exact value of a rational, else the node itself."""
    if isinstance(node, Expr):
        value = cached_value(node.text)
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


def _matrix_rows(node: Node) -> tuple[tuple[str, ...], ...] | None:
    if isinstance(node, Matrix):
        return node.rows
    if isinstance(node, Items) and node.kind == "tuple":
        texts = tuple(i.text for i in node.items if isinstance(i, Expr))
        if len(texts) == len(node.items):
            return (texts,)
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
        return unlabel(relation)  # `(b, a) = (3, 4)` states (a, b) = (4, 3), as its labels order it
    if _CLOSED_FORM.match(relation.lhs) and relation.rhs and not free_variables(relation.rhs):
        return parse_structure(relation.rhs)
    if not free_variables(relation.lhs):
        # `5 = x` states 5; `2+3 = 5` states 5; `7 = 11a+c` is an equation, and states neither side.
        if is_name(relation.rhs):
            return parse_structure(relation.lhs)
        return None if free_variables(relation.rhs) else parse_structure(relation.rhs)
    return None
