"""Boxed answers: `\\boxed{}` / `\\fbox{}` found by brace matching, and the run of boxes a text ends with.

Each scan is linear in the text's length: `boxed_contents` (in groupscore.schema.boxes, which the trainer reads too) is
one pass over brace tokens, and `box_spans_from_end` probes from the end with `rfind`, at most `MAX_PROBES` windows
however long the text. `final_box_group` keeps the
last boxes joined only by connectors (`\\boxed{1} and \\boxed{2}`): what counts as a connector differs for a
reference (`_joins_boxes`, the default) and a completion (`connects_answers`, where reasoning between boxes makes
them a correction). The answer extraction (parser.py) and the reference reader (reference.py) both use them.
"""

from __future__ import annotations

import re
from collections.abc import Callable

MAX_PROBES = 64  # how many occurrences a search from the end tries before it gives up (or scans once)
BOX_OPENER = re.compile(r"\\(?:boxed|fbox)\s*\{")


def _closing_brace(text: str, start: int, end: int) -> int:
    """Index of the `}` closing a group whose content starts at `start` (-1 if none); escaped braces don't count.

    Counting with `str.find`/`str.count` keeps the work at C speed: one Python step per `}` on the way.
    """
    depth, i = 1, start
    while True:
        close = text.find("}", i, end)
        if close < 0:
            return -1
        opens = text.count("{", i, close) - text.count("\\{", i, close)
        depth += opens
        if text[close - 1] != "\\" or (close >= 2 and text[close - 2] == "\\"):
            depth -= 1
        if depth <= 0:
            return close
        i = close + 1


_PLAIN_BOX = re.compile(r"\\boxed[ \t]+([^\s${}\\]+)")


def box_spans_from_end(text: str, limit: int, window: int) -> tuple[list[tuple[int, int, str]], bool]:
    """(start, closing brace, content) of the last `limit` top-level closed boxes, in text order, found from the end.

    A box must close within `window` characters (a longer one is no answer), so each probe costs at most one
    window and the whole search at most `MAX_PROBES` windows, however long the text. The flag says that the last
    box runs past `window` (an overlong answer, not a truncated one: enough text follows it).
    """
    found: list[tuple[int, int, str]] = []  # (start, end, content), latest first
    overlong = False
    pos = len(text)
    for _ in range(MAX_PROBES):
        if len(found) >= limit:
            break
        pos = max(text.rfind("\\boxed", 0, pos), text.rfind("\\fbox", 0, pos))
        if pos < 0:
            break
        opener = BOX_OPENER.match(text, pos)
        if opener is None:
            plain = _PLAIN_BOX.match(text, pos)  # `\boxed 5`
            if plain is not None:
                found.append((pos, plain.end() - 1, plain.group(1)))
            continue
        close = _closing_brace(text, opener.end(), min(len(text), opener.end() + window))
        if close < 0:
            overlong |= not found and len(text) > opener.end() + window
            continue  # unclosed (a truncated completion) or too long to be an answer
        while found and found[-1][0] < close:
            found.pop()  # a box found earlier sits inside this one: only the outer box counts
        found.append((pos, close, text[opener.end() : close]))
    return list(reversed(found)), overlong and not found


# What may sit between two boxes of one answer list: `\boxed{1}, \boxed{2}`, `\boxed{(2, 2)} \quad \text{and} \quad
# \boxed{(6, 2)}`, `y_1 = \boxed{..} \) and \( y_2 = \boxed{..}`; plus at most a few plain words ("papers and").
_GAP_TOKENS = re.compile(
    r"\\[()\[\]]|\\q?quad(?![a-zA-Z])|\\[,;:! ]|\\\\|\\(?:text|mathrm|textbf|textrm|mbox)\s*\{[^{}]{0,60}\}"
    r"|[a-zA-Z](?:_\{?\w{1,3}\}?)?\s*=|[$,;.:&]"
)
_GAP_WORD = re.compile(r"[A-Za-z']{1,15}")
_GAP_PUNCTUATION = re.compile(r"[^\w\\{}]+")
_GAP_MAX_CHARS = 160
_GAP_MAX_WORDS = 4


def _joins_boxes(gap: str) -> bool:
    """Whether the text between two boxes only connects them (a list of answers, not reasoning in between)."""
    if len(gap) > _GAP_MAX_CHARS:
        return False
    words = _GAP_TOKENS.sub(" ", gap).split()
    words = [w for w in words if not _GAP_PUNCTUATION.fullmatch(w)]
    return len(words) <= _GAP_MAX_WORDS and all(_GAP_WORD.fullmatch(w) for w in words)


def final_box_group(
    text: str, spans: list[tuple[int, int, str]], joins: Callable[[str], bool] = _joins_boxes
) -> tuple[str, ...]:
    """The contents of the run of boxes the text ends with, joined only by connectors (`joins` says which gaps are)."""
    start = len(spans) - 1
    while start > 0 and joins(text[spans[start - 1][1] + 1 : spans[start][0]]):
        start -= 1
    return tuple(content for _, _, content in spans[start:])


# Between two boxes of a completion's answer list only connectors may stand: words of a list (`and`, `or`,
# `respectively`, "for part (a) and"), labels (`y_2 =`), spacing, math delimiters and punctuation. Any other word is
# reasoning ("Wait, no"): the boxes are a correction and the last one is the answer.
_LIST_WORDS = frozenset({"and", "or", "also", "respectively", "for", "part", "parts", "case", "cases"})
_GAP_WORDS = re.compile(r"\w+")  # a digit between two boxes is no connector either
_GAP_WRAPPER = re.compile(r"\\(?:text|mathrm|textbf|textrm|mbox)\s*\{([^{}]{0,60})\}")
_GAP_CONNECTOR = re.compile(
    r"\\\\|\\[()\[\]]|\\q?quad(?![a-zA-Z])|\\[,;:! ]|[a-zA-Z](?:_\{?\w{1,3}\}?)?\s*=|\([a-z]\)|[$,;.:&]"
)


def connects_answers(gap: str) -> bool:
    """Whether the text between two boxes of a completion only lists them (see `_LIST_WORDS`)."""
    if len(gap) > _GAP_MAX_CHARS:
        return False
    gap = _GAP_CONNECTOR.sub(" ", _GAP_WRAPPER.sub(lambda m: f" {m.group(1)} ", gap))
    return all(word.lower() in _LIST_WORDS for word in _GAP_WORDS.findall(gap))
