"""Harbor's `task.toml`, validated: a pydantic mirror of the fields Harbor's `TaskConfig` reads (names and defaults as
Harbor 0.26 has them), and what each becomes here.

Every field is honoured or the task is refused in one line naming it; nothing is dropped without a word:

- `[agent] timeout_sec`: the episode's time (`EpisodeLimits.episode_time_s`);
- `[verifier] timeout_sec` and `env`: the tests checker's time limit and environment;
- `[environment] memory_mb` (legacy `memory = "2G"`) and `storage_mb` (`storage`): the session's memory and disk;
- `[environment] cpus`: kept in metadata; a jail is not capped below the host's cores, so it has what is asked
  wherever the host has it;
- `[environment] env` and `workdir`: the task's environment (over the Dockerfile's `ENV`) and work dir (which must
  agree with the Dockerfile's `WORKDIR`: a jail's state is its work dir);
- `[environment] build_timeout_sec`: the time of each `RUN` step of the Dockerfile's build (at most 600 s);
- `[solution] env`: the environment the oracle (`solution/solve.sh`) is played with;
- refused: `[environment] gpus`, `tpu`, `os` other than linux, `mcp_servers`, `docker_image` without a Dockerfile, and
  `${VAR}` in any `env` value (no variable of the host reaches a jail);
- noted in `metadata["task_toml_notes"]`: network (a jail has none), `user` (a jail has one), `healthcheck` (a jail
  starts ready), a verifier environment of its own (every checker runs in a fresh jail), and keys not read.
"""

from __future__ import annotations

import math
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

# What this mirror does not read is ignored, as Harbor ignores keys it does not know; the loader says which.
_OPEN = ConfigDict(extra="allow", frozen=True)
_TEMPLATE = re.compile(r"\$\{")
MAX_EPISODE_S = MAX_VERIFIER_S = 3480.0  # task.MAX_EPISODE_S: a jail's hour less the host's two minutes


def _size_mb(text: str) -> int:
    """'2G', '512M', '1024K' as MB (Harbor's legacy `memory` and `storage`)."""
    units = {"G": 1024, "M": 1, "K": 1 / 1024}
    size = text.strip().upper()
    if not size or size[-1] not in units:
        raise ValueError(f"{text!r} is not a size like '2G' or '512M'")
    return int(float(size[:-1]) * units[size[-1]])


def _no_templates(env: dict[str, str]) -> dict[str, str]:
    for key, value in env.items():
        if _TEMPLATE.search(value):
            raise ValueError(f"{key}: ${{...}} names a variable of the host, and none reaches a jail; give the value")
    return env


class _Env(BaseModel):
    model_config = _OPEN

    env: dict[str, str] = Field(default_factory=dict)

    @field_validator("env")
    @classmethod
    def _literal(cls, env: dict[str, str]) -> dict[str, str]:
        return _no_templates(env)


class AgentConfig(BaseModel):
    model_config = _OPEN

    timeout_sec: float | None = Field(None, gt=0, le=MAX_EPISODE_S)
    user: str | int | None = None


class VerifierConfig(_Env):
    timeout_sec: float = Field(600.0, gt=0, le=MAX_VERIFIER_S)
    user: str | int | None = None
    environment: dict[str, Any] | None = None


class SolutionConfig(_Env):
    pass


class EnvironmentConfig(_Env):
    build_timeout_sec: float = Field(600.0, gt=0, le=24 * 3600.0)
    docker_image: str | None = None
    os: str = "linux"
    cpus: float | None = Field(None, gt=0)
    memory_mb: int | None = Field(None, ge=32)
    storage_mb: int | None = Field(None, ge=1)
    gpus: int | None = Field(None, ge=0)
    tpu: dict[str, Any] | None = None
    mcp_servers: list[dict[str, Any]] = Field(default_factory=list)
    workdir: str | None = None
    healthcheck: dict[str, Any] | None = None
    network_mode: str | None = None
    allow_internet: bool | None = None

    @model_validator(mode="before")
    @classmethod
    def _legacy_sizes(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for old, new in (("memory", "memory_mb"), ("storage", "storage_mb")):
            if isinstance(data.get(old), str):
                size = _size_mb(data.pop(old))
                if data.get(new) not in (None, size):
                    raise ValueError(f"{old} ({size} MB) and {new} ({data[new]}) disagree: give one")
                data[new] = size
        return data

    @field_validator("cpus")
    @classmethod
    def _finite(cls, cpus: float | None) -> float | None:
        if cpus is not None and not math.isfinite(cpus):
            raise ValueError("cpus must be a finite number")
        return cpus

    @field_validator("os")
    @classmethod
    def _linux(cls, os_name: str) -> str:
        if os_name.lower() != "linux":
            raise ValueError(f"{os_name!r}: a jail is Linux; give 'linux' or leave it out")
        return "linux"

    @field_validator("gpus")
    @classmethod
    def _no_gpus(cls, gpus: int | None) -> int | None:
        if gpus:
            raise ValueError("a jail has no GPU; give 0 or leave it out")
        return gpus

    @field_validator("tpu")
    @classmethod
    def _no_tpu(cls, tpu: dict[str, Any] | None) -> dict[str, Any] | None:
        if tpu:
            raise ValueError("a jail has no TPU; leave it out")
        return tpu

    @field_validator("mcp_servers")
    @classmethod
    def _no_mcp(cls, servers: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if servers:
            raise ValueError("MCP servers are not run beside a jail; leave them out")
        return servers

    @field_validator("workdir")
    @classmethod
    def _absolute(cls, workdir: str | None) -> str | None:
        if workdir is not None and not workdir.startswith("/"):
            raise ValueError(f"{workdir!r}: an absolute path, e.g. /app")
        return workdir


class TaskConfig(BaseModel):
    """task.toml. `metadata` is free-form, as in Harbor."""

    model_config = _OPEN

    version: str = "1.0"
    metadata: dict[str, Any] = Field(default_factory=dict)
    verifier: VerifierConfig = VerifierConfig()
    agent: AgentConfig = AgentConfig()
    environment: EnvironmentConfig = EnvironmentConfig()
    solution: SolutionConfig = SolutionConfig()
    source: str | None = None

    def notes(self) -> list[str]:
        """What the task asks that a jail does differently (said, not refused), and the keys this mirror ignores."""
        env, out = self.environment, []
        if env.allow_internet or env.network_mode not in (None, "none", "no-network"):
            out.append("environment: a jail has no network (tests that download anything will fail)")
        for section, user in (("agent", self.agent.user), ("verifier", self.verifier.user)):
            if user is not None:
                out.append(f"{section}.user: a jail runs as its one user")
        if env.healthcheck:
            out.append("environment.healthcheck: not run (a jail starts ready)")
        if self.verifier.environment:
            out.append("verifier.environment: the checker runs in a fresh jail of the task's own environment")
        for where, model in (("", self), *((f"{n}.", getattr(self, n)) for n in ("verifier", "agent", "environment"))):
            out += [f"{where}{key}: not read" for key in sorted(model.model_extra or {})]
        return out


def parse_task_config(data: dict[str, Any]) -> TaskConfig:
    """The validated config, or ValueError with one line naming the first bad field and its fix."""
    try:
        return TaskConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        field = ".".join(str(p) for p in first["loc"]) or "task.toml"
        message = str(first["msg"]).removeprefix("Value error, ")
        raise ValueError(f"task.toml: {field}: {message}") from None
