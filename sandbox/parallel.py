"""Many sandboxed runs in parallel, up to a configured number of workers."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from groupscore.sandbox import settings as sandbox_settings
from groupscore.sandbox.errors import BadRunRequest, SandboxUnavailable
from groupscore.sandbox.limits import Limits
from groupscore.sandbox.result import RunResult, RunStatus
from groupscore.sandbox.runner import run

BAD_REQUEST = "bad run request"  # how run_many's sandbox_error result for a request it refused to run begins


class RunRequest(BaseModel):
    """The arguments of one `run` call, as data."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    files: dict[str, str | bytes]
    command: str | list[str] | None = None
    language: str = "python"
    main: str | None = None
    stdin: str | bytes = b""
    limits: Limits = Field(default_factory=Limits)
    collect: tuple[str, ...] = ()
    compile_limits: Limits | None = None  # None: the language's own (languages.py)
    compile_command: list[str] | None = None
    as_init: bool = False
    args: tuple[str, ...] = ()
    python_env: str | None = None


def default_workers() -> int:
    """$GROUPSCORE_SANDBOX_WORKERS, else the number of usable CPUs."""
    return sandbox_settings.current().workers or max(1, len(os.sched_getaffinity(0)))


def _one(request: RunRequest | dict[str, Any]) -> RunResult:
    try:
        req = request if isinstance(request, RunRequest) else RunRequest.model_validate(request)
        return run(**{name: getattr(req, name) for name in RunRequest.model_fields})
    except SandboxUnavailable:
        raise  # the whole batch cannot run; say so loudly
    except (
        ValidationError,
        BadRunRequest,
        UnicodeError,
    ) as exc:  # nothing else: our own failures are not the request's
        return RunResult(status=RunStatus.SANDBOX_ERROR, error=f"{BAD_REQUEST}: {exc}")


def run_many(requests: list[RunRequest | dict[str, Any]], workers: int | None = None) -> list[RunResult]:
    """Run each request in its own jail, `workers` at a time; results in request order.

    A malformed request yields a sandbox_error result for that request only; SandboxUnavailable
    (nsjail cannot start) is raised.
    """
    workers = workers or default_workers()
    if workers == 1 or len(requests) <= 1:
        return [_one(r) for r in requests]
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sandbox") as ex:
        return list(ex.map(_one, requests))
