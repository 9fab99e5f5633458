"""Answer extraction: find the final answer in a completion, and the reference answer in a dataset's answer field.

Every scan is linear in the completion's length (single-pass brace matching, regexes without nested quantifiers,
`rfind` from the end where the last occurrence is what counts), so a 1 MB completion costs milliseconds.
Priority, most explicit first: an `<answer>` tag, a `\\boxed{}`/`\\fbox{}`, then the last of `#### X`,
`Final answer: X` and Minerva's "The final answer is $X$", then "The answer is X", then the last number.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class ExtractionConfig:
    """How to read a completion."""

    strict: bool = False  # several different boxed answers are a hedge; no last-number fallback
    max_answer_chars: int = 2000  # a longer "answer" is not an answer (and would slow every later step)
    tail_window_chars: int = 8192  # where the last number is looked for first

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
    boxes: tuple[str, ...] = ()  # every top-level boxed answer, in order (strict mode looks for hedges here)
    too_long: bool = False


# One token per structural event; `\{` and `\}` are literal braces of a set and never open or close a group.
_BOX_SCAN = re.compile(r"\\(?:boxed|fbox)\s*\{|\\[{}]|[{}]|\\boxed[ \t]+([^\s${}\\]+)")
_FINAL_MARKERS = re.compile(
    r"####|final\s+answer\s*(?:is\s*)?[:：]|\bFINAL\s*[:：]|final\s+answer\s+is\b", re.IGNORECASE
)
_ANSWER_IS = re.compile(r"\banswer\s*(?:is\b|:|=)", re.IGNORECASE)
_SENTENCE_END = re.compile(r"\.(?:\s|$)|\n|\s+I hope it is correct|,\s*(?=[a-zA-Z]{2,}\b)", re.IGNORECASE)
_NUMBER = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:/\d+)?|-?\.\d+")
_LEADING_FILLER = re.compile(r"^(?:is|be|of|=|:|\*\*|\s)+", re.IGNORECASE)
_SPAN_LIMIT = 4000  # how far past a marker an answer may run


def boxed_contents(text: str) -> list[tuple[int, str]]:
    """(start, content) of every outermost, closed \\boxed{...} or \\fbox{...}, in order; one linear pass."""
    boxes: list[tuple[int, str]] = []
    stack: list[tuple[bool, int, int]] = []  # (is_box, opener_start, content_start) per open brace
    open_boxes = 0
    for match in _BOX_SCAN.finditer(text):
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


def _take_span(text: str, pos: int) -> str:
    """The answer that starts at `pos`: a `$...$` / `\\(...\\)` group, else up to the end of the sentence or line."""
    window = text[pos : pos + _SPAN_LIMIT]
    stripped = window.lstrip(" \t:")
    stripped = _LEADING_FILLER.sub("", stripped)
    for opener, closer in (("$$", "$$"), ("$", "$"), (r"\(", r"\)"), (r"\[", r"\]")):
        if stripped.startswith(opener):
            end = stripped.find(closer, len(opener))
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


def _last_match(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    last = None
    for last in pattern.finditer(text):
        pass
    return last


def _last_number(text: str, window: int) -> str | None:
    for chunk in (text[-window:], text) if len(text) > window else (text,):
        match = _last_match(_NUMBER, chunk)
        if match:
            return match.group(0)
    return None


def extract_answer(completion: str, config: ExtractionConfig = LENIENT) -> Extracted | None:
    """The final answer of a completion, or None when it states none."""
    found = _find(completion, config)
    if found is None:
        return None
    text = _clean(found.text)
    if not text:
        return None
    if len(text) > config.max_answer_chars:
        return Extracted(text[: config.max_answer_chars], found.source, found.boxes, too_long=True)
    return Extracted(text, found.source, found.boxes)


def _find(completion: str, config: ExtractionConfig) -> Extracted | None:
    tag_start = completion.rfind("<answer>")
    if tag_start >= 0:
        tag_end = completion.find("</answer>", tag_start)
        if tag_end > 0:
            inner = completion[tag_start + len("<answer>") : tag_end]
            boxes = boxed_contents(inner) if ("boxed" in inner or "fbox" in inner) else []
            if boxes:
                return Extracted(boxes[-1][1], "boxed", tuple(b for _, b in boxes))
            inner = inner.strip()
            if inner:
                return _find(inner, config) if _FINAL_MARKERS.search(inner) else Extracted(inner, "answer_tag")
    if "boxed" in completion or "fbox" in completion:
        boxes = boxed_contents(completion)
        if boxes:
            return Extracted(boxes[-1][1], "boxed", tuple(b for _, b in boxes))
    final = _last_match(_FINAL_MARKERS, completion)
    if final is not None:
        if final.group(0) == "####":
            line = completion[final.end() : final.end() + _SPAN_LIMIT].split("\n", 1)[0]
            return Extracted(line, "gsm8k")
        return Extracted(_take_span(completion, final.end()), "final_answer")
    answer_is = _last_match(_ANSWER_IS, completion)
    if answer_is is not None:
        span = _take_span(completion, answer_is.end())
        if span.strip():
            return Extracted(span, "answer_is")
    if config.last_number_fallback:
        number = _last_number(completion, config.tail_window_chars)
        if number is not None:
            return Extracted(number, "last_number")
    return None


@lru_cache(maxsize=1 << 14)
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
