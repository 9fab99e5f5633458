"""Text helpers the kinds share: fenced blocks of a completion, the document it answers with, linear-time regexes.

Fenced blocks: Markdown code fences (``` or ~~~, three or more), an info string's first word as the block's tag, a
fence left open at the end running to the end of the text (a cut-off generation).

Regular expressions from items are compiled with RE2, whose matching time is linear in the input. Python's `re`
backtracks, so a pattern such as `(a+)+$` against a long run of `a`s can take longer than any reward budget, and a
budget enforced by signals is what this project avoids. RE2 never backtracks, so no timeout is needed. The price is
RE2's syntax: no backreferences and no lookaround. Patterns using them are rejected when the item is validated, with
RE2's message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

_FENCE = re.compile(r"^[ \t]{0,3}(```+|~~~+)[ \t]*([^\s`{]*)[^\n]*$")


@dataclass(frozen=True)
class FencedBlock:
    tag: str  # the info string's first word, lowercased ("" when untagged)
    code: str
    terminated: bool


def fenced_blocks(text: str) -> list[FencedBlock]:
    """Every fenced block in order; a fence left open at the end runs to the end of the text (a cut-off generation)."""
    blocks: list[FencedBlock] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        fence, tag = opening.group(1), opening.group(2).lower()
        body: list[str] = []
        i += 1
        while i < len(lines):
            closing = _FENCE.match(lines[i])
            if (
                closing
                and closing.group(1)[0] == fence[0]
                and len(closing.group(1)) >= len(fence)
                and not closing.group(2)
            ):
                break
            body.append(lines[i])
            i += 1
        terminated = i < len(lines)
        blocks.append(FencedBlock(tag=tag, code="\n".join(body) + "\n" if body else "", terminated=terminated))
        i += 1
    return blocks


def find_fenced(text: str, language: str) -> str | None:
    """Body of the last block tagged `language`, else of the last untagged block, else None."""
    blocks = fenced_blocks(text)
    found = [b.code for b in blocks if b.tag == language] or [b.code for b in blocks if b.tag == ""]
    return found[-1] if found else None


def find_document(text: str, mode: str, language: str = "json") -> str | None:
    """The text to parse ("auto": fenced if any block, else the whole text), or None when the mode finds nothing."""
    if mode != "raw":
        fenced = find_fenced(text, language)
        if fenced is not None or mode == "fenced":
            return fenced
    return text if text.strip() else None


MAX_PATTERN_CHARS = 2_000
# RE2 builds automata lazily inside this much memory and falls back to a slower (still linear) engine beyond it.
MAX_MEMORY_BYTES = 8 << 20


@lru_cache(maxsize=256)
def compile_linear(pattern: str) -> Any:
    """The compiled RE2 pattern; ValueError (with RE2's reason) for a pattern RE2 cannot or must not compile."""
    import re2  # C extension; imported here so item modules stay cheap to import

    if len(pattern) > MAX_PATTERN_CHARS:
        raise ValueError(f"pattern is longer than {MAX_PATTERN_CHARS} characters")
    options = re2.Options()
    options.log_errors = False  # RE2 would otherwise print every rejected pattern to stderr
    options.max_mem = MAX_MEMORY_BYTES
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise ValueError(f"invalid RE2 pattern (no backreferences or lookaround): {reason}") from None
