"""Endpoints speaking other tools' wire protocols: OpenRLHF's remote reward (`/get_reward`) and SandboxFusion
(`/run_code`, `/v1/ping`). Their bodies are wire models (`groupscore.schema.openrlhf`,
`groupscore.schema.sandboxfusion`).

Both go through the same dispatcher, pool and verifiers as `/v1/score`: nothing here scores or runs code itself.
"""

from __future__ import annotations

import base64
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import Field

from groupscore.schema import openrlhf
from groupscore.schema.columns import MissingColumn, check_columns
from groupscore.schema.openrlhf import OpenRLHFResponse, extra_logs, label_item, response_text
from groupscore.schema.sandboxfusion import SANDBOX_LANGUAGE_OF, RunCodeRequest, RunCodeResponse
from groupscore.service.responses import json_response, too_many_items, validation_error_response
from groupscore.service.routing import OffloadingRoute
from groupscore.verifiers.composite import CheckedRewardSpec

router = APIRouter(route_class=OffloadingRoute)


# -- OpenRLHF -------------------------------------------------------------------------------------------------------


class OpenRLHFRequest(openrlhf.OpenRLHFRequest):
    """The wire model, with its reward spec checked against the kinds when the body is parsed (a 422, not an error
    verdict on every sample)."""

    reward: CheckedRewardSpec | None = Field(default=None, description="groupscore extension: a composite reward.")


@router.post(
    "/get_reward",
    response_model=OpenRLHFResponse,
    tags=["adapters"],
    responses={422: {"description": "Invalid request"}, 429: {"description": "Queue full; see Retry-After"}},
)
async def openrlhf_get_reward(body: OpenRLHFRequest, request: Request) -> Response:
    """OpenRLHF remote reward: `--remote_rm_url http://host:port/get_reward`."""
    settings = request.app.state.settings
    if len(body.query) > settings.max_items:
        return too_many_items("query", len(body.query), settings.max_items)
    raw_items = [
        {**label_item(label, settings.openrlhf_verifier), "id": index, "completion": response_text(query, prompt)}
        for index, (query, prompt, label) in enumerate(zip(body.query, body.prompts, body.labels))
    ]
    try:  # labels that hold no reference at all (no --label_key, or the wrong column) would score every sample 0
        check_columns(
            "/get_reward",
            raw_items,
            ["labels"],
            "start OpenRLHF with --label_key naming the dataset's "
            "reference column, so that each label gives the item {mapping}",
        )
    except MissingColumn as exc:
        return validation_error_response([{"loc": ("body", "labels"), "msg": str(exc), "type": "missing"}])
    reward = body.reward if body.reward is not None else settings.openrlhf_default_reward()  # OpenRLHF sends none
    verdicts = await request.app.state.dispatcher.score(raw_items, reward)
    # OpenRLHF has no "no reward" value: an infra_error sample gets reward 0.0 and infra_error 1.0 in extra_logs, so
    # a run can filter or at least see them (docs/scoring.md).
    rewards = [v["reward"] for v in verdicts]
    logs = extra_logs(verdicts, [c.name for c in reward.components] if reward else [])
    return json_response({"rewards": rewards, "scores": rewards, "extra_logs": logs})


# -- SandboxFusion ----------------------------------------------------------------------------------------------------


def _command_result(
    status: str,
    wall_time_s: float,
    exit_code: int | None,
    signal: int | None,
    stdout: str,
    stderr: str,
    error: str | None,
) -> dict[str, Any]:
    if status == "timeout":
        state = "TimeLimitExceeded"
    elif status == "sandbox_error":
        state = "Error"
    else:  # the program ran and ended by itself or was stopped for memory or output: SandboxFusion says Finished
        state = "Finished"
    return_code = exit_code if exit_code is not None else (-signal if signal else None)
    if state == "Finished" and return_code is None:
        return_code = 1
    if error and status not in ("ok", "runtime_error"):
        stderr = f"{stderr}\n[sandbox] {error}" if stderr else f"[sandbox] {error}"
    return {
        "status": state,
        "execution_time": wall_time_s,
        "return_code": return_code,
        "stdout": stdout,
        "stderr": stderr,
    }


