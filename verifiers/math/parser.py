"""Answer extraction: find the final answer in a completion (references: reference.py).

Every scan is linear in the completion's length (single-pass brace matching, regexes without nested quantifiers,
`rfind` from the end where the last occurrence is what counts), so a 1 MB completion costs milliseconds.
Priority, most explicit first (docs/verifiers/math-answers.md, "Where the answer is read from"):
1. an `<answer>` tag; 2. the last `\\boxed{}`/`\\fbox{}` (or, when the reference has several answers, the run of
boxes it ends: `\\boxed{1} and \\boxed{2}`), unless a `#### X` / `Final answer:` sentence comes after it;
3. the last of `#### X`, `Final answer: X` and Minerva's "The final answer is $X$"; 4. "The answer is X" and
`Answer $X$`; 5. a completion that is nothing but an answer; 6. fallback: the last formula of the text if it holds the
last number, else the last number. A marker whose sentence is prose ("The largest $n$ is 34.") yields that sentence's
one value. Steps 5-6 and the prose reduction are the `fallback` (off: an explicit marker is required). Boxes are
found by boxes.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from groupscore.schema.boxes import boxed_contents
from groupscore.verifiers.math.boxes import MAX_PROBES, box_spans_from_end, connects_answers, final_box_group
from groupscore.verifiers.math.qualifiers import qualified_number, qualifiers
from groupscore.verifiers.math.statements import (
    HEDGED,
    HEDGING,
    NUMBER,
    PROSE,
    final_statement,
    last_match,
    last_number,
    plain_view,
    statement_of,
    unescaped,
)


@dataclass(frozen=True)
class AnswerExtraction:
    """How to read a completion's final answer."""

    strict: bool = False  # several different boxed answers are a hedge; no last-number fallback
    fallback: bool = True  # read answers without an explicit marker (steps 5-6 above, prose sentences)
    max_answer_chars: int = 2000  # a longer "answer" is not an answer (and would slow every later step)
    tail_window_chars: int = 2100  # how far back from the last digit a number may start
    boxes_considered: int = 16  # strict mode compares the last this many boxes

    @property
    def last_number_fallback(self) -> bool:
        return self.fallback and not self.strict


LENIENT = AnswerExtraction()
STRICT = AnswerExtraction(strict=True)
NO_FALLBACK = AnswerExtraction(fallback=False)
STRICT_NO_FALLBACK = AnswerExtraction(strict=True, fallback=False)


@dataclass(frozen=True)
class Extracted:
    """An answer found in a completion."""

    text: str
    source: str  # answer_tag, boxed, gsm8k, final_answer, answer_is, last_number
    boxes: tuple[str, ...] = ()  # the last top-level boxed answers, in order (strict mode looks for hedges here)
    too_long: bool = False


_FINAL_MARKERS = re.compile(
    r"####|final\s+answer\s*(?:is\s*)?[:：]|\bFINAL\s*[:：]|final\s+answer\s+is\b", re.IGNORECASE
)
# "the answer is X", "Answer: X", and `Answer $X$` / `Answer \[X\]` (capitalised, a formula right after it).
_ANSWER_IS = re.compile(r"\b(?:answer\s*(?:is\b|:|=)|(?-i:Answer)[ \t]*(?=\$|\\[(\[]))", re.IGNORECASE)
_SENTENCE_END = re.compile(r"\.(?:\s|$)|\n|(?<!\s)\s+I hope it is correct|,\s*(?=[a-zA-Z]{2,}\b)", re.IGNORECASE)
_LEADING_FILLER = re.compile(r"^(?:is|be|of|=|:|\*\*|\\?\"|\s)+", re.IGNORECASE)
_SPAN_LIMIT = 4000  # how far past a marker an answer may run
_BARE_MAX_CHARS = 120
_PROSE = re.compile(r"[a-zA-Z]{2,}\s+[a-zA-Z]{2,}")  # two words in a row: a sentence, not a bare answer
_LATEX_COMMAND = re.compile(r"\\[a-zA-Z]+(?:\{[^{}]*\})?")


def is_prose(text: str) -> bool:
    """Two words in a row once LaTeX commands are dropped: a sentence, not a bare answer."""
    return _PROSE.search(_LATEX_COMMAND.sub(" ", text)) is not None


_FORMULA_LINK = re.compile(r"\s*(,\s*(?:and|or)\b|,|and\b|or\b|\\text\{\s*(?:and|or)\s*\})\s*(?=\$)")


