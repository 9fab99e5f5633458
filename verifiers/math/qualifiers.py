"""What an answer says around its value: negation and comparison words (`\\text{not } 3`), and units (`3 days`).

Normalisation drops words and units so that `5 \\text{ cm}` equals `5`; these checks keep what dropping them would
lose. They read the raw extracted text (before normalisation), are linear in its length, and never need sympy.
"""

from __future__ import annotations

import re

from groupscore.verifiers.math.caching import short_key_cache
from groupscore.verifiers.math.normalize import top_level_parts

# Words that make an answer *not* its number: `\text{not } 3`, `3 \text{ is wrong}`, `less than 3`, `at most 3`.
QUALIFIER_WORDS = frozenset(
    """not never except but wrong incorrect false neither nor isn't cannot can't without excluding
    less more fewer greater least most than over under above below exceeds exceed exceeding beyond
    nearly almost""".split()
)
_PHRASES = re.compile(r"\bup\s+to\b", re.IGNORECASE)
_COMMAND = re.compile(r"\\[a-zA-Z]+")
_WORD = re.compile(r"[A-Za-z]+(?:'[a-z]+)?")


def words_of(text: str) -> list[str]:
    """The plain words of a LaTeX answer, lower-cased: command names (`\\text`, `\\neq`, `\\pi`) are not words."""
    return [w.lower() for w in _WORD.findall(_COMMAND.sub(" ", text))]


# A plain word of two letters or more (not a command name): without one there is nothing to look up.
_PLAIN_WORD = re.compile(r"(?<![\\a-zA-Z])[a-zA-Z]{2}")


def qualifiers(text: str) -> set[str]:
    """The negation and comparison words of `text` (`up to` counts as one)."""
    if _PLAIN_WORD.search(text) is None:  # the fast path: `72`, `\\frac{3}{4}`, `x+1`
        return set()
    found = {w for w in words_of(text) if w in QUALIFIER_WORDS}
    if _PHRASES.search(text):
        found.add("up to")
    return found


def unqualified_in(pred: str, gold: str) -> set[str]:
    """The qualifiers of the answer that the reference does not share: `\\text{at least } 3` against `3` gives
    {'least'}; against `\\text{at least } 3` nothing (the reference says the same)."""
    found = qualifiers(pred)
    return found - qualifiers(gold) if found else found


# Words that change the value beside them, which normalisation would drop as a unit: `\\text{negative } 3` is -3,
# `\\text{half of } 10` is 5, `3 \\text{ squared}` is 9, `3 \\text{ million}` is 3000000. Scale words are read as
# their factor only under the `scale_words` convention (`SCALES`); otherwise, like the rest, they are part of the
# answer, and only the same words on the reference match it.
SCALES = {"hundred": "10^{2}", "thousand": "10^{3}", "million": "10^{6}", "billion": "10^{9}", "trillion": "10^{12}"}
SCALES |= {"quadrillion": "10^{15}", "lakh": "10^{5}", "crore": "10^{7}", "dozen": "12"}
# Count nouns that are also units or things counted (`5 quarters` of a dollar, `3 grand`, `4 score`, `2 gross`,
# `3 tens`) are left out: a question about coins is answered "5 quarters".
VALUE_WORDS = (
    frozenset(
        """negative minus neg negated negation deficit half halves halved twice double doubled triple tripled thrice
        quadruple quadrupled tenfold hundredfold squared cubed reciprocal inverse inverted opposite root sqrt
        squareroot third thirds fourths fifth fifths sixth sixths seventh sevenths eighth eighths ninth ninths tenth
        tenths hundredth hundredths thousandth thousandths millionth millionths bn mn""".split()
    )
    | frozenset(SCALES)
    | frozenset(f"{scale}s" for scale in SCALES)
)
# `the square of 3`, `the cube of 3`, `3 to the fourth`: the value is another number.
_VALUE_PHRASES = re.compile(
    r"\b(?:square|cube)\s+of\b|\bto\s+the\s+(?:second|third|fourth|fifth|sixth|\d+(?:st|nd|rd|th)|n-?th|power)\b",
    re.IGNORECASE,
)
# `a double root`: a multiplicity, the value as it is.
_NOT_VALUE_PHRASES = re.compile(r"\b(?:double|triple)\s+(?:root|zero)s?\b", re.IGNORECASE)
_POWERS = frozenset({"squared", "cubed"})


def _value_words(text: str) -> set[str]:
    words = _NOT_VALUE_PHRASES.sub(" ", " ".join(words_of(text))).split()
    found = set()
    for i, word in enumerate(words):
        if word not in VALUE_WORDS:
            continue
        if word in _POWERS and i > 0 and _unit_name(words[i - 1], False) is not None:
            continue  # `25 meters squared`, `8 feet cubed`: a power of the unit, not of the value
        found.add(word.removesuffix("s") if word.removesuffix("s") in SCALES else word)
    if _VALUE_PHRASES.search(" ".join(words)):
        found.add("square of")
    return found


def value_words(text: str) -> set[str]:
    """The value-changing words of `text` (`negative`, `half`, `squared`, `million`, `the square of`, ...)."""
    return _value_words(text) if _PLAIN_WORD.search(text) is not None else set()


