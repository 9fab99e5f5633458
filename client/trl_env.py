"""TRL's `environment_factory` from groupscore sessions: a class whose methods are a task source's tools, each call a
step of a session on the service, and whose `get_reward` is the session's verdict.

    Env = environment_factory("http://127.0.0.1:8000", ["demo:count-errors", "demo:top-customer"])
    trainer = GRPOTrainer(model, args=config, train_dataset=Dataset.from_list(Env.rows), environment_factory=Env)

What TRL does with the class (trl/trainer/grpo_trainer.py, TRL 1.16): it calls `Env()` once at init to read the
tools (every public function of the class but `reset` and `get_reward`, through `inspect`; transformers'
`get_json_schema` turns each into the schema the chat template shows, from its signature, annotations and Google-style
docstring); it pools instances and reuses them across batches; before each generation batch it calls
`reset(**row)` on one instance per rollout; the model's tool calls become `instance.tool(**arguments)`; after the
batch `get_reward()` once per rollout (weight 1, logged under the class's name), `None` being masked. TRL never
closes an environment, so this class does:

- the first `get_reward()` of a batch scores every session the class holds open, side by side, and closes them all:
  sessions are closed at the end of each generation batch;
- `reset` closes a session its instance still holds (a batch that failed before its rewards);
- `Env.close_all()` (also at interpreter exit) closes every session opened under the class's client id on the
  service; the service reaps what a killed process leaves (idle sessions), as infra_error.

A row names its task in the `task` column (SOURCE:TASK_ID). TRL appends a string that `reset` returns to the row's
last prompt message, so a row without a `prompt` gets the task's first user message that way (a system message of
the task is then dropped: give `prompt` from `Env.rows` to keep it). TRL runs one user turn: a task's later user turns
(BFCL multi-turn) are not served, and the model's final message does not reach the checkers (`get_reward` takes no
argument); an `infra_error` verdict gives `None`, which TRL masks.
"""

from __future__ import annotations

import atexit
import inspect
import re
import threading
import uuid
import weakref
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar, Literal, Union, cast

from groupscore.client.http import ServiceError
from groupscore.client.sessions import SessionsClient
from groupscore.schema.sessions import Opening
from groupscore.schema.verdict import Status, Verdict

# Sessions scored (or tasks probed) at once: each score runs the task's checkers on the service.
SCORE_THREADS = 32
# What the tool methods may not be called: TRL's own members, and this class's.
_RESERVED = frozenset(
    "reset get_reward finish_batch close_all rows tool_schemas sessions client_id seed task_column group_size".split()
)
# transformers reads the docstring's description up to the first of these words, anywhere in it.
_SECTION = re.compile(r"\b(Args|Returns|Raises):")
_JSON_TYPES: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "float": float,
    "boolean": bool,
    "object": dict,
    "dict": dict,
    "null": type(None),
    "any": Any,
}