def _formula_list(text: str) -> str | None:
    """`$12$ and $13$`, `$6$ or $7$`: several formulas joined by words are one answer (a list, or a hedge that the
    comparison refuses), not the first formula alone. None when only one formula starts the text."""
    parts: list[str] = []
    pos = 0
    for _ in range(MAX_PROBES):
        end = unescaped(text, "$", pos + 1)
        if end < 0 or text.startswith("$$", pos):
            return None
        parts.append(text[pos + 1 : end])
        link = _FORMULA_LINK.match(text, end + 1)
        if link is None:
            break
        parts.append(" or " if "or" in link.group(1) else ", ")
        pos = link.end()
    return "".join(parts) if len(parts) > 1 else None


def _take_span(text: str, pos: int) -> str:
    """The answer that starts at `pos`: a `$...$` / `\\(...\\)` group, else up to the end of the sentence or line."""
    window = text[pos : pos + _SPAN_LIMIT]
    stripped = window.lstrip(" \t:")
    stripped = _LEADING_FILLER.sub("", stripped)
    for opener, closer in (("$$", "$$"), ("$", "$"), (r"\(", r"\)"), (r"\[", r"\]")):
        if stripped.startswith(opener):
            end = unescaped(stripped, closer, len(opener))
            if end > 0:
                more = _formula_list(stripped) if opener == "$" else None
                return more if more is not None else stripped[len(opener) : end]
    line_end = _SENTENCE_END.search(stripped)
    return stripped[: line_end.start()] if line_end else stripped


# A formula inside a sentence, and the words that make a sentence a hedge rather than a statement of one value.
_INLINE_MATH = re.compile(r"(?<!\\)\$\$?([^$]{1,400}?)\$\$?|\\\((.{1,400}?)\\\)|\\\[(.{1,400}?)\\\]", re.DOTALL)
_HEDGE_WORDS = re.compile(
    r"\b(?:or|either|maybe|perhaps|possibly|probably|between|not|approximately|about|around)\b", re.IGNORECASE
)


def _sentence_value(span: str) -> str:
    """The one value a prose answer sentence states: "The largest $n$ is 34" -> 34, "is 120 cubic units" -> 120.

    Values are the numbers outside formulas and the formulas that hold a digit (`$n$`, `$f(x)$` only name things).
    A sentence with two values, or hedging words, is returned whole: it states no single answer. A sentence that is
    a lead-in and a formula ("Therefore, x = 816") states the formula (`statement_of`).
    """
    outside = _INLINE_MATH.sub(" ", span)
    if not is_prose(outside):
        return statement_of(span) or span
    if _HEDGE_WORDS.search(outside) or qualifiers(outside):
        return span  # "is at least 4" is no statement of 4: kept whole, the qualifier check refuses it
    values: list[tuple[int, str]] = []
    for match in _INLINE_MATH.finditer(span):
        formula = next(g for g in match.groups() if g is not None)
        if any(c.isdigit() for c in formula):
            values.append((match.start(), formula))
    masked = _INLINE_MATH.sub(lambda m: " " * len(m.group(0)), span)
    values.extend((m.start(), m.group(0)) for m in NUMBER.finditer(masked))
    return values[0][1] if len(values) == 1 else span


# A doubled backslash before a command name (`\\frac`, `\\left(`) is an escaping slip, not a line break.
_DOUBLED_COMMAND = re.compile(r"(?<!\\)\\\\(?=[a-zA-Z]{2})")
# Digit groups as MATH and models trained on it write them: `10,\!000`, `11,\! 111,\! 100`, `1{,}000`, `10\,000`.
_GROUP_SEPARATOR = r"(?:\{,\}|,\s*\\!\s*|\\[,!]\s*|\\ )"
_GROUPED_NUMBER = re.compile(rf"(?<![\d.])\d{{1,3}}(?:{_GROUP_SEPARATOR}\d{{3}})+(?!\d)")
_SEPARATOR = re.compile(_GROUP_SEPARATOR)
# Indian grouping (`1,00,000`, `2,50,00,000`), joined only when a later group starts with 0: a list element never does.
_INDIAN_NUMBER = re.compile(r"(?<![\d.,])\d{1,2}(?:,\d{2})+,\d{3}(?![\d,])")
# The same with LaTeX-marked commas (`56,\\!01,\\!78,\\!95,\\!760`): the marks say they are digit groups.
_MARKED_COMMA = r"(?:,\s*\\!\s*|\{,\})"
_MARKED_INDIAN = re.compile(rf"(?<![\d.])\d{{1,2}}(?:{_MARKED_COMMA}\d{{2}})+{_MARKED_COMMA}\d{{3}}(?!\d)")


