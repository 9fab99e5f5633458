"""Boxed answers: every outermost `\\boxed{...}` / `\\fbox{...}` of a text, found by brace matching in one pass.

How math references and completions mark an answer, so a part of the wire's vocabulary: the trainer reads a dataset's
boxed reference column with it (`answer_format: boxed`) needing only groupscore-client, and the math verifier's
extraction (`verifiers/math/boxes.py`, `parser.py`) reads boxes with the same scan.
"""

from __future__ import annotations

import re

# One token per structural event; `\{` and `\}` are literal braces of a set and never open or close a group.
_BOX_SCAN = re.compile(r"\\(?:boxed|fbox)\s*\{|\\[{}]|[{}]|\\boxed[ \t]+([^\s${}\\]+)")


def boxed_contents(text: str) -> list[tuple[int, str]]:
    """(start, content) of every outermost, closed \\boxed{...} or \\fbox{...}, in order; one linear pass."""
    boxes: list[tuple[int, str]] = []
    stack: list[tuple[bool, int, int]] = []  # (is_box, opener_start, content_start) per open brace
    open_boxes = 0
    first = min((p for p in (text.find("\\boxed"), text.find("\\fbox")) if p >= 0), default=-1)
    if first < 0:
        return boxes
    for match in _BOX_SCAN.finditer(text, first):  # braces before the first box cannot matter
        token = match.group(0)
        if match.group(1) is not None:  # `\boxed 5`: a box without braces
            if open_boxes == 0:
                boxes.append((match.start(), match.group(1)))
        elif token.endswith("{") and token.startswith("\\") and len(token) > 2:
            stack.append((True, match.start(), match.end()))
            open_boxes += 1
        elif token == "{":
            stack.append((False, match.start(), match.end()))
        elif token == "}":
            if not stack:
                continue
            is_box, opener, start = stack.pop()
            if is_box:
                open_boxes -= 1
                if open_boxes == 0:
                    boxes.append((opener, text[start : match.start()]))
    return boxes
