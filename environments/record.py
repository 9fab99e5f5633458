"""What an episode leaves for its checkers (`Record`), and what a session's seed does (`seed_env`).

A session (session.py) fills a Record as it runs; the checkers (checkers.py) read it after the episode. Kept apart
from both so that each imports it and neither the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Record:
    """What the episode did, for the checkers."""

    calls: list[list[dict[str, Any]]] = field(default_factory=lambda: [[]])
    states: list[Any] = field(default_factory=list)  # class tools' state after each turn (state checkers only)
    final_message: str | None = None
    snapshot: bytes | None = None  # a tar of the state roots at the end
    snapshot_error: str | None = None
    not_carried: list[str] = field(default_factory=list)  # what the state held that no tar can (sockets, devices)
    seed: int = 0  # the session's seed (seed_env), which its checkers see too


def seed_env(seed: int) -> dict[str, str]:
    """What a session's seed does: GROUPSCORE_SEED in the environment of its tools and of its checkers, so that a
    task whose tools or tests draw random data draws the same for the same seed (a GRPO group's sessions share one,
    and so see one instance of the task). A task's own `env` may set it too, and wins."""
    return {"GROUPSCORE_SEED": str(seed)}
