"""The service's settings: one frozen pydantic-settings object. Each field is read from GROUPSCORE_<FIELD> unless an
argument gives it (`groupscore serve --workers 4` beats GROUPSCORE_WORKERS); an empty variable counts as unset.

A bad value fails at start-up in one line naming the variable (or argument) and what it takes (`SettingsError`);
`groupscore serve --help` lists every variable with its default (`describe`), as the README's settings table does.
"""

from __future__ import annotations

import json
import os
import textwrap
from typing import Any

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from groupscore.runtime import MIN_WORKER_MEMORY_MB  # one floor for both readers
from groupscore.schema.columns import KIND_FIELDS
from groupscore.schema.reward import KIND_NAMES

ENV_PREFIX = "GROUPSCORE_"

# The math item's conventions and extraction options: what `math_defaults` may set for a whole service. Every field
# of the item but the two that belong to one item alone, read from the one table of the kind's fields.
MATH_DEFAULTABLE = tuple(field for field in KIND_FIELDS["math"] if field not in ("answer", "question"))


class SettingsError(ValueError):
    """A bad setting: one line naming the variable or argument, its value, and what it takes."""


def _cores() -> int:
    return max(1, len(os.sched_getaffinity(0)))


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_ignore_empty=True, frozen=True, extra="forbid")

    host: str = Field(default="127.0.0.1", description="address to listen on")
    port: int = Field(default=8000, ge=0, le=65535, description="port to listen on")
    workers: int = Field(default_factory=_cores, ge=1, description="scoring processes (default: the usable cores)")
    token: str | None = Field(
        default=None,
        description="bearer token required on every path but the probes and "
        "/docs (unset: no auth); the client sends the same variable",
    )
    max_body_bytes: int = Field(default=64 * 1024 * 1024, ge=1024, description="larger request bodies get 413")
    max_items: int = Field(
        default=16384, ge=1, description="items (or completions, summed over groups) per request; more get 422"
    )
    max_queue_items: int = Field(
        default=65536,
        ge=1,
        description="items admitted and not yet answered, over all requests; more get 429 (at least max_items)",
    )
    max_sessions: int = Field(
        default=512, ge=1, description="environment sessions open at once (/v1/sessions); more get 503 with Retry-After"
    )
    task_dirs: str = Field(
        default="",
        description="folders (comma-separated) whose task files and Harbor task directories /v1/sessions may open by "
        "path (empty: only the named sources bfcl, harbor, demo)",
    )
    deadline_s: float = Field(
        default=300.0, gt=0, description="per-request deadline in seconds; a request may ask for a shorter one"
    )
    chunk_items: int = Field(default=32, ge=1, description="at most this many items go to a worker in one task")
    max_attempts: int = Field(default=3, ge=1, description="tries per task when worker processes die under it")
    stuck_grace_s: float = Field(
        default=30.0,
        gt=0,
        description="a task still running this long after its request gave up: its workers are replaced",
    )
    worker_memory_mb: int = Field(
        default=4096,
        ge=0,
        description=(
            f"address-space cap of each scoring process in MB (0: none, else at least {MIN_WORKER_MEMORY_MB}); an item "
            "that hits it gets an error verdict. The bounded workers read the same variable"
        ),
    )
    openrlhf_verifier: str = Field(default="math", description="kind /get_reward scores plain-text labels with")
    openrlhf_reward: str = Field(
        default="",
        description="the reward spec (JSON) /get_reward scores with when a request names none: OpenRLHF cannot send "
        "one (empty: each label's own kind)",
    )
    math_defaults: str = Field(
        default="",
        description=(
            "server-side defaults of the math item's conventions, a JSON object such as '{\"profile\": "
            '"math_verify"}\': applied to every math item that leaves the option out (docs/verifiers/math-answers.md)'
        ),
    )
    require_sandbox: bool = Field(
        default=False,
        description=(
            "not ready (/readyz 503, the Ray deployment's health check fails) while the sandbox cannot run a program; "
            "the Ray deployment turns it on"
        ),
    )
    debug: bool = Field(
        default=False, description="test hooks (/debug/workers, metadata.debug_sleep_s); never in production"
    )

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise SettingsError(_one_line(exc, given=set(values))) from None

    @field_validator("openrlhf_verifier")
    @classmethod
    def _known_kind(cls, value: str) -> str:
        if value not in KIND_NAMES:
            raise ValueError(f"not a verifier kind; known: {', '.join(KIND_NAMES)}")
        return value

    @field_validator("worker_memory_mb")
    @classmethod
    def _startable(cls, value: int) -> int:
        if value != 0 and value < MIN_WORKER_MEMORY_MB:
            raise ValueError(f"a scoring process needs {MIN_WORKER_MEMORY_MB} MB of address space to start")
        return value

    @field_validator("openrlhf_reward")
    @classmethod
    def _reward_spec(cls, value: str) -> str:
        if value:
            from groupscore.verifiers.composite import CheckedRewardSpec

            CheckedRewardSpec.model_validate_json(value)  # a bad spec fails here, at start-up
        return value

    def openrlhf_default_reward(self) -> Any:
        """`openrlhf_reward` as a checked spec, or None."""
        if not self.openrlhf_reward:
            return None
        from groupscore.verifiers.composite import CheckedRewardSpec

        return CheckedRewardSpec.model_validate_json(self.openrlhf_reward)

    @field_validator("math_defaults")
    @classmethod
    def _math_options(cls, value: str) -> str:
        math_default_options(value)  # a bad value fails here, at start-up, in one line
        return value

    @model_validator(mode="after")
    def _a_request_fits_the_queue(self) -> Settings:
        if self.max_queue_items < self.max_items:
            raise ValueError(
                f"{ENV_PREFIX}MAX_QUEUE_ITEMS ({self.max_queue_items}) is below {ENV_PREFIX}MAX_ITEMS "
                f"({self.max_items}): a request must fit the queue; raise the one or lower the other"
            )
        return self

    def math_default_options(self) -> dict[str, Any]:
        """`math_defaults` as a dict of math item options, checked against the math item's own schema."""
        return math_default_options(self.math_defaults)

    @classmethod
    def from_env(cls, **overrides: Any) -> Settings:
        """Settings from GROUPSCORE_<FIELD> variables, then `overrides` (None values are ignored)."""
        return cls(**{k: v for k, v in overrides.items() if v is not None})

    def with_(self, **changes: Any) -> Settings:
        """A copy with `changes`, checked like the original."""
        return type(self)(**{**self.model_dump(), **changes})


