"""User-supplied regular expressions compiled with RE2, whose matching time is linear in the input.

Python's `re` backtracks, so a pattern such as `(a+)+$` against a long run of `a`s can take longer than any
reward budget, and a budget enforced by signals is what this project avoids. RE2 never backtracks: every match
runs in time linear in the input, so no timeout is needed. The price is RE2's syntax: no backreferences and no
lookaround. Patterns using them are rejected when the item is validated, with RE2's message.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

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
