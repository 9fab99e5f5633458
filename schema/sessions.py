"""The wire form of environment sessions: what opening one gives (`Opening`), a tool call (`ToolCall`), what a step
gives back (`Observation`), the next user turn (`Turn`), and the requests of the service's /v1/sessions endpoints.

A session's verdict is the ordinary `Verdict` (verdict.py): reward, status (`infra_error` when the session could not
start, died under the server or was reaped by it), components per checker, and the evidence in `details`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# A message as chat templates take it: {"role": "system"|"user"|"assistant"|"tool", "content": str, ...}.
Message = dict[str, Any]


class ToolCall(BaseModel):
    """One call the model made: the tool's name and its arguments (a JSON object)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200)
    arguments: dict[str, Any] = Field(default_factory=dict)


class Opening(BaseModel):
    """What a new session starts with: its id, the first turn's messages, and the tools (OpenAI function format)."""

    model_config = ConfigDict(extra="forbid")

    session_id: str
    task_id: str
    messages: list[Message]
    tools: list[dict[str, Any]]
    turns: int = Field(description="user turns the task has in all; the first is in `messages`")


class Observation(BaseModel):
    """What a tool call gave back. done: the episode is over (the step budget is spent, the session's time ran out or
    its jail stopped); the session can still be scored."""

    model_config = ConfigDict(extra="forbid")

    content: str
    is_error: bool = False
    done: bool = False
    steps: int = Field(0, description="tool calls made in this session so far, this one included")


class Turn(BaseModel):
    """The next user turn, after the model ended one with a message of its own. done: no user turn is left."""

    model_config = ConfigDict(extra="forbid")

    messages: list[Message] = Field(default_factory=list)
    tools: list[dict[str, Any]] | None = Field(None, description="the whole tool list, when this turn changed it")
    done: bool = False
    turn: int = 0


class OpenSessions(BaseModel):
    """POST /v1/sessions: open `count` sessions of one task (a GRPO group is G sessions of one task)."""

    model_config = ConfigDict(extra="forbid")

    task: str = Field(description="SOURCE:TASK_ID, e.g. 'bfcl:multi_turn_base_0' or 'path/to/tasks.jsonl:t1'")
    seed: int = 0
    count: int = Field(1, ge=1, le=256)
    client: str | None = Field(None, description="who holds the sessions: all of a client's go when it is reaped")


class StepRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    call: ToolCall | None = None
    message: str | None = Field(None, description="the model's own message: ends the turn (no tool call)")


class ScoreRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    final_message: str | None = None
