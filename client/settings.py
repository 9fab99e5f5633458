"""The client's settings: where the service is (GROUPSCORE_URL) and its token (GROUPSCORE_TOKEN).

Used where a trainer's hook has no other way to say it (verl's `compute_score` without `reward_kwargs`, OpenRLHF's
reward_func file, `groupscore check` against a URL); code that makes a ScoreClient itself passes its own, and verl's
`reward_kwargs` win over these variables (they often do not reach Ray workers). Read at each `load`. A bad value is a
ValueError in one line naming the variable and what it takes. Imports nothing of ours.

Read by hand into a pydantic model, not with pydantic-settings: this module ships in groupscore-client, whose only
dependencies are httpx, pydantic and orjson. As with the other parts' settings, an empty variable counts as unset.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

ENV_PREFIX = "GROUPSCORE_"
DEFAULT_URL = "http://127.0.0.1:8000"


def _from_env(fields: Iterable[str]) -> dict[str, str]:
    """The variables of these fields that are set and not empty, by field name."""
    values = {}
    for name in fields:
        value = os.environ.get(f"{ENV_PREFIX}{name.upper()}", "")
        if value != "":
            values[name] = value
    return values


def _one_line(exc: ValidationError, model: type[BaseModel]) -> ValueError:
    problems = []
    for error in exc.errors(include_url=False):
        field = str(error["loc"][0])
        message = str(error["msg"]).removeprefix("Value error, ")
        problems.append(
            f"{ENV_PREFIX}{field.upper()}={error.get('input')!r}: {message} "
            f"(give {model.model_fields[field].description})"
        )
    return ValueError(" | ".join(problems))


def http_urls(value: str) -> str:
    """One URL, or several separated by commas, each http:// or https://; ValueError naming the bad one."""
    urls = [u.strip() for u in value.split(",") if u.strip()]
    if not urls:
        raise ValueError("no URL given")
    for url in urls:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"{url!r} is not an http:// or https:// URL")
    return ",".join(urls)


class TokenSettings(BaseModel):
    """The token alone: a caller given its URL needs no valid GROUPSCORE_URL (`groupscore check --target URL`)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    token: str | None = Field(
        default=None, description="bearer token the client sends (the service's GROUPSCORE_TOKEN)"
    )


class ClientSettings(TokenSettings):
    url: str = Field(
        default=DEFAULT_URL,
        description=(
            "the scoring service's base URL, or several separated by commas (batches are sharded across them)"
        ),
    )

    @field_validator("url")
    @classmethod
    def _http_urls(cls, value: str) -> str:
        return http_urls(value)

    @property
    def urls(self) -> list[str]:
        """`url` as a list, one entry per service."""
        return self.url.split(",")


def token() -> str | None:
    """GROUPSCORE_TOKEN as the environment holds it now (GROUPSCORE_URL is neither read nor checked)."""
    return TokenSettings(**_from_env(TokenSettings.model_fields)).token


def load() -> ClientSettings:
    """The settings as the environment holds them now."""
    try:
        return ClientSettings(**_from_env(ClientSettings.model_fields))
    except ValidationError as exc:
        raise _one_line(exc, ClientSettings) from None
