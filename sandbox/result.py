"""Typed outcome of a sandboxed run (and of its compile step)."""

from __future__ import annotations

from enum import Enum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class RunStatus(str, Enum):
    OK = "ok"
    RUNTIME_ERROR = "runtime_error"  # non-zero exit or killed by a signal we did not send for a limit
    TIMEOUT = "timeout"  # wall clock or CPU time limit
    MEMORY_LIMIT = "memory_limit"  # cgroup OOM kill, or the program's own out-of-memory error
    OUTPUT_LIMIT = "output_limit"  # stdout or stderr went past max_output_bytes; the run was stopped
    COMPILE_ERROR = "compile_error"  # a compiled language's compile step failed; see RunResult.compile
    SANDBOX_ERROR = "sandbox_error"  # the jail failed for this run (bad request, setup error); see error


class CompileResult(BaseModel):
    """The compile step of a compiled language's run (C, C++, TypeScript, Java, Go, Rust): itself a sandboxed run of
    the compiler with its own limits."""

    model_config = ConfigDict(frozen=True)

    status: RunStatus
    exit_code: int | None = None
    signal: int | None = None
    stdout: str = ""
    stderr: str = ""
    wall_time_s: float = 0.0
    cpu_time_s: float = 0.0
    peak_memory_mb: float | None = None
    command: list[str] = Field(default_factory=list)
    cached: bool = False  # the same sources were compiled before in this process; that binary was reused


class RunResult(BaseModel):
    """What happened in one run. stdout/stderr are decoded as UTF-8 (undecodable bytes replaced)."""

    model_config = ConfigDict(frozen=True, ser_json_bytes="base64", val_json_bytes="base64")

    status: RunStatus
    exit_code: int | None = None  # set when the program exited by itself
    signal: int | None = None  # set when it was killed by a signal (ours or its own)
    stdout: str = ""
    stderr: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    wall_time_s: float = 0.0
    cpu_time_s: float = 0.0  # user+sys of the whole reaped tree, from wait4
    peak_memory_mb: float | None = None  # whole-tree peak from the cgroup, else max RSS of one process
    files: dict[str, bytes] = Field(default_factory=dict)  # the `collect` paths, as written by the program
    files_truncated: list[str] = Field(default_factory=list)
    compile: CompileResult | None = None
    cgroup: str = ""  # which cgroup limits applied, e.g. "v1 memory+pids" or "none: <why>"
    launcher: Literal["nsjail", "warm"] | None = None  # what started the program's jail (None: it never ran)
    fallback: str | None = None  # why a run the warm launcher could have taken went through nsjail
    error: str | None = None  # harness message for sandbox_error (and limit details)

    @property
    def ok(self) -> bool:
        return self.status is RunStatus.OK


def launch_summary(results: list[RunResult]) -> dict[str, object]:
    """How a set of runs (an item's) started, for a verdict's details: runs per launcher ("warm", "nsjail"), and why
    any that could have been warm went through nsjail (each reason once)."""
    launchers: dict[str, int] = {}
    for result in results:
        if result.launcher is not None:
            launchers[result.launcher] = launchers.get(result.launcher, 0) + 1
    fallbacks = sorted({result.fallback for result in results if result.fallback})
    return {"launchers": launchers, **({"fallbacks": fallbacks} if fallbacks else {})}
