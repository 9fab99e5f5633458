"""Running one caller-supplied program in the sandbox (what the service's SandboxFusion-compatible `/run_code` needs).

The verifiers layer is the only way from the service to the sandbox; this module adds no isolation of its own and
never runs anything outside `groupscore.sandbox.run`.
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

# SandboxUnavailable and LANGUAGES are re-exported: callers above the verifiers (the service's runtime and its
# /run_code endpoint) take them from here, never from the sandbox itself.
__all__ = ["DEFAULT_MEMORY_MB", "LANGUAGES", "ProgramRun", "SandboxUnavailable", "decode_files", "run_program"]

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