def value_words_differ(pred: str, gold: str) -> set[str]:
    """The value-changing words on one side only (either side: `3` is not `3 \\text{ million}` either)."""
    if _PLAIN_WORD.search(pred) is None and _PLAIN_WORD.search(gold) is None:
        return set()
    return _value_words(pred) ^ _value_words(gold)


# `\\text{negative } 3`, `minus 3`: a sign written as a word before a number.
_SIGN_WORD = re.compile(
    r"(?:\\(?:text|mathrm|textrm|mbox)\s*\{\s*)?(?<![a-zA-Z])(?:negative|minus)\s*(?:\}\s*)?(?:\\[ ,;:!]\s*)*"
    r"(?=\d|\.\d|\\d?frac)",
    re.IGNORECASE,
)


def signed(text: str) -> str:
    """A sign written as a word before a number, as the sign: `\\text{negative } 3` -> `-3`, `minus 3` -> `-3`."""
    lowered = text.lower()
    if "negative" not in lowered and "minus" not in lowered:
        return text
    return _SIGN_WORD.sub("-", text)


_SCALED = re.compile(
    rf"(\d+(?:\.\d+)?)\s*(\\(?:text|mathrm|textrm|mbox)\s*\{{\s*)?({'|'.join(SCALES)})s?(?![a-zA-Z])(?(2)\s*\}})",
    re.IGNORECASE,
)


def scaled(text: str) -> str:
    """Scale words as their factor, for the `scale_words` convention: `3 \\text{ million}` -> `3 \\times 10^{6}`."""
    if _PLAIN_WORD.search(text) is None:
        return text
    return _SCALED.sub(lambda m: f"{m.group(1)} \\times {SCALES[m.group(3).lower()]}", text)


# The fallback reads the last number of a text; these words close to it mean the sentence denies or bounds it
# ("it is not 4", "less than 4", "4 is wrong"). Only the few words before the number count, so that
# "it is not hard to see that the total is 4" still reads 4; every word after it up to the sentence end counts.
_WORDS_BEFORE = 3
_DENIALS = frozenset("not never wrong incorrect false isn't cannot can't".split())
_BOUND_AFTER = re.compile(r"\b(?:or|and) (?:more|less|fewer|greater|above|below|over|under)\b|\bat (?:most|least)\b")
_SENTENCE_BREAK = re.compile(r"[.;!?\n]")
_CLAUSE_BREAK = re.compile(r"[.;!?\n,]|\d")


def qualified_number(text: str, start: int, end: int) -> bool:
    """Whether the number at text[start:end] sits in a negated or comparative clause."""
    head = text[max(0, start - 200) : start]
    breaks = list(_CLAUSE_BREAK.finditer(head))  # "not 10 which is 1,000.99": the denial is of the other number
    if breaks:
        head = head[breaks[-1].end() :]
    tail = text[end : end + 200]
    stop = _SENTENCE_BREAK.search(tail)
    if stop:
        tail = tail[: stop.start()]
    before = words_of(head)[-_WORDS_BEFORE:]
    if any(w in QUALIFIER_WORDS for w in before) or _PHRASES.search(" ".join(before)):
        return True
    after = words_of(tail)
    # After the number only a denial counts, or a bound ("4 or more"): "then 7 more" adds, it does not bound.
    return any(w in _DENIALS for w in after) or _BOUND_AFTER.search(" ".join(after[:3])) is not None


# -- units ----------------------------------------------------------------------------------------------------------

# Spellings of one unit, each mapped to one name (plurals are folded by `_singular` first).
_ALIASES = {
    "cm": "centimeter",
    "centimetre": "centimeter",
    "mm": "millimeter",
    "millimetre": "millimeter",
    "km": "kilometer",
    "kilometre": "kilometer",
    "m": "meter",
    "metre": "meter",
    "in": "inch",
    "inche": "inch",
    "ft": "foot",
    "feet": "foot",
    "yd": "yard",
    "mi": "mile",
    "g": "gram",
    "kg": "kilogram",
    "mg": "milligram",
    "lb": "pound",
    "lbs": "pound",
    "oz": "ounce",
    "s": "second",
    "sec": "second",
    "secs": "second",
    "min": "minute",
    "mins": "minute",
    "h": "hour",
    "hr": "hour",
    "hrs": "hour",
    "l": "liter",
    "litre": "liter",
    "ml": "milliliter",
    "millilitre": "milliliter",
    "deg": "degree",
    "rad": "radian",
    "yr": "year",
    "yrs": "year",
    "wk": "week",
    "wks": "week",
    "sqft": "foot^2",
    "cent": "cent",
    "dollar": "dollar",
    "usd": "dollar",
    "mph": "mile/hour",
    "kph": "kilometer/hour",
    "kmh": "kilometer/hour",
}
_GENERIC = frozenset({"unit", "percent", "of", "the", "a", "an", "each", "total", "in"})
_POWER_WORDS = {"square": "^2", "sq": "^2", "cubic": "^3", "cu": "^3"}
_POWER_AFTER = {"squared": "^2", "cubed": "^3"}
_WRAPPER = re.compile(r"\\(?:text|textrm|textnormal|mathrm|mbox|textit|textbf)\s*\{([^{}]*)\}")
_DEGREE = re.compile(r"\^\s*\{?\s*\\circ\s*\}?|\\degree(?![a-zA-Z])|\u00b0")
_NOISE = re.compile(r"\\[,;:! ]|\\[()\[\]]|\$|~|\\?%")
# A part of an answer: a value that ends in a digit, brace or parenthesis, then up to four unit words
# (`cm`, `cm^2`, `km/h`, `square units`, `miles per hour`).
_UNIT_TAIL = re.compile(
    r"[\d})]\s*((?:[A-Za-z]+\.?(?:\s*\^\s*\{?\d\}?)?(?:\s*/\s*[A-Za-z]+(?:\s*\^\s*\{?\d\}?)?)?\s*){1,4})$"
)
_PLAIN_NUMBER_HEAD = re.compile(r"\s*[-+]?[\d.,/]+\s*")
_EXPONENT = re.compile(r"\^\s*\{?(\d)\}?")


