"""The wire form of environment sessions: what opening one gives (`Opening`), a tool call (`ToolCall`), what a step
gives back (`Observation`), the next user turn (`Turn`), and the requests of the service's /v1/sessions endpoints.

A session's verdict is the ordinary `Verdict` (verdict.py): reward, status (`infra_error` when the session could not
start, died under the server or was reaped by it), components per checker, and the evidence in `details`.

Every field a request carries is bounded here, before it reaches a path or a jail. Names (the task address, the
client, a tool's name) hold no control character (NUL included) and no lone surrogate (not Unicode text: no path,
log line or label takes one); every length, and the nesting of a call's arguments, is within reason. The model's
own text (its messages, its calls' argument values) is otherwise taken as it is, NUL and lone surrogates included,
as /v1/score takes a completion: scored as written, or a tool's error the model sees. A request that breaks a rule
is refused whole (the service's 422 names the field), never half run.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field
from pydantic_core import PydanticCustomError

# A message as chat templates take it: {"role": "system"|"user"|"assistant"|"tool", "content": str, ...}.
Message = dict[str, Any]

# The bounds of a request's fields (each is also in the OpenAPI schema, as maxLength, pattern or maximum).
MAX_TASK_ADDRESS = 1024  # SOURCE:TASK_ID; SOURCE may be a path, and paths this long are no task file's
MAX_CLIENT = 256
MAX_TOOL_NAME = 200
MAX_MESSAGE = 1_000_000  # characters of the model's own message (a turn's end, the final answer)
MAX_ARGUMENT_DEPTH = 64  # containers within containers in a call's arguments, the arguments object counted
MAX_ARGUMENT_VALUES = 100_000  # values (containers and scalars, keys not counted) in a call's arguments
MAX_SEQ = 2**31 - 1  # a step's number within its session
SEED_MIN, SEED_MAX = -(2**63), 2**63 - 1

_SURROGATE = re.compile("[\ud800-\udfff]")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")  # Unicode's Cc: C0, DEL, C1
# The same rules as JSON Schema patterns, for OpenAPI (a lone surrogate is no JSON text: RFC 8259, section 8.2).
_NAME_PATTERN = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$"
_ADDRESS_PATTERN = "^[^\\u0000-\\u001f\\u007f-\\u009f]+:[^:\\u0000-\\u001f\\u007f-\\u009f]+$"


def text_problem(value: str, max_chars: int, *, name: bool = True) -> str | None:
    """Why `value` is no acceptable text field (one line, never the value itself), or None: longer than `max_chars`,
    or, for a `name`, holding a lone surrogate or a control character."""
    if len(value) > max_chars:
        return f"at most {max_chars} characters are allowed; this has {len(value)}"
    if not name:
        return None
    if found := _SURROGATE.search(value):
        return f"not valid Unicode text: a lone surrogate (U+{ord(found.group()):04X}) at character {found.start()}"
    if found := _CONTROL.search(value):
        what = "a NUL character" if found.group() == "\x00" else "a control character"
        return f"{what} (U+{ord(found.group()):04X}) at character {found.start()} is not allowed here"
    return None


def task_address_problem(address: Any) -> str | None:
    """Why `address` is no task address SOURCE:TASK_ID (one line), or None. Where SOURCE may be opened (a path only
    inside the service's task folders) is for the one that opens it to say."""
    if not isinstance(address, str):
        return f"a task address is a string SOURCE:TASK_ID, not {type(address).__name__}"
    problem = text_problem(address, MAX_TASK_ADDRESS)
    if problem is not None:
        return f"task address: {problem}"
    source, sep, task_id = address.rpartition(":")
    if not sep or not source or not task_id:
        return f"{address!r}: address a task as SOURCE:TASK_ID (e.g. bfcl:multi_turn_base_0, harbor:TASK)"
    return None


def _invalid(problem: str) -> PydanticCustomError:
    return PydanticCustomError("invalid_text", "{problem}", {"problem": problem})


def _name(max_chars: int) -> Any:
    def check(value: Any) -> Any:
        if isinstance(value, str) and (problem := text_problem(value, max_chars)):
            raise _invalid(problem)
        return value

    return check


def _message(value: Any) -> Any:
    if isinstance(value, str) and (problem := text_problem(value, MAX_MESSAGE, name=False)):
        raise _invalid(problem)
    return value


def _address(value: Any) -> Any:
    if isinstance(value, str) and (problem := task_address_problem(value)):
        raise _invalid(problem)
    return value


def arguments_problem(arguments: Any) -> str | None:
    """Why a call's arguments are refused (nested too deep, too many values), or None. Walked without recursion, so
    no nesting breaks the walk itself. What the values say is the tool's to judge."""
    stack: list[tuple[Any, int]] = [(arguments, 1)]
    values = 0
    while stack:
        value, depth = stack.pop()
        values += 1
        if values > MAX_ARGUMENT_VALUES:
            return f"more than {MAX_ARGUMENT_VALUES} values in the arguments"
        if isinstance(value, (dict, list, tuple)):
            if depth > MAX_ARGUMENT_DEPTH:
                return f"nested more than {MAX_ARGUMENT_DEPTH} levels deep"
            stack.extend((item, depth + 1) for item in (value.values() if isinstance(value, dict) else value))
    return None


def _arguments(value: dict[str, Any]) -> dict[str, Any]:
    if problem := arguments_problem(value):
        raise _invalid(problem)
    return value


# The constrained field types. A BeforeValidator sees the raw input first, so its one-line reason is what a client
# reads (not a generic "unable to parse" or "should match pattern"); the Field's bounds are what OpenAPI shows.
TaskAddress = Annotated[
    str,
    Field(min_length=3, max_length=MAX_TASK_ADDRESS, json_schema_extra={"pattern": _ADDRESS_PATTERN}),
    BeforeValidator(_address),
]
ClientName = Annotated[
    str,
    Field(min_length=1, max_length=MAX_CLIENT, json_schema_extra={"pattern": _NAME_PATTERN}),
    BeforeValidator(_name(MAX_CLIENT)),
]
ToolName = Annotated[
    str,
    Field(min_length=1, max_length=MAX_TOOL_NAME, json_schema_extra={"pattern": _NAME_PATTERN}),
    BeforeValidator(_name(MAX_TOOL_NAME)),
]
# No max_length constraint: pydantic's own length check refuses a lone surrogate, which the model's text may hold.
MessageText = Annotated[str, Field(json_schema_extra={"maxLength": MAX_MESSAGE}), BeforeValidator(_message)]
Arguments = Annotated[dict[str, Any], AfterValidator(_arguments)]


class ToolCall(BaseModel):
    """One call the model made: the tool's name and its arguments (a JSON object)."""

    model_config = ConfigDict(extra="forbid")

    name: ToolName
    arguments: Arguments = Field(
        default_factory=dict,
        description=f"a JSON object: at most {MAX_ARGUMENT_DEPTH} levels deep, {MAX_ARGUMENT_VALUES} values in all",
    )


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


class TaskSummary(BaseModel):
    """A task as GET /v1/tasks lists it: what it is before it runs (nothing of its checkers' references)."""

    model_config = ConfigDict(extra="forbid")

    id: str
    address: str = Field(description="SOURCE:TASK_ID, as POST /v1/sessions takes it")
    turns: int
    tools: list[str] = Field(description="tool names; a class known only once its jail imports it shows as Class.*")
    checkers: list[str] = Field(description="the kinds of its checkers (tests, state, sql, final_message, ...)")
    description: str = Field(description="its first user message, cut to a line")


class TaskList(BaseModel):
    """GET /v1/tasks: a source's tasks; `problems` names each task of it that cannot load (the rest are listed)."""

    model_config = ConfigDict(extra="forbid")

    source: str
    tasks: list[TaskSummary]
    problems: list[str] = Field(default_factory=list)


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

    task: TaskAddress = Field(
        description="SOURCE:TASK_ID, e.g. 'bfcl:multi_turn_base_0' or 'path/to/tasks.jsonl:t1' (a path only inside "
        "the service's GROUPSCORE_TASK_DIRS)"
    )
    seed: int = Field(0, ge=SEED_MIN, le=SEED_MAX)
    count: int = Field(1, ge=1, le=256)
    client: ClientName | None = Field(
        None, description="who holds the sessions: all of a client's go when it is reaped"
    )


class StepRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    call: ToolCall | None = None
    message: MessageText | None = Field(None, description="the model's own message: ends the turn (no tool call)")
    seq: int | None = Field(
        None,
        ge=1,
        le=MAX_SEQ,
        description="this call's number among the session's steps and turn ends, from 1. Sent again with the number "
        "of the session's last call, it answers that call's reply without running anything, so a client may resend a "
        "call whose connection was lost; any other number than the last or the next is refused (422). Unset: the call "
        "runs, unnumbered",
    )


class ScoreSessionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    final_message: MessageText | None = None


ScoreRequest = ScoreSessionRequest  # its name before 2026-12-02 (the API description shows ScoreSessionRequest)
