"""An answer string normalised to one canonical LaTeX-ish spelling, so cheap string and numeric tests decide most pairs.

Every rewrite here is a linear-time regex or string operation; callers cap the input length, so normalising is
bounded in time. The output stays parseable by latex2sympy for the symbolic step.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Literal

from groupscore.verifiers.math.caching import short_key_cache

# Unicode spellings models emit for LaTeX commands.
_UNICODE = {
    "\u2212": "-",
    "\u2013": "-",
    "\u00d7": r"\times ",
    "\u22c5": r"\cdot ",
    "\u00b7": r"\cdot ",
    "\u00f7": r"\div ",
    "\u03c0": r"\pi ",
    "\u221e": r"\infty ",
    "\u2264": r"\leq ",
    "\u2265": r"\geq ",
    "\u2260": r"\neq ",
    "\u222a": r"\cup ",
    "\u2229": r"\cap ",
    "\u221a": r"\sqrt",
    "\u00b1": r"\pm ",
    "\u00b0": "",
    "\u2009": " ",
    "\u00a0": " ",
    "\u202f": " ",
}
_UNICODE_RE = re.compile("|".join(map(re.escape, _UNICODE)))

_MATH_DELIMS = re.compile(r"\\\(|\\\)|\\\[|\\\]|\$")
_SIZING = re.compile(r"\\(?:left|right|[bB]igg?[lr]?|middle)(?![a-zA-Z])\s*(\.)?")
_SPACING = re.compile(r"(?<!\\)\\[,;:!> ]|\\q?quad(?![a-zA-Z])|~")
_STYLE = re.compile(r"\\(?:displaystyle|textstyle|scriptstyle|limits|nolimits)(?![a-zA-Z])")
_FRAC_CMDS = re.compile(r"\\[dtc]frac(?![a-zA-Z])")
_DEGREES = re.compile(r"\^\s*\{?\s*\\circ\s*\}?|\\degree(?![a-zA-Z])|\\text\{\s*degrees?\s*\}|(?<=\d)\s*degrees?\b")
# `%` between two operands is the remainder operator (`n % 2`), not a percent sign to drop (`n 2` would be 2n).
_INFIX_PERCENT = re.compile(r"(?<=[\w)}])\s*\\?%\s*(?=\d|[a-zA-Z](?![a-zA-Z])|\()")
_PERCENT = re.compile(r"\\?%|\\text\{\s*percent\s*\}|(?<=\d)\s*percent\b")
PERCENT_MARK = "\\%"
_PERCENTABLE = re.compile(r"[-+]?(?:\d+(?:\.\d+)?|\\frac\{\d+\}\{\d+\})")
_DOLLAR = re.compile(r"\\\$|\\text\{\s*dollars?\s*\}|(?<=\d)\s*dollars?\b")
# \text{...} and friends without nested braces: the content is kept, the wrapper dropped.
_TEXT_WRAPPERS = re.compile(
    r"\\(?:text|textbf|textit|textrm|textnormal|mathrm|mathbf|mathit|mathsf|mathtt|mathcal|mathscr|mathfrak|mbox"
    r"|operatorname\*?|bold|boldsymbol|emph)"
    r"\s*\{([^{}]*)\}"
)
_FRAC_SHORT_BOTH = re.compile(r"\\frac\s*(\d)\s*(\d)")
_FRAC_SHORT_NUM = re.compile(r"\\frac\s*(\d)\s*(?=\{)")
_FRAC_SHORT_DEN = re.compile(r"\\frac\s*(\{[^{}]*\})\s*(\d)")
_SQRT_SHORT = re.compile(r"\\sqrt\s*(\d+|[a-zA-Z])(?![\d])")
_THIN_GROUP = re.compile(r"\{,\}")
# `3{,}14`: a braced comma before other than three digits is a decimal comma (LaTeX's way of writing one); before
# three it is a digit group (`1{,}000`, handled with the other marked groups).
_BRACED_DECIMAL_COMMA = re.compile(r"(?<=\d)\{,\}(?=\d{1,2}(?!\d)|\d{4,})")
# Digit groups as MATH writes them: `10,\!000`, `11,\! 111,\! 111,\! 100`, `1{,}000`, `10\,000`. A comma marked
# with `\!` or braced, or a thin space, before exactly three digits is a group separator wherever it stands.
_MARKED_GROUPS = re.compile(r"(?<![\w^{}.\\])\d{1,3}(?:(?:,\s*\\!\s*|\{,\}\s*|\\[,!: ]\s*|~)\d{3})+(?!\d)")
_GROUP_MARK = re.compile(r",\s*\\!\s*|\{,\}\s*|\\[,!: ]\s*|~")
_MARKED_INDIAN = re.compile(r"(?<![\w^{}.\\])\d{1,2}(?:(?:,\s*\\!\s*|\{,\})\d{2})+(?:,\s*\\!\s*|\{,\})\d{3}(?!\d)")
# One number with a decimal comma: `1,22`, `0,111`, `1000,99`, written without a space (`4, 5` is a list).
_COMMA_DECIMAL = re.compile(r"([-+]?\d+),(\d+)")
# Indian grouping (`1,00,000`, `12,34,56,789`), for a whole answer only.
_INDIAN = re.compile(r"[-+]?\d{1,2}(?:,\d{2})+,\d{3}(?:\.\d+)?")
# The remainder written as a word or another command (`17 mod 5`, `17 \\mod 5`, `17 \\operatorname{mod} 5`) is `\\bmod`,
# the binary operator; `\\pmod{5}` (a congruence's modulus) is left alone.
_MOD_WORD = re.compile(r"\\operatorname\{\s*mod\s*\}|\\mod(?![a-zA-Z])|(?<![a-zA-Z\\])mod(?![a-zA-Z])")
_LOGICAL_OR = re.compile(r"\\(?:lor|vee)(?![a-zA-Z])")  # `x=3 \\lor x=4`: a disjunction, like `x=3 or x=4`
_GLUED_OR = re.compile(r"(?<=[\d)}])or(?=[A-Z(\\-])")  # `W(x)=1orW(x)=-1`
_TRAILING_BACKSLASH = re.compile(r"(?<!\\)\\+$")
# `9:00 a.m.`, `9\text{ AM}`, `11:30pm` -> `9:00am`, `11:30pm`. A bare `2am` stays a product of a and m.
_MERIDIEM = re.compile(
    r"(?<![\d.])(\d{1,2})(:[0-5]\d(?::[0-5]\d)?)?\s*(\\(?:text|mathrm|textrm|mbox)\s*\{\s*)?"
    r"([aApP])(\.?)\s*([mM])\.?(?(3)\s*\})(?![a-zA-Z])"
)
_COLON = re.compile(r"\\colon(?![a-zA-Z])|\\ratio(?![a-zA-Z])")
_THOUSANDS_COMMA = re.compile(r"[-+]?[1-9]\d{0,2}(?:,\d{3})+(?:\.\d+)?")  # a first group of 0 is no group
_THOUSANDS_SPACE = re.compile(r"[-+]?\d{1,3}(?: \d{3})+(?:\.\d+)?")
# One unknown assigned a number in thousands groups (`n = 1,632`): the groups are one number, as they are without the
# label, not the list `n = 1`, `632`.
_LABELLED_THOUSANDS = re.compile(
    r"([a-zA-Z](?:_\{?\w{1,3}\}?)?'*\s*=\s*)([-+]?(?:[1-9]\d{0,2}(?:,\d{3})+|\d{1,3}(?: \d{3})+)(?:\.\d+)?)"
)
_MIXED_LATEX = re.compile(r"(?<![\d.}^_a-zA-Z\\])(\d+)\s*\\frac\{(\d+)\}\{(\d+)\}")
# The lookbehinds pin each match to the start of a digit run, so a long run costs one attempt, not one per digit.
_MIXED_PLAIN = re.compile(r"(?<![\d.])([-+]?)(\d+)\s+(\d+)\s*/\s*(\d+)")
_REPEATING = re.compile(r"(?<!\d)(\d*)\.(\d*)\\overline\{(\d{1,12})\}")
_LEADING_DOT = re.compile(r"(?<![\d.])\.(\d)")
_DECIMAL = re.compile(r"(?<!\d)\d+\.\d*")
_RELATIONS = (
    (re.compile(r"<=|\\le(?:q|qslant)?(?![a-zA-Z])"), r"\\leq "),
    (re.compile(r">=|\\ge(?:q|qslant)?(?![a-zA-Z])"), r"\\geq "),
    (re.compile(r"!=|\\ne(?![a-zA-Z])"), r"\\neq "),
    (re.compile(r"\\lt(?![a-zA-Z])"), "<"),
    (re.compile(r"\\gt(?![a-zA-Z])"), ">"),
)
_EMPTY_SET = re.compile(r"\\varnothing|\\emptyset|\\O(?![a-zA-Z])|\\\{\s*\\\}|\u2205")
_REALS_MINUS_POINT = re.compile(r"\\mathbb\{R\}\s*(?:\\setminus|\\backslash|-)\s*\\\{([^{}\\,]+)\\\}")
_REALS = re.compile(r"\\mathbb\{R\}|\(\s*-\s*\\infty\s*,\s*\+?\s*\\infty\s*\)")
_INFINITY = re.compile(r"\\infinity|\\inf(?![a-zA-Z])|(?<![a-zA-Z\\])(?:infinity|inf)(?![a-zA-Z])|\+\s*(?=\\infty)")
# Plain-text function names become LaTeX commands so that latex2sympy does not read `exp` as e*x*p.
_PLAIN_FUNCS = re.compile(
    r"(?<![a-zA-Z\\])(exp|sin|cos|tan|cot|sec|csc|ln|log|arcsin|arccos|arctan|pi|sqrt)(?![a-zA-Z])"
)
_BRACE_SINGLE = re.compile(r"([\^_])\{(\w)\}")
_SPACES = re.compile(r"\s+")
_TRAILING_PUNCT = " \t\n\r.,;:?"
_SCIENTIFIC = re.compile(r"([-+]?\d+(?:\.\d+)?)[eE]([-+]?\d{1,4})")
_UNIT_WORDS = frozenset(
    """cm m mm km meter meters metre metres inch inches in ft feet foot yard yards yd mile miles mi
    g kg mg gram grams kilogram kilograms lb lbs pound pounds oz ounce ounces ton tons
    s sec secs second seconds min mins minute minutes h hr hrs hour hours day days week weeks month months year years
    l ml liter liters litre litres gallon gallons cup cups mph kph kmh km/h m/s
    unit units square sq cubic cents cent dollars dollar euros euro people persons students apples
    degree degrees radian radians rad deg sqft""".split()
)


def is_unit_word(word: str) -> bool:
    """Whether `word` names a unit or a thing counted that normalisation drops after a number (`cm`, `dollars`)."""
    return word.lower() in _UNIT_WORDS


# A trailing run of words after a number is a unit ("5 cm", "12 square units"), unless a word is a connective.
# One space-separated word of a unit: "cm", "cm^2", "km/h", "sq.", "m^{3}". Matched a word at a time (no nested
# quantifiers over the whole text, which backtrack catastrophically on long runs of letters).
_UNIT_TOKEN = re.compile(r"[a-zA-Z]+(?:\^\{?\d\}?)?(?:/[a-zA-Z]+(?:\^\{?\d\}?)?)?\.?")
_GLUED_UNIT = re.compile(r"(.*\d)([a-zA-Z]{2,})")  # "5cm"
# Not before `(`: `\\text{sgn}(x-5)` names a function, and dropping it would leave `(x-5)`.
_TEXT_LABEL = re.compile(r"\\(?:text|textrm|textnormal|mathrm|mbox)\s*\{([^{}]*)\}(?:\s*\^\s*\{?\d\}?)?(?!\s*\()")
_WORDS_ONLY = re.compile(r"[a-zA-Z]+(?: [a-zA-Z]+)*")
_PLAIN_NUMBER = re.compile(r"[-+]?[\d.,/]+")
_CONNECTIVES = frozenset({"or", "and", "i", "e"})
_CONNECTIVE_WORDS = frozenset({"or", "and"})


def _unicode(text: str) -> str:
    return _UNICODE_RE.sub(lambda m: _UNICODE[m.group(0)], text)


def _unwrap_text(match: re.Match[str]) -> str:
    return f" {match.group(1).strip()} "


def _drop_text_words(match: re.Match[str]) -> str:
    """A \\text{} holding only words ("cm", "square units") is a unit or label beside the answer: drop it."""
    content = match.group(1).strip()
    if _WORDS_ONLY.fullmatch(content) and content not in ("or", "and") and len(content) > 1:
        return " "
    return match.group(0)


def _strip_units(text: str) -> str:
    """Drop up to four trailing unit words after a number: "5 cm", "12 square units", "3.5 km/h", "5cm"."""
    parts = text.split(" ")
    glued = _GLUED_UNIT.fullmatch(parts[-1])
    if glued and glued.group(2).lower() in _UNIT_WORDS:
        parts[-1:] = [glued.group(1), glued.group(2)]
    cut = len(parts)
    while cut > 1 and len(parts) - cut < 4 and _UNIT_TOKEN.fullmatch(parts[cut - 1]):
        cut -= 1
    if cut == len(parts):
        return text
    head = " ".join(parts[:cut])
    words = [w for part in parts[cut:] for w in re.split(r"[/.^{}\d]+", part) if w]
    if not re.search(r"[\d})]$", head) or any(w.lower() in _CONNECTIVES for w in words):
        return text
    known = all(w.lower() in _UNIT_WORDS for w in words)
    # Unknown words count as a unit only after a plain number ("5 apples"), never after an expression ("3 xy").
    if known or (_PLAIN_NUMBER.fullmatch(head) and all(len(w) >= 3 for w in words)):
        return head
    return text


def _meridiem(match: re.Match[str]) -> str:
    hours, minutes, wrapped, letter, dot, _m = match.groups()
    if not (minutes or wrapped or dot or letter.isupper()):
        return match.group(0)
    return f"{hours}{minutes or ':00'}{letter.lower()}m"


def _indian(text: str) -> bool:
    """Indian grouping, where a group starting with 0 shows it is one (`1,00,000`); `12,34,567` stays a list."""
    return bool(_INDIAN.fullmatch(text)) and ",0" in text


DecimalComma = Literal["", "plain", "any"]


def _decimal_comma(text: str, comma: DecimalComma) -> str:
    """`1,22` -> `1.22` for a whole answer. "plain": where the comma cannot be a digit group (not three digits after
    it, or a first group of 0 or of more than three digits: `0,111`, `1000,99`); "any" (the `decimal_comma`
    convention): `1,000` too."""
    match = _COMMA_DECIMAL.fullmatch(text)
    if match is None:
        return text
    whole, fraction = match.groups()
    digits = whole.lstrip("+-")
    if comma == "any" or len(fraction) != 3 or digits == "0" or len(digits) > 3:
        return f"{whole}.{fraction}"
    return text


_LATEX_MATH = re.compile(r"\$|\\[(\[]|\\boxed|\\fbox|\\begin")


def decimal_comma_reading(source_text: str, convention: bool) -> DecimalComma:
    """How to read a decimal comma in an answer taken from `source_text` (a completion or a reference field): in
    plain text `1,22` is 1.22 and `1,2` is 1.2, as numbers are written in much of the world; inside LaTeX math
    (`$1,2$`, `\\boxed{1,2}`) a comma separates list items, as LaTeX writers use it. The `decimal_comma` convention
    reads a comma as a decimal point everywhere, `1,000` included."""
    if convention:
        return "any"
    return "" if _LATEX_MATH.search(source_text) else "plain"


def _strip_units_per_part(text: str) -> str:
    """Units after each answer of a list: `35 cm, 4` -> `35, 4` (commas inside brackets are left alone)."""
    braces = 0
    while text[braces : braces + 1] == "{" and text[len(text) - braces - 1 : len(text) - braces] == "}":
        braces += 1  # `{35 cm,4}`: braces that only group
    if braces and braces * 2 <= len(text):
        return "{" * braces + _strip_units_per_part(text[braces : len(text) - braces]) + "}" * braces
    return ",".join(p[: len(p) - len(p.lstrip())] + _strip_units(p.strip()) for p in top_level_parts(text))


def top_level_parts(text: str) -> list[str]:
    """`text` split at the commas that sit outside every bracket."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _mixed_latex(match: re.Match[str]) -> str:
    whole, num, den = int(match.group(1)), int(match.group(2)), int(match.group(3))
    if den == 0 or num >= den:
        return match.group(0)  # "2\frac{3}{2}" is not a mixed number: leave the product alone
    return rf"\frac{{{whole * den + num}}}{{{den}}}"


