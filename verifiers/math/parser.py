"""Answer extraction: find the final answer in a completion, and the reference answer in a dataset's answer field.

Every scan is linear in the completion's length (single-pass brace matching, regexes without nested quantifiers,
`rfind` from the end where the last occurrence is what counts), so a 1 MB completion costs milliseconds.
Priority, most explicit first: an `<answer>` tag, a `\\boxed{}`/`\\fbox{}`, then the last of `#### X`,
`Final answer: X` and Minerva's "The final answer is $X$", then "The answer is X", then the last number.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from groupscore.verifiers.math.caching import short_key_cache


@dataclass(frozen=True)
class ExtractionConfig:
    """How to read a completion."""

    strict: bool = False  # several different boxed answers are a hedge; no last-number fallback
    max_answer_chars: int = 2000  # a longer "answer" is not an answer (and would slow every later step)
    tail_window_chars: int = 2100  # how far back from the last digit a number may start
    boxes_considered: int = 16  # strict mode compares the last this many boxes

    @property
    def last_number_fallback(self) -> bool:
        return not self.strict


LENIENT = ExtractionConfig()
STRICT = ExtractionConfig(strict=True)


@dataclass(frozen=True)
class Extracted:
    """An answer found in a completion."""

    text: str
    source: str  # answer_tag, boxed, gsm8k, final_answer, answer_is, last_number
    boxes: tuple[str, ...] = ()  # the last top-level boxed answers, in order (strict mode looks for hedges here)
    too_long: bool = False


# One token per structural event; `\{` and `\}` are literal braces of a set and never open or close a group.
_BOX_SCAN = re.compile(r"\\(?:boxed|fbox)\s*\{|\\[{}]|[{}]|\\boxed[ \t]+([^\s${}\\]+)")
_FINAL_MARKERS = re.compile(
    r"####|final\s+answer\s*(?:is\s*)?[:：]|\bFINAL\s*[:：]|final\s+answer\s+is\b", re.IGNORECASE
)
_ANSWER_IS = re.compile(r"\banswer\s*(?:is\b|:|=)", re.IGNORECASE)
_SENTENCE_END = re.compile(r"\.(?:\s|$)|\n|(?<!\s)\s+I hope it is correct|,\s*(?=[a-zA-Z]{2,}\b)", re.IGNORECASE)
_NUMBER = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:/\d+)?|-?\.\d+")
_LEADING_FILLER = re.compile(r"^(?:is|be|of|=|:|\*\*|\s)+", re.IGNORECASE)
_SPAN_LIMIT = 4000  # how far past a marker an answer may run
_MAX_PROBES = 64
_BARE_MAX_CHARS = 120
_PROSE = re.compile(r"[a-zA-Z]{2,}\s+[a-zA-Z]{2,}")  # two words in a row: a sentence, not a bare answer
_LATEX_COMMAND = re.compile(r"\\[a-zA-Z]+(?:\{[^{}]*\})?")


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


_BOX_OPENER = re.compile(r"\\(?:boxed|fbox)\s*\{")


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


def boxes_from_end(text: str, limit: int, window: int) -> tuple[list[str], bool]:
    """The contents of the last `limit` top-level closed boxes, in text order, found by probing from the end.

    A box must close within `window` characters (a longer one is no answer), so each probe costs at most one
    window and the whole search at most `_MAX_PROBES` windows, however long the text. The flag says that the last
    box runs past `window` (an overlong answer, not a truncated one: enough text follows it).
    """
    found: list[tuple[int, int, str]] = []  # (start, end, content), latest first
    overlong = False
    pos = len(text)
    for _ in range(_MAX_PROBES):
        if len(found) >= limit:
            break
        pos = max(text.rfind("\\boxed", 0, pos), text.rfind("\\fbox", 0, pos))
        if pos < 0:
            break
        opener = _BOX_OPENER.match(text, pos)
        if opener is None:
            plain = _PLAIN_BOX.match(text, pos)  # `\boxed 5`
            if plain is not None:
                found.append((pos, plain.end(), plain.group(1)))
            continue
        close = _closing_brace(text, opener.end(), min(len(text), opener.end() + window))
        if close < 0:
            overlong |= not found and len(text) > opener.end() + window
            continue  # unclosed (a truncated completion) or too long to be an answer
        while found and found[-1][0] < close:
            found.pop()  # a box found earlier sits inside this one: only the outer box counts
        found.append((pos, close, text[opener.end() : close]))
    return [content for _, _, content in reversed(found)], overlong and not found


def _unescaped(text: str, needle: str, start: int) -> int:
    """Index of the first `needle` at or after `start` that is not escaped (`\\$` is a dollar sign, not math)."""
    pos = text.find(needle, start)
    while pos > 0 and needle == "$" and text[pos - 1] == "\\":
        pos = text.find(needle, pos + 1)
    return pos


def _take_span(text: str, pos: int) -> str:
    """The answer that starts at `pos`: a `$...$` / `\\(...\\)` group, else up to the end of the sentence or line."""
    window = text[pos : pos + _SPAN_LIMIT]
    stripped = window.lstrip(" \t:")
    stripped = _LEADING_FILLER.sub("", stripped)
    for opener, closer in (("$$", "$$"), ("$", "$"), (r"\(", r"\)"), (r"\[", r"\]")):
        if stripped.startswith(opener):
            end = _unescaped(stripped, closer, len(opener))
            if end > 0:
                return stripped[len(opener) : end]
    line_end = _SENTENCE_END.search(stripped)
    return stripped[: line_end.start()] if line_end else stripped


def _clean(answer: str) -> str:
    answer = answer.strip().rstrip(".").strip().strip("*_").strip()
    # `\boxed{\boxed{3}}` and `$\boxed{3}$`: a box that is the whole answer is only a wrapper.
    for _ in range(4):
        inner = answer.strip("$ ")
        if not inner.startswith(("\\boxed", "\\fbox")):
            break
        boxes = boxed_contents(inner)
        if len(boxes) != 1 or not inner.endswith("}") or boxes[0][0] != 0:
            break
        answer = boxes[0][1].strip()
    return answer


def _last_match(pattern: re.Pattern[str], text: str, end: int | None = None) -> re.Match[str] | None:
    last = None
    for last in pattern.finditer(text, 0, len(text) if end is None else end):
        pass
    return last


def _last_marker(text: str, needles: tuple[str, ...], pattern: re.Pattern[str]) -> re.Match[str] | None:
    """The last match of `pattern`, found by probing occurrences of its literal `needles` from the end.

    `rfind` runs at memory speed, so the common case (a marker near the end) never scans the whole text; after
    `_MAX_PROBES` false alarms the rest is scanned once by the regex, which keeps the worst case linear.
    """
    ends = {needle: len(text) for needle in needles}
    found = {needle: text.rfind(needle) for needle in needles}
    for _ in range(_MAX_PROBES):
        needle = max(found, key=found.__getitem__)
        pos = found[needle]
        if pos < 0:
            return None
        match = pattern.match(text, pos)
        if match:
            return match
        ends[needle] = pos + len(needle) - 1
        found[needle] = text.rfind(needle, 0, ends[needle])
    return _last_match(pattern, text, max(ends.values()))


def _last_number(text: str, window: int) -> str | None:
    last_digit = max(text.rfind(d) for d in "0123456789")
    if last_digit < 0:
        return None
    start = max(0, last_digit - window)
    match = _last_match(_NUMBER, text[start : last_digit + 1])
    return match.group(0) if match else None


def extract_answer(completion: str, config: ExtractionConfig = LENIENT) -> Extracted | None:
    """The final answer of a completion, or None when it states none."""
    try:
        found = _find(completion, config)
    except _OverlongBox:
        return Extracted("", "boxed", too_long=True)
    if found is None:
        return None
    text = _clean(found.text)
    if not text:
        return None
    if len(text) > config.max_answer_chars:
        return Extracted(text[: config.max_answer_chars], found.source, found.boxes, too_long=True)
    return Extracted(text, found.source, found.boxes)


class _OverlongBox(Exception):
    """The last box runs past the answer length limit."""


def _boxes(text: str, config: ExtractionConfig) -> list[str]:
    # Lenient mode needs the last box only; strict mode looks for a hedge among the last few.
    boxes, overlong = boxes_from_end(text, config.boxes_considered if config.strict else 1, config.max_answer_chars + 1)
    if overlong:
        raise _OverlongBox
    return boxes


def _find(completion: str, config: ExtractionConfig) -> Extracted | None:
    tag_start = completion.rfind("<answer>")
    if tag_start >= 0:
        tag_end = completion.find("</answer>", tag_start)
        if tag_end > 0:
            inner = completion[tag_start + len("<answer>") : tag_end]
            boxes = _boxes(inner, config) if ("boxed" in inner or "fbox" in inner) else []
            if boxes:
                return Extracted(boxes[-1], "boxed", tuple(boxes))
            inner = inner.strip()
            if inner:
                return _find(inner, config) if _FINAL_MARKERS.search(inner) else Extracted(inner, "answer_tag")
    if "boxed" in completion or "fbox" in completion:
        boxes = _boxes(completion, config)
        if boxes:
            return Extracted(boxes[-1], "boxed", tuple(boxes))
    final = _last_marker(completion, ("####", "final", "Final", "FINAL"), _FINAL_MARKERS)
    if final is not None:
        if final.group(0) == "####":
            line = completion[final.end() : final.end() + _SPAN_LIMIT].split("\n", 1)[0]
            return Extracted(line, "gsm8k")
        return Extracted(_take_span(completion, final.end()), "final_answer")
    answer_is = _last_marker(completion, ("answer", "Answer", "ANSWER"), _ANSWER_IS)
    if answer_is is not None:
        span = _take_span(completion, answer_is.end())
        if span.strip():
            return Extracted(span, "answer_is")
    bare = completion.strip().strip("$").strip()
    if len(bare) <= _BARE_MAX_CHARS and bare and not _PROSE.search(_LATEX_COMMAND.sub(" ", bare)):
        return Extracted(bare, "bare")  # the completion is nothing but an answer: `\dfrac{9}{7}`
    if config.last_number_fallback:
        number = _last_number(completion, config.tail_window_chars)
        if number is not None:
            span = _last_math_span(completion, config.tail_window_chars)
            # `... is $\frac{9}{7}$`: the last number sits in a formula, and the formula is the answer.
            if span is not None and number in span:
                return Extracted(span, "last_math")
            return Extracted(number, "last_number")
    return None


def _last_math_span(text: str, window: int) -> str | None:
    """The content of the last `$...$` in the final `window` characters, if it is the last thing with a digit."""
    end = text.rfind("$")
    if end <= 0:
        return None
    start = text.rfind("$", max(0, end - window), end)
    if start < 0:
        return None
    tail_digits = max(text.rfind(d, end) for d in "0123456789")
    if tail_digits > end:
        return None  # a number written after the formula is later than it
    return text[start + 1 : end].strip() or None


@short_key_cache(maxsize=1 << 13)
def parse_gold(answer: str) -> str:
    """The reference answer's text from a dataset field: plain, LaTeX, `$...$`, `\\boxed{}`, or a GSM8K solution."""
    text = answer.strip()
    if "boxed" in text or "fbox" in text:
        boxes = boxed_contents(text)
        if boxes:
            return boxes[-1][1].strip()
    marker = text.rfind("####")
    if marker >= 0:
        return text[marker + 4 :].strip()
    return text
