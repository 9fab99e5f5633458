"""Programs run as they are in the sandbox, judged by no verifier: a caller's program (SandboxFusion's `/run_code`,
run by a scoring worker: `tasks.run_code_task`) and the readiness probe (can a jail start and run a program now).

These are the runtime's only direct use of the sandbox (scoring reaches it through the verifiers); this module adds no
isolation of its own and never runs anything outside `groupscore.sandbox.run`.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field

from groupscore.sandbox import (
    LANGUAGES,
    MAIN_FILE,
    Limits,
    RunResult,
    SandboxUnavailable,
    compile_limits_for,
    run,
)

DEFAULT_MEMORY_MB = Limits().memory_mb  # the sandbox's own default for a run


@dataclass(frozen=True)
class ProgramRun:
    code: str
    language: str = "python"
    stdin: str = ""
    run_timeout_s: float = 10.0
    compile_timeout_s: float = 10.0
    memory_mb: int | None = None  # None: DEFAULT_MEMORY_MB
    files: dict[str, str] = field(default_factory=dict)  # relative path -> base64 content
    fetch_files: tuple[str, ...] = ()


def decode_files(files: dict[str, str]) -> dict[str, bytes]:
    """Base64 file contents as bytes (ValueError naming the file when one is not base64)."""
    decoded = {}
    for path, content in files.items():
        try:
            decoded[path] = base64.b64decode(content or "", validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(f"files[{path!r}] is not base64") from None
    return decoded


def run_program(request: ProgramRun) -> RunResult:
    """Run the program in a fresh jail; raises SandboxUnavailable when no jail can start, ValueError on bad input."""
    if request.language not in LANGUAGES:
        raise ValueError(f"language {request.language!r} is not supported here; supported: {', '.join(LANGUAGES)}")
    main = MAIN_FILE[request.language]
    files: dict[str, str | bytes] = {**decode_files(request.files), main: request.code}
    limits = Limits(wall_time_s=request.run_timeout_s, memory_mb=request.memory_mb or DEFAULT_MEMORY_MB)
    compile_limits = compile_limits_for(request.language).model_copy(update={"wall_time_s": request.compile_timeout_s})
    return run(
        files,
        language=request.language,
        main=main,
        stdin=request.stdin,
        limits=limits,
        collect=list(request.fetch_files),
        compile_limits=compile_limits,
    )


# The readiness probe: one harmless program in a fresh jail. The service's readiness asks (and through it the Ray
# deployment's health check), so a replica without a working sandbox is taken out of routing instead of answering code
# items with infra_error verdicts.
_PROBE = ProgramRun(code="print(6 * 7)", run_timeout_s=20.0)


def sandbox_problem() -> str | None:
    """None when a jail ran the probe program and it printed what it should; else why not, in one line."""
    try:
        result = run_program(_PROBE)
    except SandboxUnavailable as exc:
        return f"sandbox unavailable: {exc}"
    except Exception as exc:  # noqa: BLE001 - whatever stops the probe makes the sandbox unusable here
        return f"sandbox probe failed: {type(exc).__name__}: {exc}"
    if result.status.value != "ok" or result.stdout.strip() != "42":
        why = result.error or result.stderr.strip()[-200:] or f"printed {result.stdout[:40]!r}"
        return f"sandbox probe jail ended {result.status.value}: {why}".replace("\n", " ")
    return None
