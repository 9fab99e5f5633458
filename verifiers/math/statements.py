"""The final statement of a completion with no marker, and the reading of values in prose that it shares with the
parser (parser.py, which imports this module).

A model often ends with one line and no marker: `Therefore, x = 816.`, `Hence, $p = \\frac{36}{95}$.`, `So x = 816`,
`Checking: 2(816) = 1632, so x = 816.`. That line's answer is what follows its last lead-in word ("Therefore", "so",
"we get"): the lead-in is prose, what follows is the statement, read like the content of a box. Read whole,
`Therefore, x = 816` was a list of two answers and `So x = 816` an equation with `So x` on its left. A sentence that
offers values (`x = 816 or 817`, `816? maybe 817`) states nothing (HEDGED); one whose statement cannot be read is left
to the last-number reading (PROSE), never read whole.
"""

from __future__ import annotations

import re

from groupscore.verifiers.math.normalize import is_unit_word, normalize
from groupscore.verifiers.math.qualifiers import qualifiers, value_words

# A number in prose, whole: Indian grouping (`12,50,000`), thousands groups (`1,250,000`), a decimal comma (`2,5`,
# read by normalize as plain text reads it), a decimal point, a fraction.
NUMBER = re.compile(
    r"-?(?:\d{1,2}(?:,\d{2})+,\d{3}|\d{1,3}(?:,\d{3})+|\d+(?:,\d{1,2}(?!\d))?)(?:\.\d+)?(?:/\d+)?|-?\.\d+"
)

# A sentence that offers values rather than stating one: a hedging word anywhere in it, or `or` beside a value.
HEDGING = re.compile(
    r"\b(?:either|maybe|perhaps|possibly|probably)\b|[\d$)}]\s*[,(]?\s*or\b|\bor\s*[-$(\\]?\s*\d", re.IGNORECASE
)

_VIEW_NOISE = re.compile(r"\\[a-zA-Z]+|[{}$]|\\[()\[\]]")


def plain_view(text: str) -> str:
    """`text` without the LaTeX around its words and values (`816 \\text{ or } 817` reads `816   or   817`, `or
    $\\frac{37}{95}$` reads `or   37 95`), so that hedging words are found in prose and inside formulas alike."""
    return _VIEW_NOISE.sub(" ", text)


def unescaped(text: str, needle: str, start: int) -> int:
    """Index of the first `needle` at or after `start` that is not escaped (`\\$` is a dollar sign, not math)."""
    pos = text.find(needle, start)
    while pos > 0 and needle == "$" and text[pos - 1] == "\\":
        pos = text.find(needle, pos + 1)
    return pos


def last_match(pattern: re.Pattern[str], text: str, end: int | None = None) -> re.Match[str] | None:
    last = None
    for last in pattern.finditer(text, 0, len(text) if end is None else end):  # noqa: B007 - keeps the last one
        pass
    return last


def last_number(text: str, window: int) -> str | None:
    last_digit = max(text.rfind(d) for d in "0123456789")
    if last_digit < 0:
        return None
    start = max(0, last_digit - window)
    match = last_match(NUMBER, text[start : last_digit + 1])
    return match.group(0) if match else None


_STATEMENT_WINDOW = 600  # the final statement is looked for this far back from the end
# The parts of a sentence that belong to its formula whatever they hold: math spans (an escaped `\$` is a dollar
# sign inside one), LaTeX environments, and text groups (`\text{ cm}`, `\text{ or }`). Each is bounded in length, so
# the scan is linear in the window.
_FORMULA_SPAN = re.compile(
    r"(?<!\\)\$\$(?:[^$\\]|\\.){1,400}?\$\$|(?<!\\)\$(?:[^$\\]|\\.){1,400}?\$|\\\(.{1,400}?\\\)|\\\[.{1,400}?\\\]"
    r"|\\begin\{([a-zA-Z]{1,12}\*?)\}.{0,1000}?\\end\{\1\}"
    r"|\\(?:text|textrm|textnormal|textbf|textit|mathrm|mathbf|mbox|operatorname)\s*\{[^{}]{0,100}\}",
    re.DOTALL,
)
_MASK = "\x00"
_WORD = re.compile(r"(?<![\\a-zA-Z])[a-zA-Z]{2,}(?![a-zA-Z])")
# A lead-in word stands apart, before a space, comma or colon (`1orW(x)` glues `or` into a formula).
_LEAD_WORD = re.compile(r"(?<![^\s,:;(*\x00])[a-zA-Z]{2,}(?=[\s,:])")
# Words that are part of a formula, not prose around it: connectives between answers, and operations written as
# plain words (`17 mod 5`, `sqrt 2`). Any other word of two letters or more is prose (or, after the value, a unit).
_FORMULA_WORDS = frozenset("and or mod bmod sin cos tan cot sec csc ln log exp sqrt pi gcd lcm max min det lim".split())
# What may start a statement after its lead-in: a digit, a formula, a bracket, a sign, a one-letter name, bold.
_STATEMENT_START = re.compile(r"[\s,:]*(?:[\d\x00\\(\[{|+\-.$*]|[a-zA-Z](?![a-zA-Z]))")
# Approximations and ranges: the last-number reading weighs these sentences, as it weighs denials and bounds.
_NOT_STATED = re.compile(r"\b(?:between|approximately|about|around|roughly|nearly|almost)\b", re.IGNORECASE)


class Unstated:
    """Why a final sentence yields no statement: it hedges (no answer at all), or it is prose whose statement cannot
    be read (its last number is, by the fallback: a sentence is never read whole as a bare answer)."""

    def __init__(self, why: str) -> None:
        self.why = why


