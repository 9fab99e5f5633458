"""The verifiers' settings: GROUPSCORE_SQL_FIXTURES, read with pydantic-settings once per process, on first use
(`current`); tests that change it call `reload`. A bad value is a ValueError in one line naming the variable.

The sandbox and the bounded workers under the verifiers read their own (groupscore.sandbox.settings,
groupscore.bounded.settings).
"""

from __future__ import annotations

import functools
from pathlib import Path

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

ENV_PREFIX = "GROUPSCORE_"


class VerifierSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_ignore_empty=True, frozen=True, extra="ignore")

    sql_fixtures: Path | None = Field(
        default=None,
        description=(
            "folder of the SQL kind's fixture databases, one <name>.sql script each "
            "(default: the ones groupscore ships)"
        ),
    )


@functools.cache
def current() -> VerifierSettings:
    """This process's settings, read from the environment on first use."""
    try:
        return VerifierSettings()
    except ValidationError as exc:
        problems = [
            f"{ENV_PREFIX}{str(e['loc'][0]).upper()}={e.get('input')!r}: {e['msg']}"
            for e in exc.errors(include_url=False)
        ]
        raise ValueError(" | ".join(problems)) from None


def reload() -> None:
    """Forget what was read: the next `current()` reads the environment again (for tests that set a variable)."""
    current.cache_clear()