def _mixed_plain(match: re.Match[str]) -> str:
    sign, whole, num, den = match.group(1), int(match.group(2)), int(match.group(3)), int(match.group(4))
    if den == 0 or num >= den:
        return match.group(0)
    return rf"{sign}\frac{{{whole * den + num}}}{{{den}}}"


def _repeating_decimal(match: re.Match[str]) -> str:
    """`0.1\\overline{6}` -> `\\frac{1}{6}`: the exact value a repeating decimal denotes."""
    whole, fixed, cycle = match.group(1) or "0", match.group(2), match.group(3)
    value = (
        Fraction(int(whole))
        + Fraction(int(fixed or "0"), 10 ** len(fixed))
        + Fraction(int(cycle), (10 ** len(cycle) - 1) * 10 ** len(fixed))
    )
    return rf"\frac{{{value.numerator}}}{{{value.denominator}}}" if value.denominator != 1 else str(value.numerator)


def _trim_decimal(match: re.Match[str]) -> str:
    text = match.group(0)
    whole, _, frac = text.partition(".")
    frac = frac.rstrip("0")
    whole = whole.lstrip("0") or "0"
    return f"{whole}.{frac}" if frac else whole


def _plain_sqrt(text: str) -> str:
    """`sqrt(2)` -> `\\sqrt{2}` (after `_PLAIN_FUNCS` made it `\\sqrt(2)`), matching parentheses in one pass."""
    out: list[str] = []
    i = 0
    while True:
        j = text.find(r"\sqrt(", i)
        if j < 0:
            out.append(text[i:])
            return "".join(out)
        depth, k = 0, j + 5
        while k < len(text):
            if text[k] == "(":
                depth += 1
            elif text[k] == ")":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        if k >= len(text):
            out.append(text[i:])
            return "".join(out)
        out.append(text[i:j] + r"\sqrt{" + text[j + 6 : k] + "}")
        i = k + 1