HEDGED = Unstated("several values offered")  # `x = 816? Maybe 817.`, `Therefore, x = 816 or x = 817.`
PROSE = Unstated("a sentence without a readable statement")  # `Therefore, x = 816 (cm).`


def _masked(text: str) -> str:
    """`text` with every formula span blanked out (same length), so that words and breaks are found in prose only."""
    return _FORMULA_SPAN.sub(lambda m: _MASK * len(m.group(0)), text) if ("$" in text or "\\" in text) else text


def _sentence_breaks(masked: str) -> list[int]:
    """Where the sentences of a (masked) text end: a line break, or `.`/`!`/`?` before a space, outside every bracket
    (`(\\frac{1}{2},` and `\\frac{3}{4})` on two lines are one answer)."""
    breaks, depth = [], 0
    for i, ch in enumerate(masked):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(depth - 1, 0)
        elif depth == 0 and (ch == "\n" or (ch in ".!?" and (i + 1 == len(masked) or masked[i + 1].isspace()))):
            breaks.append(i)
    return breaks


def _lead_in_end(masked: str) -> int:
    """Where the last lead-in of a sentence ends: the last prose word followed by the start of a formula (`so` in
    `..., so x = 816`, `Hence` in `Hence $p = 36/95$`); 0 when there is none."""
    end = 0
    for word in _LEAD_WORD.finditer(masked):
        if word.group(0).lower() not in _FORMULA_WORDS and _STATEMENT_START.match(masked, word.end()):
            end = word.end()
    return end


def _stated(sentence: str, masked: str) -> str | Unstated | None:
    """What a sentence states after its lead-in: the rest, when it is a formula (words only inside formula spans, as
    connectives, or as units after the value) that normalisation reads whole. HEDGED when the sentence offers several
    values; None when it denies, bounds or rewords its value (the fallback's own checks weigh those); PROSE when its
    statement cannot be read."""
    if HEDGING.search(plain_view(sentence)):
        return HEDGED
    if _NOT_STATED.search(masked) or qualifiers(masked) or value_words(sentence):
        return None
    start = _lead_in_end(masked)
    head = len(sentence) - len(sentence[start:].lstrip(" \t\n,:*"))
    rest = sentence[head:].rstrip(" \t\n.,;:!?*")  # `**x = 816**.`: markdown bold around it
    rest_masked = masked[head : head + len(rest)]
    if not rest or not any(c.isdigit() or c in "\\=+-*/^<>" for c in rest):
        return PROSE  # `Therefore, B.`, `So x`: names, not values or formulas
    if any(w.lower() not in _FORMULA_WORDS and not is_unit_word(w) for w in _WORD.findall(rest_masked)):
        return PROSE  # prose after the value ("2 are left", "x = 816 in total")
    normal = normalize(rest)
    if not normal.isascii() or any(w.lower() not in _FORMULA_WORDS for w in _WORD.findall(normal)):
        return PROSE  # what normalisation cannot read (`x = 816 (cm)`, `x = 816 ✓`)
    number = last_number(rest, len(rest))
    if number is not None and normalize(number).replace(",", "") not in normal.replace(",", ""):
        return PROSE  # normalisation would not keep the value the statement ends with (`1,000.99m²`)
    span = _FORMULA_SPAN.match(rest)
    if span is not None and span.end() == len(rest):  # `$p = \frac{36}{95}$`, `\[ x = 816 \]`: one formula, unwrapped
        for opener, closer in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")):
            if rest.startswith(opener):
                return rest[len(opener) : len(rest) - len(closer)].strip() or PROSE
    return rest  # read whole: `$x = 816$ dollars`, `$12$ and $13$`, `$p = 1/2$ (or $1/3$)` (delimiters are normalised)


def statement_of(span: str) -> str | None:
    """The statement of a marker's sentence that opens with a lead-in (`Final answer: Therefore, x = 816`), or None."""
    if len(span) > _STATEMENT_WINDOW:
        return None
    masked = _masked(span)
    if _lead_in_end(masked) == 0:
        return None
    found = _stated(span, masked)
    return found if isinstance(found, str) else None


def final_statement(completion: str) -> str | Unstated | None:
    """What the last sentence with a value states after its lead-in (`Therefore, x = 816.` -> `x = 816`), or why it
    states nothing (`_stated`); None when the completion is one bare answer with nothing before or after it (read
    whole, as it was), or has no value at all."""
    start = max(0, len(completion) - _STATEMENT_WINDOW)
    if start and (completion.count("$", 0, start) - completion.count("\\$", 0, start)) % 2:
        after = unescaped(completion, "$", start)  # the window starts inside a formula: begin after it
        start = after + 1 if after >= 0 else start
    text = completion[start:]
    masked = _masked(text)
    end = len(text)
    for stop in reversed([-1, *_sentence_breaks(masked)]):
        begin = stop + 1
        sentence, sentence_masked = text[begin:end], masked[begin:end]
        if any(c.isdigit() for c in sentence) or (_MASK in sentence_masked and "\\" in sentence):
            break
        end = stop
    else:
        return None
    if (
        _lead_in_end(sentence_masked) == 0
        and not completion[: start + begin].strip(" \t\n$")
        and not completion[start + end :].strip(" \t\n.$")
    ):
        return None  # the whole completion is one bare answer (`x = 816`, `3, 4`): the bare reading takes it
    return _stated(sentence, sentence_masked)
