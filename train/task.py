"""A taskset row: one task in the one form it keeps from loading to the rendered prompt (`TaskRow`), a conversational
prompt's turns, and the taskset's problems raised together."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple


class Message(NamedTuple):
    """One turn of a conversational prompt."""

    role: str
    content: str


@dataclass(frozen=True)
class TaskRow:
    id: str
    prompt: str  # the text the model sees (rendered with the chat template once the model is known)
    solution: str | None  # a worked solution: SFT target and the dry run's reference completion
    item: dict[str, Any]  # verifier fields (answer, tests, hidden_tests...): never shown to the model
    messages: tuple[Message, ...] | None = None  # a conversational prompt, before rendering
    columns: dict[str, Any] = field(default_factory=dict)  # the row's other columns, for user reward functions
    env: Any = None  # an environment task (environments.Task): an episode with tools, scored by its session
    # An episode's solution cut where the model's turns end: (text, trained). The tool results and the headers after
    # them are the environment's, kept out of the cold start's loss as they are out of GRPO's.
    solution_parts: tuple[tuple[str, bool], ...] | None = None


def parse_messages(value: Any) -> tuple[Message, ...] | None:
    """A conversational prompt (a list of {role, content} messages, as TRL takes them), or None for plain text."""
    if not isinstance(value, list):
        return None
    out = []
    for message in value:
        if not (isinstance(message, dict) and isinstance(message.get("role"), str) and "content" in message):
            raise ValueError("a conversational prompt is a list of {role, content} messages")
        out.append(Message(role=message["role"], content=str(message["content"])))
    if not out or out[-1].role != "user":
        raise ValueError("a conversational prompt ends with the user's turn")
    return tuple(out)


def raise_problems(problems: list[str], where: str) -> None:
    """Every bad row at once (the first 20); `where` names the source, or is empty when each problem names its file."""
    if problems:
        raise ValueError(
            f"invalid taskset{' ' + where if where else ''}:\n  "
            + "\n  ".join(problems[:20])
            + (f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else "")
        )