@short_key_cache(maxsize=1 << 14)
def normalize(answer: str, decimal_comma: DecimalComma = "") -> str:
    """Canonical spelling of one answer (already extracted): same meaning, same string, for the common spellings.
    `decimal_comma`: how a comma in a single number reads (`decimal_comma_reading`); "" never as a decimal point."""
    text = _unicode(answer.strip())
    text = _MATH_DELIMS.sub(" ", text.replace(r"\$", " ").replace("$$", " "))
    if decimal_comma and "," in text:
        text = _decimal_comma(text.strip(), decimal_comma)
    text = _STYLE.sub("", text)
    text = _TRAILING_BACKSLASH.sub("", text.rstrip())
    text = _SIZING.sub("", text)
    if "," in text or "\\" in text or "~" in text:
        text = _MARKED_INDIAN.sub(lambda m: _GROUP_MARK.sub("", m.group(0)), text)
        text = _MARKED_GROUPS.sub(lambda m: _GROUP_MARK.sub("", m.group(0)), text)
    text = _SPACING.sub(" ", text)
    text = _FRAC_CMDS.sub(r"\\frac", text)
    text = _DEGREES.sub("", text)
    percent = "%" in text or "percent" in text
    if percent:
        text = _INFIX_PERCENT.sub(r" \\bmod ", text)
        stripped = _PERCENT.sub("", text)
        percent, text = stripped != text, stripped
    text = _DOLLAR.sub("", text)
    if "{,}" in text:
        text = _THIN_GROUP.sub(",", _BRACED_DECIMAL_COMMA.sub(".", text))
    if "\\colon" in text or "\\ratio" in text or "{:}" in text:
        text = _COLON.sub(":", text).replace("{:}", ":")  # `9{:}00`: a colon braced to keep its spacing
    if "m" in text or "M" in text:
        text = _MERIDIEM.sub(_meridiem, text)
    if "\\" in text:
        without_labels = _TEXT_LABEL.sub(_drop_text_words, text)
        if re.search(r"\d", without_labels):
            text = without_labels
    for _ in range(3):  # \text{\textbf{x}}: three levels are plenty and keep this bounded
        new = _TEXT_WRAPPERS.sub(_unwrap_text, text)
        if new == text:
            break
        text = new
    text = _FRAC_SHORT_BOTH.sub(r"\\frac{\1}{\2}", text)
    text = _FRAC_SHORT_NUM.sub(r"\\frac{\1}", text)
    text = _FRAC_SHORT_DEN.sub(r"\\frac\1{\2}", text)
    text = _SQRT_SHORT.sub(r"\\sqrt{\1}", text)
    for pattern, repl in _RELATIONS:
        text = pattern.sub(repl, text)
    if "\\lor" in text or "\\vee" in text:
        text = _LOGICAL_OR.sub(" or ", text)
    text = _INFINITY.sub(lambda m: "" if m.group(0).startswith("+") else r"\infty ", text)
    text = _PLAIN_FUNCS.sub(r"\\\1", text)
    if "mod" in text:
        text = _MOD_WORD.sub(r" \\bmod ", text)
    text = _EMPTY_SET.sub(r"\\emptyset ", text)
    text = _REALS_MINUS_POINT.sub(lambda m: rf"(-\infty,{m.group(1).strip()})\cup({m.group(1).strip()},\infty)", text)
    text = _REALS.sub(r"(-\\infty,\\infty)", text)
    if r"\sqrt(" in text:
        text = _plain_sqrt(text)
    text = text.replace(r"\langle", "(").replace(r"\rangle", ")")
    text = text.replace("**", "^").replace(r"\dots", r"\ldots").replace(r"\cdots", r"\ldots")
    text = _SPACES.sub(" ", text).strip()
    text = text.rstrip(_TRAILING_PUNCT)
    text = _strip_units(text) if "," not in text else _strip_units_per_part(text)
    if "or" in text:
        text = _GLUED_OR.sub(" or ", text)
    if _THOUSANDS_COMMA.fullmatch(text) or _THOUSANDS_SPACE.fullmatch(text) or _indian(text):
        text = text.replace(",", "").replace(" ", "")
    elif "=" in text:
        labelled = _LABELLED_THOUSANDS.fullmatch(text)
        if labelled is not None:
            text = labelled.group(1) + labelled.group(2).replace(",", "").replace(" ", "")
    if _SCIENTIFIC.fullmatch(text):
        text = _SCIENTIFIC.sub(lambda m: rf"{m.group(1)}\times10^{{{int(m.group(2))}}}", text)
    text = _MIXED_LATEX.sub(_mixed_latex, text)
    text = _MIXED_PLAIN.sub(_mixed_plain, text)
    text = _REPEATING.sub(_repeating_decimal, text)
    text = _LEADING_DOT.sub(r"0.\1", text)
    text = _DECIMAL.sub(_trim_decimal, text)
    text = _BRACE_SINGLE.sub(r"\1\2", text)
    text = _compact(text)
    # One value written as a percentage keeps a trailing `\%` (PERCENT_MARK): the grader reads it by the item's
    # `percent` convention. Anywhere else (lists, expressions) the sign is dropped as a unit.
    if percent and text and _PERCENTABLE.fullmatch(text):
        text += PERCENT_MARK
    return text


def _compact(text: str) -> str:
    """Drop spaces that carry no meaning, keeping those that separate words or a command from a letter."""
    out: list[str] = []
    parts = text.split(" ")
    for part in parts:
        if not part:
            continue
        if out:
            prev = out[-1]
            if (
                (prev[-1:].isalpha() and part[:1].isalpha())
                or (prev[-1:].isdigit() and part[:1].isdigit())  # "\log_2 8" is not "\log_28"
                or part in _CONNECTIVE_WORDS
                or prev in _CONNECTIVE_WORDS
            ):
                out.append(" ")
        out.append(part)
    return "".join(out)
