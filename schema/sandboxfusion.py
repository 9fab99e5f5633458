"""SandboxFusion's `/run_code` protocol (verl's sandbox_fusion reward speaks it): its request and answer bodies.

Which languages this service runs, and how a sandbox run maps to an answer, is the handler's business
(`groupscore.service.protocols`); the models here are the protocol as SandboxFusion defines it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

# SandboxFusion's language names (the service answers SandboxError for those its sandbox does not run).
SandboxFusionLanguage = Literal[
    "python",
    "cpp",
    "c",
    "nodejs",
    "go",
    "go_test",
    "java",
    "php",
    "csharp",
    "bash",
    "typescript",
    "sql",
    "rust",
    "cuda",
    "lua",
    "R",
    "perl",
    "D_ut",
    "ruby",
    "scala",
    "julia",
    "pytest",
    "junit",
    "kotlin_script",
    "jest",
    "verilog",
    "python_gpu",
    "lean",
    "swift",
    "racket",
]

# SandboxFusion's name of a language -> groupscore's sandbox's name (groupscore.sandbox.LANGUAGES), for the languages
# both run: the one place the two sets of names meet. SandboxFusion's other names (go_test, jest, pytest, ...) are
# test-runner modes or languages the sandbox does not run; the service answers "not supported" for those.
SANDBOX_LANGUAGE_OF: dict[str, str] = {
    "python": "python",
    "c": "c",
    "cpp": "cpp",
    "nodejs": "javascript",
    "typescript": "typescript",
    "java": "java",
    "go": "go",
    "rust": "rust",
    "bash": "bash",
}


class RunCodeRequest(BaseModel):
    """SandboxFusion's /run_code request."""

    model_config = ConfigDict(extra="ignore")

    compile_timeout: float = Field(default=10.0, gt=0.0, le=600.0)
    run_timeout: float = Field(default=10.0, gt=0.0, le=600.0)
    memory_limit_MB: int = Field(default=-1, description="-1: the sandbox's default (512 MB); always limited here.")
    code: str
    stdin: str | None = None
    language: SandboxFusionLanguage
    files: dict[str, str | None] = Field(default_factory=dict, description="path -> base64 content")
    fetch_files: list[str] = Field(default_factory=list)
    args: list[str] = Field(default_factory=list, description="Accepted for compatibility; pytest mode is not offered.")


class CommandRunResult(BaseModel):
    """One command's outcome (the compile or the run)."""

    status: Literal["Finished", "Error", "TimeLimitExceeded"]
    execution_time: float | None = None
    return_code: int | None = None
    stdout: str | None = None
    stderr: str | None = None


class RunCodeResponse(BaseModel):
    status: Literal["Success", "Failed", "SandboxError"]
    message: str
    compile_result: CommandRunResult | None = None
    run_result: CommandRunResult | None = None
    executor_pod_name: str | None = None
    files: dict[str, str] = Field(default_factory=dict)