def join_digit_groups(text: str) -> str:
    """Numbers written with LaTeX thousands separators (or Indian grouping) as plain digits, so `11,\\! 111` is one
    number and not a two-answer list."""
    if "\\" in text or "{,}" in text:
        text = _MARKED_INDIAN.sub(lambda m: re.sub(_MARKED_COMMA, "", m.group(0)), text)
        text = _GROUPED_NUMBER.sub(lambda m: _SEPARATOR.sub("", m.group(0)), text)
    if text.count(",") >= 2:
        text = _INDIAN_NUMBER.sub(lambda m: m.group(0).replace(",", "") if ",0" in m.group(0) else m.group(0), text)
    return text


def undouble_commands(text: str) -> str:
    """`\\\\frac` -> `\\frac`: a doubled backslash before a command name, as escaped data sets store LaTeX."""
    return _DOUBLED_COMMAND.sub(r"\\", text) if "\\\\" in text else text


def _clean(answer: str) -> str:
    answer = undouble_commands(answer.strip().rstrip(".").strip().strip("*_").strip())
    # `\boxed{\boxed{3}}` and `$\boxed{3}$`: a box that is the whole answer is only a wrapper.
    for _ in range(4):
        inner = answer.strip("$ ")
        if not inner.startswith(("\\boxed", "\\fbox")):
            break
        boxes = boxed_contents(inner)
        if len(boxes) != 1 or not inner.endswith("}") or boxes[0][0] != 0:
            break
        answer = boxes[0][1].strip()
    return join_digit_groups(answer)


def _last_marker(text: str, needles: tuple[str, ...], pattern: re.Pattern[str]) -> re.Match[str] | None:
    """The last match of `pattern`, found by probing occurrences of its literal `needles` from the end.

    `rfind` runs at memory speed, so the common case (a marker near the end) never scans the whole text; after
    `MAX_PROBES` false alarms the rest is scanned once by the regex, which keeps the worst case linear.
    """
    ends = {needle: len(text) for needle in needles}
    found = {needle: text.rfind(needle) for needle in needles}
    for _ in range(MAX_PROBES):
        needle = max(found, key=found.__getitem__)
        pos = found[needle]
        if pos < 0:
            return None
        match = pattern.match(text, pos)
        if match:
            return match
        ends[needle] = pos + len(needle) - 1
        found[needle] = text.rfind(needle, 0, ends[needle])
    return last_match(pattern, text, max(ends.values()))


def extract_answer(completion: str, config: AnswerExtraction = LENIENT) -> Extracted | None:
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


def box_run(completion: str, config: AnswerExtraction = LENIENT) -> tuple[str, ...]:
    """The run of boxes a completion ends with (`\\boxed{1} and \\boxed{-2}`), cleaned, in order; () for fewer than
    two. Read from the completion alone: the same text states the same answer whatever the reference is, so boxing
    every candidate (`\\boxed{3} \\boxed{4}`) is a list that a single reference does not match, never a hedge."""
    text = completion
    tag_start = completion.rfind("<answer>")
    if tag_start >= 0:
        tag_end = completion.find("</answer>", tag_start)
        if tag_end > 0 and ("boxed" in completion[tag_start:tag_end] or "fbox" in completion[tag_start:tag_end]):
            text = completion[tag_start + len("<answer>") : tag_end]
    spans, _ = box_spans_from_end(text, config.boxes_considered, config.max_answer_chars + 1)
    run = final_box_group(text, spans, connects_answers) if len(spans) > 1 else ()
    return tuple(_clean(content) for content in run) if len(run) > 1 else ()


class _OverlongBox(Exception):
    """The last box runs past the answer length limit."""


def _box_spans(text: str, config: AnswerExtraction) -> list[tuple[int, int, str]]:
    # Lenient mode needs the last box only; strict mode looks for a hedge among the last few.
    limit = config.boxes_considered if config.strict else 1
    spans, overlong = box_spans_from_end(text, limit, config.max_answer_chars + 1)
    if overlong:
        raise _OverlongBox
    return spans


_FINAL_NEEDLES = ("####", "final", "Final", "FINAL")


def _marker_after(text: str, pos: int) -> bool:
    """A cheap test (the text after the last box is usually short) before looking for the last final-answer marker."""
    return any(text.find(needle, pos) >= 0 for needle in ("####", "inal", "INAL"))


def _from_final(completion: str, final: re.Match[str], config: AnswerExtraction) -> Extracted:
    if final.group(0) == "####":
        line = completion[final.end() : final.end() + _SPAN_LIMIT].split("\n", 1)[0]
        return Extracted(line, "gsm8k")
    span = _take_span(completion, final.end())
    return Extracted(_sentence_value(span) if config.fallback else span, "final_answer")


