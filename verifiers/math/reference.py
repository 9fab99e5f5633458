"""Reference extraction: the answer a dataset's answer field states, read the way a completion's answer is.

Data sets store references as bare answers (`42`, `$\\frac{1}{2}$`), as solutions (a MATH solution with its
`\\boxed{}`, a GSM8K solution ending in `#### 72`, a Minerva-style "Final Answer: ..."), and with several answers
(several boxes, "A or B", `x_1 = .., x_2 = ..`). `parse_gold` returns the answer text, several answers as one list.
"""

from __future__ import annotations

import re

from groupscore.verifiers.math.boxes import BOX_OPENER, box_spans_from_end, final_box_group
from groupscore.verifiers.math.caching import short_key_cache
from groupscore.verifiers.math.parser import (
    extract_answer,
    is_prose,
    join_digit_groups,
    undouble_commands,
    unescaped,
)

_WRAPPERS = (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))
_DELIMITERS = re.compile(r"(?<!\\)\$\$?|\\[()\[\]]")
# "A or B" in a reference lists both answers (`$(11,7)or(7,11)$`, `$21,16$ or $11$`).
_ALTERNATIVE = re.compile(r"\\(?:text|mathrm|textrm)\s*\{\s*or\s*\}|(?<![a-zA-Z\\])or(?![a-zA-Z])")
_GLUED_QUAD = re.compile(r"\\(q?quad)(?=[a-zA-Z])")  # `\quadx_{2}` as datasets store it
_INDEXED = re.compile(r"\s*([a-zA-Z])_\{?(\d{1,2})\}?\s*=\s*(\S.*?)\s*")
_REFERENCE_PARTS = re.compile(r",|;|\\q?quad(?![a-zA-Z])|\\text\s*\{\s*and\s*\}")
_REFERENCE_BOXES = 64
_SET_BRACES = re.compile(r"\{([^{}]*,[^{}]*)\}")  # `{1,2,3}` as a whole reference: a set in plain braces
_REFERENCE_SCAN = 20_000  # a reference longer than this is refused by the caller anyway
_REFERENCE_MAX_CHARS = 100_000  # the longest solution worth reading (MATH's longest is ~10k characters)


def _unwrap(text: str) -> str:
    """`$x$`, `$$x$$`, `\\(x\\)`, `\\[x\\]` around the whole reference -> `x`."""
    for _ in range(3):
        for opener, closer in _WRAPPERS:
            if text.startswith(opener) and text.endswith(closer) and len(text) >= len(opener) + len(closer):
                inner = text[len(opener) : len(text) - len(closer)]
                nested = unescaped(inner, "$", 0) >= 0 if opener.startswith("$") else closer in inner
                if not nested:  # `$a$ or $b$` is two formulas, not one wrapped answer
                    text = inner.strip()
                    break
        else:
            return text
    return text


def _top_level_parts(text: str) -> list[str]:
    """`text` split at the separators of `_REFERENCE_PARTS` that sit outside every bracket."""
    parts, depth, start, pos = [], 0, 0, 0
    while pos < len(text):
        ch = text[pos]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0:
            sep = _REFERENCE_PARTS.match(text, pos)
            if sep is not None:
                parts.append(text[start:pos])
                start = pos = sep.end()
                continue
        pos += 1
    parts.append(text[start:])
    return [p for p in parts if p.strip()]


def _indexed_values(text: str) -> str | None:
    """`x_1 = a, x_2 = b` (one name, numbered): the answers are `a, b`."""
    parts = _top_level_parts(_GLUED_QUAD.sub(r"\\\1 ", text))
    matches = [m for m in map(_INDEXED.fullmatch, parts) if m is not None]
    if len(parts) < 2 or len(matches) != len(parts) or len({m.group(1) for m in matches}) != 1:
        return None
    return ", ".join(m.group(3) for m in matches)


def _bare_reference(text: str) -> bool:
    """No prose: the reference is an answer, however long (a solution has sentences)."""
    return not is_prose(_DELIMITERS.sub(" ", text[:_REFERENCE_SCAN]))


@short_key_cache(maxsize=1 << 13)
def parse_gold(answer: str, reference: str = "extract") -> str:
    """The reference answer's text from a dataset field.

    `reference="raw"`: the field as stored (only stripped). `"extract"` (default): the field may be a bare answer or
    a solution, read the way a completion is: every distinct `\\boxed{}` (several boxes are several answers), else a
    GSM8K `#### X`, else a bare answer with its `$..$` / `\\(..\\)` / `\\[..\\]` wrapper removed ("A or B" and
    `x_1 = a, x_2 = b` are lists of answers), else the final answer a solution states.
    """
    text = answer.strip()
    if reference == "raw" or len(text) > _REFERENCE_MAX_CHARS:
        return text  # an overlong field is returned whole, and the caller refuses it
    text = undouble_commands(text)
    if "boxed" in text or "fbox" in text:
        spans, _ = box_spans_from_end(text, _REFERENCE_BOXES, len(text))
        # The run of boxes the reference ends with, as for a completion: `\boxed{1} and \boxed{-2}` is two answers,
        # `\boxed{1} no no no no no \boxed{2}` is the last box.
        boxes = list(dict.fromkeys(c.strip() for c in final_box_group(text, spans) if c.strip())) if spans else []
        if boxes:
            return join_digit_groups(", ".join(boxes))
        opener = BOX_OPENER.match(text)
        if opener is not None:  # `\boxed{...` never closed: the rest is its content
            text = text[opener.end() :].strip()
    marker = text.rfind("####")
    if marker >= 0:
        return join_digit_groups(text[marker + 4 :].strip())
    inner = _unwrap(text)
    if _bare_reference(inner):
        if "$" in inner or "\\(" in inner:  # `$21,16$ or $11$`: several formulas, one answer list
            inner = _DELIMITERS.sub(" ", inner).strip()
        if "or" in inner:
            inner = _ALTERNATIVE.sub(", ", inner)
        if "=" in inner and "_" in inner and len(inner) <= _REFERENCE_SCAN:
            inner = _indexed_values(inner) or inner
        braces = _SET_BRACES.fullmatch(inner)
        inner = f"\\{{{braces.group(1)}\\}}" if braces else inner
        return join_digit_groups(inner)
    found = extract_answer(text)
    return found.text if found is not None and not found.too_long else join_digit_groups(inner)
