""" "Did you mean": the known name closest to a misspelt one (a field, a keyword, a verifier kind, a setting)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def closest(name: str, known: Iterable[str]) -> str | None:
    """The known name most like `name` (difflib's ratio of at least 0.6), or None."""
    found = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return found[0] if found else None


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """ " (did you mean 'url'?)" for the closest known name, or ""."""
    match = closest(name, known)
    return f" (did you mean {match!r}?)" if match else ""