def task_dirs_adding(folders: list[str], to: str | None = None) -> str:
    """`to` (unset: GROUPSCORE_TASK_DIRS as set here) with `folders` added, never in its place: the task folders of a
    service this process starts, so that it may open the task files a run names as well as the user's."""
    given = os.environ.get(ENV_PREFIX + "TASK_DIRS", "") if to is None else to
    return ",".join(dict.fromkeys([*(d for d in given.split(",") if d.strip()), *folders]))


def math_default_options(text: str) -> dict[str, Any]:
    """A `math_defaults` text as a dict of math item options, checked against the math item's own schema."""
    if not text.strip():
        return {}
    fix = 'give a JSON object of math options, e.g. \'{"profile": "math_verify"}\''
    try:
        options = json.loads(text)
    except ValueError:
        raise ValueError(f"math_defaults is not JSON: {fix}") from None
    if not isinstance(options, dict):
        raise ValueError(f"math_defaults must be a JSON object: {fix}")
    unknown = sorted(set(options) - set(MATH_DEFAULTABLE))
    if unknown:
        raise ValueError(
            f"math_defaults: {', '.join(unknown)} cannot have a server default; options that can: "
            f"{', '.join(MATH_DEFAULTABLE)}"
        )
    from groupscore.verifiers.math.item import MathItem
    from groupscore.verifiers.registry import describe_error

    try:
        MathItem(completion="", answer="0", **options)
    except ValidationError as exc:
        raise ValueError(f"math_defaults: {describe_error(exc)}") from None
    return options


def _one_line(exc: ValidationError, given: set[str]) -> str:
    """Each problem as `NAME=value: what is wrong`, NAME the argument when one gave the value, else the variable, with
    what the setting takes and its default where the check was pydantic's (a type or a bound); all on one line."""
    problems = []
    for error in exc.errors(include_url=False):
        message = str(error["msg"]).removeprefix("Value error, ")
        if not error["loc"]:  # a check across fields: its message names the variables
            problems.append(message)
            continue
        name = str(error["loc"][0])
        label = name if name in given else f"{ENV_PREFIX}{name.upper()}"
        problem = f"{label}={error.get('input')!r}: {message}"
        field = Settings.model_fields.get(name)
        if field is not None and error["type"] != "value_error":  # our own checks say what to give in their words
            default = field.get_default(call_default_factory=True)
            problem += f" [{label}: {field.description}; default {default!r}]"
        problems.append(problem)
    return " | ".join(problems)


def describe() -> list[tuple[str, str, str]]:
    """(variable, default, what it does) for every setting, in field order: `groupscore serve --help` prints them."""
    rows = []
    for name, field in Settings.model_fields.items():
        default = field.get_default(call_default_factory=True)
        shown = "unset" if default is None else repr(default) if isinstance(default, str) else str(default)
        if field.default_factory is not None:
            shown += " on this machine"  # computed here
        rows.append((f"{ENV_PREFIX}{name.upper()}", shown, field.description or ""))
    return rows


def help_text(width: int = 100) -> str:
    """The settings as `groupscore serve --help` shows them: each variable, its default, what it does."""
    lines = ["settings: each is read from its environment variable; an option above wins over its variable."]
    for name, default, what in describe():
        lines.append(f"  {name} (default {default})")
        lines += textwrap.wrap(what, width=width, initial_indent="      ", subsequent_indent="      ")
    lines.append(
        "The scoring processes also read the verifiers', the sandbox's and the bounded workers' settings "
        "(docs/service/settings.md)."
    )
    return "\n".join(lines)