def _singular(word: str) -> str:
    if len(word) > 3 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith(("ches", "shes", "xes", "sses")):
        return word[:-2]
    if len(word) > 2 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def _unit_name(word: str, after_plain_number: bool) -> str | None:
    """The one name of a unit word, or None when it is no unit (a one-letter variable, a word after an expression)."""
    lower = word.lower()
    if lower in _ALIASES:
        return _ALIASES[lower]
    single = _singular(lower)
    if single in _ALIASES:
        return _ALIASES[single]
    if single in _ALIASES.values() or single in (
        "dollar",
        "cent",
        "degree",
        "radian",
        "second",
        "minute",
        "hour",
        "day",
        "week",
        "month",
        "year",
        "foot",
        "inch",
        "yard",
        "mile",
    ):
        return single
    # Another word counts only after a plain number ("3 apples"), as normalisation strips it only there.
    return single if after_plain_number and len(lower) >= 3 else None


def _part_unit(part: str) -> str | None:
    tail = _UNIT_TAIL.search(part)
    if tail is None:
        return None
    head = part[: tail.start(1)]
    plain = _PLAIN_NUMBER_HEAD.fullmatch(head) is not None
    names: list[str] = []
    power = ""
    for token in re.findall(r"[A-Za-z]+|/|\^\s*\{?\d\}?", tail.group(1)):
        if token == "/" or token.lower() == "per":
            names.append("/")
            continue
        exponent = _EXPONENT.fullmatch(token)
        if exponent:
            if names and names[-1] != "/":
                names[-1] += f"^{exponent.group(1)}"
            continue
        if token.lower() in _POWER_WORDS:
            power = _POWER_WORDS[token.lower()]
            continue
        if token.lower() in _POWER_AFTER and names and names[-1] != "/":
            names[-1] += _POWER_AFTER[token.lower()]  # `cm squared` is `cm^2`
            continue
        if token.lower() in _GENERIC or _singular(token.lower()) in _GENERIC:
            power = ""
            continue
        name = _unit_name(token, plain)
        if name is None:
            return None  # `3 x`, `2 \\pi r`: a product, not a unit
        names.append(name + power)
        power = ""
    while names and names[-1] == "/":
        names.pop()
    return " ".join(names).replace(" / ", "/") or None


_MAYBE_UNIT = re.compile(r"(?<![\\a-zA-Z])[a-zA-Z]|\\\$|\\circ|\\degree|\u00b0")


@short_key_cache(maxsize=1 << 13)
def units_of(text: str) -> frozenset[str]:
    """The units an answer states, one name per unit: `3 \\text{ cm}^2` and `3 cm^2` give {'centimeter^2'},
    `\\$5` gives {'dollar'}, `12 \\text{ square units}` and `5` give nothing (cached: batches repeat references)."""
    if _MAYBE_UNIT.search(text) is None:  # the fast path: `72`, `\\frac{3}{4}`
        return frozenset()
    found = set()
    if "\\$" in text:
        found.add("dollar")
        text = text.replace("\\$", " ")
    text = _DEGREE.sub(" degree ", text)
    text = _NOISE.sub(" ", _WRAPPER.sub(lambda m: f" {m.group(1)} ", _WRAPPER.sub(lambda m: f" {m.group(1)} ", text)))
    text = _COMMAND.sub(" # ", text)  # a command is no unit word and ends any run of them
    for part in top_level_parts(text.strip()):
        unit = _part_unit(part.strip())
        if unit:
            found.add(unit)
    return frozenset(found)


def different_units(pred: str, gold: str) -> tuple[frozenset[str], frozenset[str]] | None:
    """Both answers state units and they differ (`3 days` against `3 weeks`): (pred's, gold's); else None.
    A unit on one side only is noise around the value (`3 \\text{ cm}` against `3`)."""
    pred_units = units_of(pred)
    if not pred_units:
        return None
    gold_units = units_of(gold)
    return (pred_units, gold_units) if gold_units and pred_units != gold_units else None