def sandbox_fusion_response(result: Any) -> dict[str, Any]:
    """SandboxFusion's response for a sandbox RunResult (same rules for Success / Failed / SandboxError)."""
    compile_result = None
    if result.compile is not None:
        c = result.compile
        compile_result = _command_result(c.status.value, c.wall_time_s, c.exit_code, c.signal, c.stdout, c.stderr, None)
    run_result = None
    if result.status.value != "compile_error":
        run_result = _command_result(
            result.status.value,
            result.wall_time_s,
            result.exit_code,
            result.signal,
            result.stdout,
            result.stderr,
            result.error,
        )
    outcomes = [r for r in (compile_result, run_result) if r is not None]
    if any(r["status"] == "Error" for r in outcomes):
        status, message = "SandboxError", result.error or "sandbox error"
    elif any(r["status"] == "TimeLimitExceeded" for r in outcomes) or any(r["return_code"] for r in outcomes):
        status, message = "Failed", ""
    else:
        status, message = "Success", ""
    files = {path: base64.b64encode(content).decode() for path, content in result.files.items()}
    return {
        "status": status,
        "message": message,
        "compile_result": compile_result,
        "run_result": run_result,
        "executor_pod_name": None,
        "files": files,
    }


@router.get("/v1/ping", tags=["adapters"], response_model=str)
async def sandbox_fusion_ping() -> Response:
    """SandboxFusion's liveness probe: `"pong"` (its clients and health checks call it before sending code)."""
    return json_response("pong")


def unsupported_language(language: str, supported: tuple[str, ...]) -> dict[str, Any]:
    """What SandboxFusion itself answers for a language whose toolchain it lacks: `Failed`, with the command ended
    by the shell's 127 and the reason on stderr (bytedance/SandboxFusion#65: `/bin/bash: go: command not found`).
    Not `SandboxError`, which its client retries five times (with backoff) as a failure of the sandbox."""
    return {
        "status": "Failed",
        "message": "",
        "compile_result": None,
        "run_result": {
            "status": "Finished",
            "execution_time": 0.0,
            "return_code": 127,
            "stdout": "",
            "stderr": f"groupscore: language {language!r} is not supported by this service; "
            f"its sandbox runs {', '.join(supported)}\n",
        },
        "executor_pod_name": None,
        "files": {},
    }


@router.post(
    "/run_code",
    response_model=RunCodeResponse,
    tags=["adapters"],
    responses={422: {"description": "Invalid request"}, 429: {"description": "Queue full; see Retry-After"}},
)
async def sandbox_fusion_run_code(body: RunCodeRequest, request: Request) -> Response:
    """SandboxFusion-compatible code run (verl's sandbox_fusion reward can point here); always in the nsjail sandbox."""
    state = request.app.state
    # SandboxFusion's name -> the sandbox's ("nodejs" -> "javascript"); SandboxFusion names more languages than the
    # sandbox runs, and the map has every one it does (tests/service/test_service_run_code_languages.py checks both
    # lists).
    language = SANDBOX_LANGUAGE_OF.get(body.language)
    if language is None:
        return json_response(unsupported_language(body.language, tuple(SANDBOX_LANGUAGE_OF)))
    fields = {
        "code": body.code,
        "language": language,
        "stdin": body.stdin or "",
        "run_timeout_s": body.run_timeout,
        "compile_timeout_s": body.compile_timeout,
        "memory_mb": body.memory_limit_MB if body.memory_limit_MB > 0 else None,
        "files": {path: content or "" for path, content in body.files.items()},
        "fetch_files": tuple(body.fetch_files),
    }
    outcome, value = await state.dispatcher.run_code(fields)  # admission, retries and metrics are the dispatcher's
    if outcome != "ok":
        return json_response(
            {
                "status": "SandboxError",
                "message": value,
                "compile_result": None,
                "run_result": None,
                "executor_pod_name": None,
                "files": {},
            }
        )
    answer = sandbox_fusion_response(value)
    if answer["status"] == "SandboxError":
        state.metrics.sandbox_failures.inc()
    return json_response(answer)
