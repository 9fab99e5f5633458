"""The error every task source raises for a source or task it cannot load (its own module, so that the loaders and
the source index can all raise it without importing one another)."""

from __future__ import annotations


class SourceError(ValueError):
    """A source or task that cannot be loaded: one line naming it and what to do."""