class _Held:
    """What one environment class holds on the service: the instances with a session open, and sessions opened
    ahead for the rest of a group (one request opens a task's `group_size` sessions)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.envs: weakref.WeakSet[GroupscoreEnvironment] = weakref.WeakSet()
        self.spare: dict[tuple[str, int], list[Opening]] = {}
        self.unclosed = 0  # sessions opened and not closed since (nothing left: no request at exit)

    def take(self) -> tuple[list[GroupscoreEnvironment], list[Opening]]:
        with self.lock:
            envs, spare = list(self.envs), [o for group in self.spare.values() for o in group]
            self.envs.clear()
            self.spare.clear()
        return envs, spare


class GroupscoreEnvironment:
    """One rollout's environment: a groupscore session of the row's task. Subclasses made by `environment_factory`
    add one method per tool; their class attributes hold the service client and the sessions open."""

    sessions: ClassVar[SessionsClient]
    client_id: ClassVar[str]
    task_column: ClassVar[str] = "task"
    seed: ClassVar[int] = 0
    group_size: ClassVar[int] = 1
    rows: ClassVar[list[dict[str, Any]]] = []  # a dataset's rows: {"prompt": the task's messages, "task": address}
    tool_schemas: ClassVar[list[dict[str, Any]]] = []
    _held: ClassVar[_Held]

    def __init__(self) -> None:
        self._session: Opening | None = None
        self._reward: float | None = None

    def reset(self, **row: Any) -> str | None:
        """Open a session of the row's task (closing one this instance still holds). Returns the task's first user
        message when the row has no prompt (TRL appends it to the placeholder prompt), else None."""
        self._close()
        task = row.get(self.task_column)
        if not isinstance(task, str):
            raise KeyError(
                f"environment_factory: each row names its task in the column {self.task_column!r} (SOURCE:TASK_ID); "
                f"this row has {sorted(row)}"
            )
        seed = row["seed"] if isinstance(row.get("seed"), int) else self.seed
        self._session, self._reward = self._open(task, seed), None
        if row.get("prompt"):
            return None
        users = [m for m in self._session.messages if m.get("role") == "user"]
        return str(users[-1].get("content", "")) if users else None

    def get_reward(self) -> float | None:
        """The session's reward; None for infra_error (TRL masks it). The first call of a batch scores and closes
        every session the class holds."""
        if self._session is not None:
            type(self).finish_batch()
        return self._reward

    @classmethod
    def finish_batch(cls) -> int:
        """Score every session the class holds open, side by side, and close them (and close the spare ones); how
        many were scored."""
        envs, spare = cls._held.take()
        for opening in spare:
            cls._close_quietly(opening.session_id)
        if envs:
            with ThreadPoolExecutor(min(SCORE_THREADS, len(envs)), thread_name_prefix="groupscore-env") as pool:
                list(pool.map(lambda env: env._score_and_close(), envs))
        return len(envs)

    @classmethod
    def close_all(cls) -> int:
        """Close every session opened under this class's client id on the service (the end of training, exit)."""
        envs, _ = cls._held.take()
        for env in envs:
            env._session = None
        with cls._held.lock:
            cls._held.unclosed = 0
        try:
            return cls.sessions.close_client(cls.client_id)
        except (ServiceError, OSError):
            return 0  # the service is gone, and its sessions with it

    def _open(self, task: str, seed: int) -> Opening:
        held = self._held
        with held.lock:
            spare = held.spare.get((task, seed))
            opening = spare.pop() if spare else None
        if opening is None:
            opening, *rest = self.sessions.open_group(task, count=self.group_size, seed=seed, client=self.client_id)
            with held.lock:
                held.spare.setdefault((task, seed), []).extend(rest)
                held.unclosed += 1 + len(rest)
        with held.lock:
            held.envs.add(self)
        return opening

    def _step(self, name: str, arguments: dict[str, Any]) -> str:
        if self._session is None:
            return "error: no session is open (the episode is over)"
        return self.sessions.step(self._session.session_id, name, arguments).content

    def _score_and_close(self) -> None:
        session = self._session
        if session is None:
            return
        try:
            verdict: Verdict | None = self.sessions.score(session.session_id)
        except ServiceError:
            verdict = None  # the service could not score it: masked like any infra error
        self._reward = None if verdict is None or verdict.status == Status.infra_error else verdict.reward
        self._close()

    def _close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            with self._held.lock:
                self._held.envs.discard(self)
            self._close_quietly(session.session_id)

    @classmethod
    def _close_quietly(cls, session_id: str) -> None:
        try:
            cls.sessions.close(session_id)
        except ServiceError:
            pass  # the service lost it (reaped): close_all and the service's reaper cover the rest
        with cls._held.lock:
            cls._held.unclosed -= 1

    @classmethod
    def _close_at_exit(cls) -> None:
        if cls._held.unclosed > 0:  # a service long gone would cost the client's retries for nothing
            cls.close_all()


