"""Verifiers: the registry of kinds, the scoring entry points, composite rewards, and the kinds (math, code, ...)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Loaded on first use (PEP 562), not with the package: importing any submodule runs this file, and the one-shot CLI's
# own process needs none of the item models (pydantic) to hand lines to its workers.
_EXPORTS = {
    "KINDS": "registry",
    "Item": "registry",
    "parse_item": "registry",
    "score_item": "registry",
    "score_raw": "scoring",
    "score_valid": "scoring",
}

if TYPE_CHECKING:
    from groupscore.verifiers.registry import KINDS, Item, parse_item, score_item
    from groupscore.verifiers.scoring import score_raw, score_valid

__all__ = ["KINDS", "Item", "parse_item", "score_item", "score_raw", "score_valid"]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
