"""A reward function's signature against what a trainer passes it: `groupscore check` refuses, before any call, a
function that every call would fail with a TypeError (a parameter no case column fills, a column it cannot take)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

# What TRL passes besides the dataset's columns (RewardFunctionTarget.score passes the same).
TRL_EXTRAS = ("trainer_state", "log_extra", "log_metric")


def signature_problem(fn: Callable[..., Any], passed: Sequence[str], columns: Sequence[str]) -> str | None:
    """Why calling `fn` with the keywords `passed` fails, in one clause naming the cases' columns; None when it
    would not (or when the signature cannot be read: a builtin, a C extension)."""
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    have = f"cases have {', '.join(columns)}"
    named = {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    missing = [
        p.name
        for p in parameters
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.default is p.empty and p.name not in passed
    ]
    if missing:
        return f"needs column `{missing[0]}`; {have}"
    unexpected = [name for name in passed if name not in named]
    if unexpected and not any(p.kind is p.VAR_KEYWORD for p in parameters):
        return (
            f"takes no keyword `{unexpected[0]}`, which TRL passes (every column, completion_ids, trainer_state, "
            f"log_metric, ...): add **kwargs; {have}"
        )
    return None
