"""The client's settings: where the service is (GROUPSCORE_URL) and its token (GROUPSCORE_TOKEN), read with
pydantic-settings.

Used where a trainer's hook has no other way to say it (verl's `compute_score`, `groupscore check` against a URL);
code that makes a ScoreClient itself passes its own. Read at each `load` (a trainer's hook makes its client once).
A bad value is a ValueError in one line naming the variable and what it takes. Imports nothing of ours.
"""

from __future__ import annotations

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

ENV_PREFIX = "GROUPSCORE_"
DEFAULT_URL = "http://127.0.0.1:8000"


class TokenSettings(BaseSettings):
    """The token alone: a caller given its URL needs no valid GROUPSCORE_URL (`groupscore check --target URL`)."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_ignore_empty=True, frozen=True, extra="ignore")

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
        urls = [u.strip() for u in value.split(",") if u.strip()]
        if not urls:
            raise ValueError("no URL given")
        for url in urls:
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"{url!r} is not an http:// or https:// URL")
        return ",".join(urls)

    @property
    def urls(self) -> list[str]:
        """`url` as a list, one entry per service."""
        return self.url.split(",")


def token() -> str | None:
    """GROUPSCORE_TOKEN as the environment holds it now (GROUPSCORE_URL is neither read nor checked)."""
    return TokenSettings().token


def load() -> ClientSettings:
    """The settings as the environment holds them now."""
    try:
        return ClientSettings()
    except ValidationError as exc:
        problems = []
        for error in exc.errors(include_url=False):
            field = str(error["loc"][0])
            message = str(error["msg"]).removeprefix("Value error, ")
            problems.append(
                f"{ENV_PREFIX}{field.upper()}={error.get('input')!r}: {message} "
                f"(give {ClientSettings.model_fields[field].description})"
            )
        raise ValueError(" | ".join(problems)) from None
