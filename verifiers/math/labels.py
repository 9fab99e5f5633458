"""Labels on answers: `(p,q)=(3,2)` is the tuple (3,2), `y=3, x=4` is (x, y) = (4, 3), and `W(x)=1 or W(x)=-1`
gives two values of one unknown. The grader drops a label that only one side carries before matching structures.
"""

from __future__ import annotations

import re
from itertools import pairwise

from groupscore.verifiers.math.structures import Items, Node, Relation, parse_structure


def has_relation(node: Node) -> bool:
    return isinstance(node, Relation) or (isinstance(node, Items) and any(has_relation(i) for i in node.items))


def unlabel(node: Node) -> Node:
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
            value = Items(tuple(value.items[k] for k in _label_order(labels)), value.kind)
        return unlabel(value)
    if not isinstance(node, Items):
        return node
    # `x=3, y=4` is one answer of two unknowns; `x = 3 or y = 4` stays a disjunction (never paid as the pair).
    kind = "labelled" if node.kind == "list" and distinct_unknowns(node.items) else node.kind
    return Items(tuple(unlabel(i) for i in _by_label(node.items)), kind)


_SUBSCRIPT = re.compile(r"_\{?\w+\}?|'+")


def distinct_unknowns(items: tuple[Node, ...]) -> bool:
    """`x=3, y=4`, `AB=4, CD=5`: values assigned to different unknowns, so their order is the labels' order and an
    unlabelled answer must follow it. Not `x_1=2, x_2=3` (the roots of one unknown) nor `W(x)=1, W(x)=-1`."""
    if len(items) < 2 or not all(isinstance(i, Relation) and i.is_assignment for i in items):
        return False
    bases = [_SUBSCRIPT.sub("", i.lhs.strip()) for i in items if isinstance(i, Relation)]  # every item is one
    return len(set(bases)) == len(bases)


_LETTER_LABEL = re.compile(r"([a-zA-Z])(?:_\{?(\w{1,3})\}?)?")


def _by_label(items: tuple[Node, ...]) -> tuple[Node, ...]:
    """Values labelled by distinct letters in the order of their labels (`_label_order`); other labels (`AB`,
    `V_1:V_2`) keep the text's order."""
    labels = [
        _LETTER_LABEL.fullmatch(i.lhs.strip()) if isinstance(i, Relation) and i.is_assignment else None for i in items
    ]
    found = [m for m in labels if m is not None]
    if len(items) < 2 or len(found) < len(labels) or len({m.group(0) for m in found}) < len(found):
        return items
    return tuple(items[k] for k in _label_order(found))


def _label_order(labels: list[re.Match[str]]) -> list[int]:
    """The order in which labelled values are listed. A run of letters (`y=3, x=4`, `b=3, a=4`, `x_2=3, x_1=4`) in
    the alphabet's order, x before y, as an unlabelled tuple lists them: read in text order, `y=3, x=4` paid against
    `(3, 4)`, which is (x, y) = (4, 3). Letters that form no run (`x=-5, p=\\frac{14}{3}`) in the text's order, which
    is the question's: whatever one reference writes, it is read one way only."""
    keys = [_label_key(m) for m in labels]
    letters = sorted(ord(key[0]) for key in keys)
    same_letter = len(set(letters)) == 1
    run = all(b - a == 1 for a, b in pairwise(letters)) and all(key[2] == (1, 0, "") for key in keys)
    if not (same_letter or run):
        return list(range(len(labels)))
    return sorted(range(len(labels)), key=lambda k: keys[k])


def _label_key(label: re.Match[str]) -> tuple:
    letter, sub = label.group(1), label.group(2) or ""
    return (letter.lower(), letter, (0, int(sub), "") if sub.isdecimal() else (1, 0, sub))


def _tuple_labels(lhs: str) -> list[re.Match[str]] | None:
    """The labels of a tuple of distinct single letters on a left side (`(y, x)`), else None."""
    lhs = lhs.strip()
    if not (lhs.startswith("(") and lhs.endswith(")")):
        return None
    matches = [_LETTER_LABEL.fullmatch(part.strip()) for part in lhs[1:-1].split(",")]
    labels = [m for m in matches if m is not None]
    if len(matches) < 2 or len(labels) < len(matches) or len({m.group(0) for m in labels}) < len(labels):
        return None
    return labels


def one_label(node: Node) -> str | None:
    """The label of an answer that gives several values of one unknown (`W(x)=1 or W(x)=-1`), else None."""
    if not (isinstance(node, Items) and node.items):
        return None
    labels = {i.lhs for i in node.items if isinstance(i, Relation) and i.is_assignment}
    count = sum(1 for i in node.items if isinstance(i, Relation) and i.is_assignment)
    return labels.pop() if count == len(node.items) and len(labels) == 1 else None


def assigned_names(node: Node) -> frozenset[str] | None:
    """The unknowns an answer assigns values to: `(x, y) = (3, 4)` and `x = 3, y = 4` both give {x, y}; None for
    anything else (a bare value, an equation, one unknown's several values)."""
    if isinstance(node, Relation) and node.is_assignment:
        labels = _tuple_labels(node.lhs)
        return frozenset(m.group(0) for m in labels) if labels else None
    if isinstance(node, Items) and node.kind == "list" and distinct_unknowns(node.items):
        return frozenset(i.lhs.strip() for i in node.items if isinstance(i, Relation))
    return None
