"""The shape of an answer: a plain expression, or a set, tuple, interval, union, matrix, relation, list or choice.

`parse_structure` reads normalised answer text into small frozen nodes; the grader compares nodes of matching
shapes and hands only the leaf expressions to its string / numeric / symbolic cascade.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from groupscore.verifiers.math.caching import short_key_cache
from groupscore.verifiers.math.numeric import evaluate, fraction_of, free_variables

MAX_ITEMS = 64  # a longer list is compared as plain text; nobody's answer has 65 parts
MAX_NESTING = 8


@dataclass(frozen=True)
class Expr:
    text: str


@dataclass(frozen=True)
class Choice:
    letter: str  # a multiple-choice answer: "B", "(B)", "\text{(B)}"


@dataclass(frozen=True)
class Relation:
    lhs: str
    op: str  # "=", "<", ">", "\leq", "\geq", "\neq"
    rhs: str

    @property
    def is_assignment(self) -> bool:
        """`x = 3`, `y = 2x+1`, `f(x) = ...`: the right side is the answer."""
        return self.op == "=" and is_name(self.lhs)


@dataclass(frozen=True)
class Chain:
    """`2+3=5`, `x=y=5`, `AB = 2+3 = 5`: equal signs in a row state the last member, and every member before it is
    a name or a closed expression that must equal it (`3 = 4` states nothing)."""

    closed: tuple[str, ...]  # the members that are not names, each claimed equal to `value`
    value: str


@dataclass(frozen=True)
class Items:
    items: tuple[Node, ...]
    # "set" (\{..\}), "tuple" ((..) or \langle..\rangle), "list" (a, b / a and b), "or" (a or b), "pm" (a \pm b),
    # "labelled" (`x=3, y=4` without its labels: the values of distinct unknowns, in their labels' order)
    kind: str

    @property
    def ordered(self) -> bool:
        return self.kind in ("tuple", "labelled")

    @property
    def alternatives(self) -> bool:
        """`a or b`, `a \\pm b`: a disjunction, whose members have no order that could fill an ordered answer."""
        return self.kind in ("or", "pm")


@dataclass(frozen=True)
class Interval:
    lo: str
    hi: str
    left_closed: bool
    right_closed: bool


@dataclass(frozen=True)
class Union:
    parts: tuple[Node, ...]


@dataclass(frozen=True)
class Matrix:
    rows: tuple[tuple[str, ...], ...]
    determinant: bool = False  # `vmatrix`: the bars ask for the determinant, a number


@dataclass(frozen=True)
class Ratio:
    parts: tuple[str, ...]  # `3:2`, `1:2:3`, `AB:BC`: equal to a proportional ratio, never to a clock time


@dataclass(frozen=True)
class ClockTime:
    """`9:00`, `12:30pm`, `14:05:30`: a time of day, compared as one (never as the ratio 9/0 or 12/30)."""

    hours: int
    minutes: int
    seconds: int
    meridiem: str  # "am", "pm", or "" (24-hour or unstated)
    text: str

    def as_ratio(self) -> Ratio:
        """The same digits read as a ratio, for a question about ratios (`1:15` against `2:30`)."""
        return Ratio(tuple(self.text.removesuffix(self.meridiem).split(":")))


Node = Expr | Choice | Relation | Chain | Items | Interval | Union | Matrix | Ratio | ClockTime

_VARIABLE = re.compile(r"[a-zA-Z](?:_\{?\w+\}?)?|\\(?:alpha|beta|gamma|theta|lambda|mu|phi|omega|sigma|tau)")
# What may stand left of `=` as a label for the answer on the right: a symbol (subscripted, primed), a segment or
# polygon `AB`, `|AB|`, `\overline{AB}`, an angle, a function of symbols `W(n)`; and tuples, ratios and fractions
# of those (`(p,q)`, `V_1:V_2`, `\frac{NO}{BO}`). A number or an expression (`7`, `11a+c`) is never a label.
_NAME = re.compile(
    r"[a-zA-Z](?:_\{?\w+\}?)?'*|[A-Z]{2,4}|\|[A-Z]{1,4}\||\\overline\{[A-Z]{1,4}\}|m?\\angle\s*[A-Z]{1,3}"
    r"|\\(?:alpha|beta|gamma|theta|lambda|mu|phi|omega|sigma|tau)(?:_\{?\w+\}?)?"
    r"|[a-zA-Z](?:\^\{?-1\}?)?\([a-zA-Z](?:,[a-zA-Z])*\)"
)
_FRACTION_OF = re.compile(r"\\frac\{([^{}]+)\}\{([^{}]+)\}")
# Hours of one or two digits, then minutes (and seconds) of exactly two: `1:15` is a time, `3:2` a ratio.
_CLOCK = re.compile(r"(\d{1,2}):([0-5]\d)(?::([0-5]\d))?(am|pm)?")
_PM = re.compile(r"\\(?:pm|mp)(?![a-zA-Z])")
_CHOICE = re.compile(r"\(?([A-J])\)?")
_MATRIX = re.compile(r"\\begin\{([pbBvV]?matrix|array)\}(?:\{[^{}]*\})?(.*)\\end\{\1\}", re.DOTALL)
_RELATION_OPS = ("\\leq", "\\geq", "\\neq", "<", ">", "=")
_LOWER_OPS = {"<": False, "\\leq": True}  # op -> closed, when the left side is the smaller
_UPPER_OPS = {">": False, "\\geq": True}


def _top_level(text: str, needles: tuple[str, ...]) -> list[tuple[int, str]]:
    """(position, needle) of every needle outside all brackets, left to right, not overlapping; one linear pass."""
    hits: list[tuple[int, str]] = []
    needles = tuple(s for s in needles if s in text)  # most answers hold none of them: no scan at all
    if not needles:
        return hits
    depth, i, n = 0, 0, len(text)
    while i < n:
        ch = text[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(depth - 1, 0)
        elif depth == 0:
            needle = next((s for s in needles if text.startswith(s, i) and not _inside_word(text, i, s)), None)
            if needle is not None:
                hits.append((i, needle))
                i += len(needle)
                continue
        i += 1
    return hits


def split_top(text: str, separators: tuple[str, ...]) -> list[str]:
    """Split at separators that sit outside every bracket."""
    parts, start = [], 0
    for pos, sep in _top_level(text, separators):
        parts.append(text[start:pos])
        start = pos + len(sep)
    parts.append(text[start:])
    return parts


def _inside_word(text: str, i: int, sep: str) -> bool:
    """`\\in` must not match the start of `\\infty`, nor `or` the middle of `for`."""
    if sep[-1].isalpha() and i + len(sep) < len(text) and text[i + len(sep)].isalpha():
        return True
    return sep[0].isalpha() and i > 0 and (text[i - 1].isalpha() or text[i - 1] == "\\")


def _relation_ops(text: str) -> list[tuple[int, str]]:
    """(position, op) of every top-level relation symbol."""
    return _top_level(text, _RELATION_OPS)


@short_key_cache(maxsize=1 << 14)
def parse_structure(text: str) -> Node:
    """The structure of one normalised answer."""
    return _parse(text.strip(), 0)


def _parse(text: str, depth: int) -> Node:
    if depth > MAX_NESTING or len(text) < 1:
        return Expr(text)
    if text == "\\emptyset":
        return Items((), "set")
    clock = _clock_time(text)
    if clock is not None:
        return clock
    choice = _CHOICE.fullmatch(text)
    if choice and (text[0] == "(") == (text[-1] == ")"):
        return Choice(choice.group(1))
    matrix = _MATRIX.fullmatch(text)
    if matrix is None and text[:1] in "([" and text[-1:] in ")]" and "\\begin" in text:
        matrix = _MATRIX.fullmatch(text[1:-1].strip())  # `\left[\begin{matrix}..\end{matrix}\right]`
    if matrix:
        rows = tuple(tuple(c.strip() for c in row.split("&")) for row in matrix.group(2).split("\\\\") if row.strip())
        return Matrix(rows, determinant=matrix.group(1) == "vmatrix")
    groups = _solution_groups(text)
    if groups:  # `p=5,q=2;p=7,q=2`, `p=5,q=2 and p=7,q=2`: solutions whose parts are separated by commas
        return Items(tuple(_parse(g, depth + 1) for g in groups), "list")
    for separators, kind in (((" or ",), "or"), ((",", ";", " and "), "list")):
        parts = [p.strip() for p in split_top(text, separators)]
        if len(parts) > 1:
            parts = [p for p in parts if p] if kind == "list" else parts
            if len(parts) > MAX_ITEMS:
                return Expr(text)
            if len(parts) > 1:
                return Items(tuple(_parse(p, depth + 1) for p in parts), kind)
            return _parse(parts[0], depth + 1) if parts else Expr(text)
    if ("\\pm" in text or "\\mp" in text) and _PM.search(text):
        # `\pm` is a sign on the term after it, wherever it sits: `\frac{-1 \pm \sqrt5}{2}` is two numbers.
        plus = _PM.sub(lambda m: "+" if m.group(0) == "\\pm" else "-", text)
        minus = _PM.sub(lambda m: "-" if m.group(0) == "\\pm" else "+", text)
        return Items((_parse(plus, depth + 1), _parse(minus, depth + 1)), "pm")
    union = [p.strip() for p in split_top(text, ("\\cup",))]
    if len(union) > 1 and all(union):
        return Union(tuple(_parse(p, depth + 1) for p in union))
    member = split_top(text, ("\\in",))
    if len(member) == 2 and _VARIABLE.fullmatch(member[0].strip()):
        return _parse(member[1].strip(), depth + 1)
    ops = _relation_ops(text)
    if ops:
        return _relation(text, ops, depth)
    ratio = [p.strip() for p in split_top(text, (":",))] if ":" in text else []
    if len(ratio) > 1:
        return Ratio(tuple(ratio)) if all(ratio) and len(ratio) <= MAX_ITEMS else Expr(text)
    return _bracketed(text, depth)


def _solution_groups(text: str) -> list[str]:
    """The solutions of an answer that lists several, each of several parts: split at semicolons when one part holds
    a comma, or at `and` when every part does (`3, 4 and 5` is one list)."""
    for separator, needs in ((";", any), (" and ", all)):
        if separator in text:
            groups = [g.strip() for g in split_top(text, (separator,))]
            has_comma = [bool(_top_level(g, (",",))) for g in groups]
            if len(groups) > 1 and all(groups) and needs(has_comma) and len(groups) <= MAX_ITEMS:
                return groups
    return []


def _clock_time(text: str) -> ClockTime | None:
    match = _CLOCK.fullmatch(text)
    if match is None:
        return None
    hours, minutes, seconds, meridiem = match.groups()
    if int(hours) > (12 if meridiem else 24) or (meridiem and int(hours) == 0):
        return None
    return ClockTime(int(hours), int(minutes), int(seconds or 0), meridiem or "", text)


def _relation(text: str, ops: list[tuple[int, str]], depth: int) -> Node:
    pieces, prev = [], 0
    for pos, op in ops:
        pieces.append(text[prev:pos].strip())
        prev = pos + len(op)
    pieces.append(text[prev:].strip())
    names = [op for _, op in ops]
    if len(ops) == 1:
        return Relation(pieces[0], names[0], pieces[1])
    if all(op == "=" for op in names):
        while len(pieces) > 2 and is_name(pieces[-1]) and not is_name(pieces[-2]):
            pieces.pop()  # `2+3 = 5 = x` states 5, as `5 = x` does
        if len(pieces) == 2:
            return Relation(pieces[0], "=", pieces[1])
        if is_name(pieces[0]):  # `y = 2+2 = 4`: the unknown is assigned what the rest states
            return Relation(pieces[0], "=", " = ".join(pieces[1:]))
        members = [p for p in pieces[:-1] if not is_name(p)]
        if any(free_variables(p) or not p for p in members) or not pieces[-1]:
            # `x=3 x=4` (a `\\quad` between two assignments), `x = 3 \\text{hmm} x = 4`: no one value is stated
            return Expr(text)
        return Chain(tuple(members), pieces[-1])
    if len(ops) == 2 and _ABSOLUTE.fullmatch(pieces[1]):
        return _absolute_between(pieces[0], names[0], names[1], pieces[2]) or Expr(text)
    if len(ops) == 2 and is_name(pieces[1]):
        a, b = names
        if a in _LOWER_OPS and b in _LOWER_OPS:
            return Interval(pieces[0], pieces[2], _LOWER_OPS[a], _LOWER_OPS[b])
        if a in _UPPER_OPS and b in _UPPER_OPS:
            return Interval(pieces[2], pieces[0], _UPPER_OPS[b], _UPPER_OPS[a])
    return Expr(text)


_ABSOLUTE = re.compile(r"\|[a-zA-Z]\|")


def _absolute_between(lo: str, op_lo: str, op_hi: str, hi: str) -> Node | None:
    """`1 \\leq |z| \\leq \\frac32` is `[-3/2, -1] \\cup [1, 3/2]`; with a lower bound of 0 or less, one interval."""
    if op_lo not in _LOWER_OPS or op_hi not in _LOWER_OPS:
        return None
    evaluated = evaluate(lo)
    low = fraction_of(evaluated) if evaluated is not None else None
    if low is None:
        return None
    lo_closed, hi_closed = _LOWER_OPS[op_lo], _LOWER_OPS[op_hi]
    if low <= 0:
        return Interval(f"-({hi})", hi, hi_closed, hi_closed) if low < 0 or lo_closed else None
    return Union((Interval(f"-({hi})", f"-({lo})", hi_closed, lo_closed), Interval(lo, hi, lo_closed, hi_closed)))


def _bracketed(text: str, depth: int) -> Node:
    if text.startswith("\\{") and text.endswith("\\}") and _balanced_outer(text[1:]):
        inner = text[2:-2].strip()
        parts = [p.strip() for p in split_top(inner, (",", ";"))] if inner else []
        return Items(tuple(_parse(p, depth + 1) for p in parts if p), "set")
    if text.startswith("\\langle") and text.endswith("\\rangle"):
        parts = [p.strip() for p in split_top(text[7:-7], (",",))]
        return Items(tuple(_parse(p, depth + 1) for p in parts), "tuple")
    if text[0] == "{" and text[-1] == "}" and _balanced_outer(text):
        return _parse(text[1:-1].strip(), depth + 1)  # plain braces only group (`{1,3}` prints as 1,3)
    if text[0] in "([" and text[-1] in ")]" and _balanced_outer(text):
        inner = text[1:-1].strip()
        parts = [p.strip() for p in split_top(inner, (",",))]
        if len(parts) == 1:
            if text[0] == "(" and text[-1] == ")":
                return _parse(inner, depth + 1)
            return Expr(text)
        if len(parts) == 2 and not (text[0] == "(" and text[-1] == ")"):
            return Interval(parts[0], parts[1], text[0] == "[", text[-1] == "]")
        if len(parts) > MAX_ITEMS:
            return Expr(text)
        return Items(tuple(_parse(p, depth + 1) for p in parts), "tuple")
    return Expr(text)


def _balanced_outer(text: str) -> bool:
    """The first bracket is closed (by any closer, as intervals mix them) exactly at the last character."""
    depth = 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return i == len(text) - 1
    return False


def is_inequality(node: Node) -> bool:
    return isinstance(node, Relation) and node.op != "="


def is_variable(text: str) -> bool:
    return bool(_VARIABLE.fullmatch(text.strip()))


def is_name(text: str) -> bool:
    """Whether `text` names a quantity (a label for an answer), as opposed to being a number or an expression."""
    text = text.strip()
    if len(text) > 60:
        return False  # names are short; this keeps label checks off long answers
    if _NAME.fullmatch(text):
        return True
    fraction = _FRACTION_OF.fullmatch(text)
    if fraction:
        return all(_NAME.fullmatch(part.strip()) for part in fraction.groups())
    if text[:1] == "(" and text[-1:] == ")" and _balanced_outer(text):
        parts = split_top(text[1:-1], (",",))
        return len(parts) > 1 and all(_NAME.fullmatch(p.strip()) for p in parts)
    parts = split_top(text, (":",))
    return len(parts) > 1 and all(_NAME.fullmatch(p.strip()) for p in parts)


def as_interval(node: Node) -> Node | None:
    """An inequality in one variable as the interval (or union) it describes; None if it is not one."""
    if isinstance(node, Interval | Union):
        return node
    if isinstance(node, Items) and node.kind == "tuple" and len(node.items) == 2:
        lo, hi = node.items
        if isinstance(lo, Expr) and isinstance(hi, Expr):
            return Interval(lo.text, hi.text, False, False)  # "(a, b)" read as an open interval
    if isinstance(node, Items) and node.kind == "or":
        parts = [as_interval(item) for item in node.items]
        if all(p is not None for p in parts):
            return Union(tuple(p for p in parts if p is not None))
    if not isinstance(node, Relation) or node.op == "=":
        return None
    var_left = is_variable(node.lhs)
    var_right = is_variable(node.rhs)
    if var_left == var_right:
        return None
    bound = node.rhs if var_left else node.lhs
    if node.op == "\\neq":  # x != a: the reals without a
        return Union((Interval("-\\infty", bound, False, False), Interval(bound, "\\infty", False, False)))
    op = node.op
    if not var_left:  # "3 < x" reads as "x > 3"
        op = {"<": ">", ">": "<", "\\leq": "\\geq", "\\geq": "\\leq"}[op]
    if op in ("<", "\\leq"):
        return Interval("-\\infty", bound, False, op == "\\leq")
    return Interval(bound, "\\infty", op == "\\geq", False)