def _find(completion: str, config: AnswerExtraction) -> Extracted | None:
    tag_start = completion.rfind("<answer>")
    if tag_start >= 0:
        tag_end = completion.find("</answer>", tag_start)
        if tag_end > 0:
            inner = completion[tag_start + len("<answer>") : tag_end]
            spans = _box_spans(inner, config) if ("boxed" in inner or "fbox" in inner) else []
            if spans:
                boxes = tuple(content for _, _, content in spans)
                return Extracted(boxes[-1], "boxed", boxes)
            inner = inner.strip()
            if inner:
                return _find(inner, config) if _FINAL_MARKERS.search(inner) else Extracted(inner, "answer_tag")
    if "boxed" in completion or "fbox" in completion:
        spans = _box_spans(completion, config)
        if spans:
            close = spans[-1][1]
            if not config.strict and _marker_after(completion, close):
                # A `Final answer:` / `####` line after the last box is the model's last word (it boxed a step).
                final = _last_marker(completion, _FINAL_NEEDLES, _FINAL_MARKERS)
                if final is not None and final.start() > close:
                    found = _from_final(completion, final, config)
                    text = _clean(found.text)
                    if any(c.isdigit() or c in "\\$" for c in text):  # a value, not words ("three quarters")
                        return found
            boxes = tuple(content for _, _, content in spans)
            return Extracted(boxes[-1], "boxed", boxes)
    final = _last_marker(completion, _FINAL_NEEDLES, _FINAL_MARKERS)
    if final is not None:
        return _from_final(completion, final, config)
    answer_is = _last_marker(completion, ("answer", "Answer", "ANSWER"), _ANSWER_IS)
    if answer_is is not None:
        answer = _take_span(completion, answer_is.end())
        if answer.strip():
            return Extracted(_sentence_value(answer) if config.fallback else answer, "answer_is")
    if not config.fallback:
        return None
    statement = final_statement(completion) if config.last_number_fallback else None
    if statement is HEDGED:
        return None  # "x = 816? Maybe 817.", "Therefore, x = 816 or x = 817.": no one value is stated
    if isinstance(statement, str):
        return Extracted(statement, "statement")
    bare = completion.strip().strip("$").strip()
    if statement is not PROSE and len(bare) <= _BARE_MAX_CHARS and bare and not is_prose(bare):
        return Extracted(bare, "bare")  # the completion is nothing but an answer: `\dfrac{9}{7}`
    if config.last_number_fallback:
        number = last_number(completion, config.tail_window_chars)
        if number is not None:
            start = completion.rfind(number)
            if qualified_number(completion, start, start + len(number)) or _hedged(completion, start, len(number)):
                # "it is not 4", "less than 4", "4 is wrong": the sentence denies or bounds its number; "either 6 or
                # 7", "maybe 7": it offers several, and its last one is no more the answer than the first
                return None
            span = _last_math_span(completion, config.tail_window_chars)
            # `... is $\frac{9}{7}$`: the last number sits in a formula, and the formula is the answer.
            if span is not None and number in span:
                return Extracted(span, "last_math")
            return Extracted(number, "last_number")
    return None


_SENTENCE_BREAK = re.compile(r"[.;!?\n](?!\d)")


def _hedged(text: str, start: int, length: int) -> bool:
    """Whether the sentence holding text[start:start+length] hedges (the words after a marker are checked the same
    way by `_sentence_value`)."""
    head = text[max(0, start - 300) : start]
    breaks = list(_SENTENCE_BREAK.finditer(head))
    if breaks:
        head = head[breaks[-1].end() :]
    tail = text[start : start + length + 300]
    stop = _SENTENCE_BREAK.search(tail, length)
    return HEDGING.search(plain_view(head + (tail[: stop.start()] if stop else tail))) is not None


def _last_math_span(text: str, window: int) -> str | None:
    """The content of the last `$..$`, `$$..$$`, `\\(..\\)` or `\\[..\\]` in the final `window` characters, if it is the
    last thing with a digit (so `\\(\\frac{9\\pi}{4}\\)` is read whole, never as its last digit 4)."""
    end, closer = max((text.rfind("$"), "$"), (text.rfind("\\)"), "\\)"), (text.rfind("\\]"), "\\]"))
    if end <= 0:
        return None
    after = end + len(closer)
    if closer == "$" and text[end - 1] == "$":
        end, closer = end - 1, "$$"
    opener = {"$": "$", "$$": "$$", "\\)": "\\(", "\\]": "\\["}[closer]
    start = text.rfind(opener, max(0, end - window), end)
    if start < 0:
        return None
    tail_digits = max(text.rfind(d, after) for d in "0123456789")
    if tail_digits >= after:
        return None  # a number written after the formula is later than it
    return text[start + len(opener) : end].strip() or None
