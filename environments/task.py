"""A task: everything one environment episode starts from and is scored by.

A task source (sources.py) yields these; the loaders of groupscore's own JSONL/YAML form, of Harbor task directories
(harbor.py) and of BFCL v4 multi-turn (bfcl.py) all end here. The agent sees `turns`, `tools` and the files; it never
sees `checkers` (they enter only after the episode, in a jail of their own).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from groupscore.schema.reward import RewardSpec
from groupscore.schema.sessions import Message, ToolCall

BUILTIN_TOOLS = ("shell", "python", "read_file", "write_file", "list_files", "sqlite")
# A jail lives at most an hour (the sandbox's wall clock), and the host gives an episode or a check two minutes past
# its own time before it calls the jail gone: no episode or check may be longer, or the jail's clock would end it
# first and the ending would read as the server's.
JAIL_LIFE_S = 3600.0
MAX_EPISODE_S = JAIL_LIFE_S - 120


class ScriptedTurn(BaseModel):
    """One user turn as the task scripts it (the wire's `Turn` is how a session hands it out): its messages (the
    first turn may start with a system message), and tools that appear with it (BFCL's missing-function turns)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    messages: tuple[Message, ...]
    add_tools: tuple[str, ...] = ()


class ClassTools(BaseModel):
    """A class whose public methods are tools and whose instance is the state, run inside the session's jail.

    The class comes from `source` (a module's text, written into the jail) or from `module` (importable there, e.g.
    from the named jail Python environment `python_env`). After `init_args`, the instance's `setup` method (if named)
    is called with `setup_args` (BFCL: `_load_scenario(initial_config, long_context=...)`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    class_name: str
    module: str | None = None
    source: str | None = None
    python_env: str | None = None
    init_args: dict[str, Any] = Field(default_factory=dict)
    setup: str | None = None
    setup_args: dict[str, Any] = Field(default_factory=dict)
    methods: tuple[str, ...] | None = Field(
        None, description="the methods offered as tools (default: every public one)"
    )
    tool_schemas: tuple[dict[str, Any], ...] = Field((), description="schemas given by the task (else read from code)")
    state_exclude: tuple[str, ...] = Field((), description="attributes left out of the state a checker compares")
    encoder: str | None = Field(
        None,
        description="source of a module run in the jail beside the class: public_state(instances), result_text(value) "
        "and error_text(exc) give the state and each call's text as the task's checker wants them (BFCL's)",
    )

    @model_validator(mode="after")
    def _one_origin(self) -> ClassTools:
        if (self.module is None) == (self.source is None):
            raise ValueError("a class tool needs exactly one of 'module' or 'source'")
        # A task author's broken source is refused here, where the author sees it: found only in the jail, every
        # session of the task would be infra_error, which trainers mask, and the task would drop out unnoticed.
        if self.source is not None and self.class_name not in _top_level_names(self.source, "source"):
            raise ValueError(f"source: defines no class {self.class_name!r} at its top level")
        if self.encoder is not None:
            _top_level_names(self.encoder, "encoder")
        return self


def _top_level_names(text: str, field: str) -> set[str]:
    """The names a module's text binds at its top level (compiled, never run); a syntax error is one line."""
    import ast

    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise ValueError(f"{field}: line {exc.lineno}: {exc.msg}") from None
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


class Database(BaseModel):
    """The session's own SQLite database: a file in the work dir, built from `sql` at reset."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str = "db.sqlite"
    sql: str = ""


class Checker(BaseModel):
    """How the final state is scored; a task's checkers combine by weight (as composite rewards do).

    tests: hidden files placed at /tests in a fresh jail over a copy of the final state, then `command`; the reward is
        what it writes to /logs/verifier/reward.txt (a number) or reward.json ({"reward": x}); nothing written is 0.
    state: the class instances' public state equals the state the `reference` trajectory leaves (`compare`).
    sql: `query` on the final database returns `rows` (order ignored unless `ordered`).
    final_message: a built-in verifier `item` (kind, reference, options) scores the model's last message, alone or
        as the components of a composite `reward` (schema/reward.py), as items are scored anywhere.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["tests", "state", "sql", "final_message"]
    name: str | None = None
    weight: float = Field(1.0, gt=0)
    files: dict[str, str] = Field(default_factory=dict)
    executables: tuple[str, ...] = Field((), description="tests: files placed executable (besides every *.sh)")
    dirs: tuple[str, ...] = Field((), description="tests: folders placed even when empty")
    command: str = "bash /tests/test.sh"
    timeout_s: float = Field(30.0, gt=0, le=MAX_EPISODE_S)
    env: dict[str, str] = Field(
        default_factory=dict, description="tests: environment of the command (Harbor's [verifier] env), over the task's"
    )
    reference: tuple[tuple[ToolCall, ...], ...] = ()
    compare: Literal["equal", "bfcl"] = Field(
        "equal",
        description="state: how the states compare: 'equal' (the public state after the last turn equals the "
        "reference's), 'bfcl' (BFCL's multi-turn rules, turn by turn: bfcl_check.py)",
    )
    query: str | None = None
    rows: tuple[tuple[Any, ...], ...] = ()
    ordered: bool = False
    agent_views: bool = Field(
        False,
        description="sql: the query may read views the agent made (for a task that asks for one); otherwise only the "
        "task's tables and views, so that a view named like a table cannot answer for it",
    )
    item: dict[str, Any] = Field(default_factory=dict)
    reward: RewardSpec | None = Field(None, description="final_message: a composite reward over the item (components)")

    @property
    def label(self) -> str:
        return self.name or self.kind


class EpisodeLimits(BaseModel):
    """What one episode may use. Step and output limits end a step; the episode's end the session."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_steps: int = Field(32, ge=1, le=10_000)
    step_time_s: float = Field(10.0, gt=0, le=600)
    episode_time_s: float = Field(600.0, gt=0, le=MAX_EPISODE_S)
    idle_s: float = Field(300.0, gt=0, description="a session untouched this long is reaped (infra_error)")
    max_output_bytes: int = Field(16 << 10, ge=256, description="of one observation; the rest is cut and said")
    memory_mb: int = Field(512, ge=32)
    max_processes: int = Field(64, ge=4)
    disk_mb: int = Field(64, ge=1, description="the session's writable space (work dir and /tmp)")
    cpu_s: int = Field(120, ge=1, description="CPU seconds of each tool process (RLIMIT_CPU; the agent has its own)")


class Task(BaseModel):
    """One task of a source. `files` are the initial files, relative to `workdir`; `state` a tar of initial state
    (a Harbor image's RUN steps, cached), unpacked before them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    source: str = ""
    turns: tuple[ScriptedTurn, ...] = Field(min_length=1)
    tools: tuple[str, ...] = ()
    classes: tuple[ClassTools, ...] = ()
    workdir: str = "/app"
    env: dict[str, str] = Field(default_factory=dict)
    files: dict[str, str] = Field(default_factory=dict)
    state: bytes | None = None
    database: Database | None = None
    checkers: tuple[Checker, ...] = Field(min_length=1)
    limits: EpisodeLimits = EpisodeLimits()
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def address(self) -> str:
        """SOURCE:TASK_ID, as load_task (and a service's POST /v1/sessions) resolves it."""
        return f"{self.source}:{self.id}" if self.source else self.id

    @field_validator("tools")
    @classmethod
    def _known_tools(cls, tools: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [t for t in tools if t not in BUILTIN_TOOLS]
        if unknown:
            raise ValueError(f"unknown tool {unknown[0]!r}; built-in tools: {', '.join(BUILTIN_TOOLS)}")
        return tools

    @field_validator("workdir")
    @classmethod
    def _absolute_workdir(cls, workdir: str) -> str:
        if not workdir.startswith("/") or workdir.rstrip("/") in ("", "/proc", "/dev", "/tests", "/logs"):
            raise ValueError(f"workdir {workdir!r}: an absolute path of its own (e.g. /app)")
        return workdir.rstrip("/")

    @model_validator(mode="after")
    def _usable(self) -> Task:
        if not self.tools and not self.classes:
            raise ValueError("a task needs tools: built-in ones ('tools') or class tools ('classes')")
        if any(c.kind == "sql" for c in self.checkers) and self.database is None:
            raise ValueError("an sql checker needs the task's 'database'")
        added = {name for turn in self.turns for name in turn.add_tools}
        if not self.classes and added - set(BUILTIN_TOOLS):
            raise ValueError(f"turns add tools the task does not have: {', '.join(sorted(added - set(BUILTIN_TOOLS)))}")
        if any(c.kind == "state" for c in self.checkers) and not self.classes:
            raise ValueError("a state checker compares class tools' state: the task has no 'classes'")
        return self