def environment_factory(
    url: str | Sequence[str],
    tasks: str | Iterable[str],
    *,
    token: str | None = None,
    group_size: int = 1,
    seed: int = 0,
    task_column: str = "task",
    name: str = "GroupscoreEnv",
    timeout_s: float = 330.0,
) -> type[GroupscoreEnvironment]:
    """The class to pass as GRPOTrainer's `environment_factory`, for the tasks given by address (SOURCE:TASK_ID).

    Each task is opened once here, to read its prompt and tools (then closed): the class's methods are the union of
    the tasks' tools by name (a name with two different schemas is refused), and `Env.rows` are the dataset rows
    (`{"prompt": messages, "task": address}`; TRL repeats each for its group). `group_size` (GRPOConfig's
    `num_generations`) opens a group's sessions in one request, on the server side by side. The class's name is what
    TRL logs the reward under (`rewards/<name>/mean`)."""
    addresses = [tasks] if isinstance(tasks, str) else list(dict.fromkeys(tasks))
    if not addresses:
        raise ValueError("environment_factory: give at least one task (SOURCE:TASK_ID)")
    client_id = f"trl-{uuid.uuid4().hex[:12]}"
    sessions = SessionsClient(url, token=token, client=client_id, timeout_s=timeout_s)
    rows: list[dict[str, Any]] = []
    schemas: dict[str, tuple[str, dict[str, Any]]] = {}

    def probe(address: str) -> Opening:
        (opening,) = sessions.open_group(address, count=1, seed=seed)
        sessions.close(opening.session_id)
        return opening

    with ThreadPoolExecutor(min(SCORE_THREADS, len(addresses)), thread_name_prefix="groupscore-env") as pool:
        openings = list(pool.map(probe, addresses))
    for address, opening in zip(addresses, openings):
        rows.append({"prompt": opening.messages, task_column: address})
        for schema in opening.tools:
            tool = schema.get("function", schema)
            seen = schemas.setdefault(tool["name"], (address, schema))
            if seen[1] != schema:
                raise ValueError(
                    f"environment_factory: the tool {tool['name']!r} differs between {seen[0]} and {address}; "
                    "give tasks with the same tools, or one environment_factory per tool set (a dict of them)"
                )
    methods = {tool_name: tool_method(schema) for tool_name, (_, schema) in schemas.items()}
    attributes = {
        **methods,
        "sessions": sessions,
        "client_id": client_id,
        "task_column": task_column,
        "seed": seed,
        "group_size": group_size,
        "rows": rows,
        "tool_schemas": [schema for _, schema in schemas.values()],
        "_held": _Held(),
        "__module__": __name__,
    }
    cls = cast("type[GroupscoreEnvironment]", type(name, (GroupscoreEnvironment,), attributes))
    atexit.register(cls._close_at_exit)
    return cls


def tool_method(schema: dict[str, Any]) -> Any:
    """A method calling one tool, with the signature, annotations and Google-style docstring that transformers'
    `get_json_schema` reads back into (nearly) the tool's schema: nested object shapes become plain `dict`."""
    tool = schema.get("function", schema)
    tool_name = tool["name"]
    if not tool_name.isidentifier() or tool_name.startswith("_") or tool_name in _RESERVED:
        raise ValueError(f"environment_factory: the tool name {tool_name!r} cannot be a method of TRL's environment")
    spec = tool.get("parameters") or {}
    properties: dict[str, Any] = spec.get("properties") or {}
    required = set(spec.get("required") or [])
    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}
    docs = []
    for param, param_schema in properties.items():
        if not re.fullmatch(r"\w+", param) or not param.isidentifier():
            raise ValueError(f"environment_factory: the tool {tool_name!r} has an argument named {param!r}")
        hint = python_type(param_schema)
        optional = param not in required
        annotations[param] = Union[hint, None] if optional else hint  # noqa: UP007 (a runtime object, any Python)
        parameters.append(
            inspect.Parameter(
                param,
                inspect.Parameter.KEYWORD_ONLY,
                default=None if optional else inspect.Parameter.empty,
                annotation=annotations[param],
            )
        )
        docs.append(f"    {param}: {_one_line(param_schema.get('description') or param_schema.get('type') or param)}")
    description = _one_line(tool.get("description") or tool_name)
    given = frozenset(properties)

    def call(self: GroupscoreEnvironment, **arguments: Any) -> str:
        # Arguments left out arrive as None: the tool gets only those the model gave (or named but unknown ones, which
        # the service refuses in the observation the model sees).
        sent = {k: v for k, v in arguments.items() if v is not None or k not in given or k in required}
        return self._step(tool_name, sent)

    call.__name__ = call.__qualname__ = tool_name
    call.__doc__ = description + ("\n\nArgs:\n" + "\n".join(docs) if docs else "")
    call.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    call.__annotations__ = annotations
    return call


def python_type(param_schema: dict[str, Any]) -> Any:
    """The Python annotation transformers turns back into this JSON Schema type (enums as Literal)."""
    if param_schema.get("enum"):
        values = [v for v in param_schema["enum"] if isinstance(v, (str, int, float, bool)) or v is None]
        if values:
            return Literal[tuple(values)]
    kind = param_schema.get("type")
    if isinstance(kind, list):
        hints = [python_type({**param_schema, "type": k}) for k in kind]
        return Union[tuple(hints)] if len(hints) > 1 else hints[0]  # noqa: UP007
    if kind in ("array", "tuple"):
        items = param_schema.get("items")
        return list.__class_getitem__(python_type(items)) if isinstance(items, dict) and items else list
    return _JSON_TYPES.get(kind if isinstance(kind, str) else "any", Any)


def _one_line(text: str) -> str:
    return _SECTION.sub(r"\1 -", " ".join(str(text).split()))
