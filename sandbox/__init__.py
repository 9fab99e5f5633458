"""Isolated, timed, no-network code execution on nsjail. Imports nothing else of groupscore.

    from groupscore.sandbox import run, run_many, Limits, RunResult, SandboxUnavailable
    r = run({"main.py": "print(input())"}, stdin="hi", limits=Limits(wall_time_s=2))
    r.status, r.stdout            # Status.OK, "hi\\n"

Results leave the jail through stdout/stderr and through `collect=[...]` files (RunResult.files).
"""

from groupscore.sandbox.errors import BadRunRequest, SandboxUnavailable
from groupscore.sandbox.limits import COMPILE_LIMITS, Limits
from groupscore.sandbox.policy import Policy
from groupscore.sandbox.pool import RunRequest, default_workers, run_many
from groupscore.sandbox.result import CompileResult, RunResult, Status
from groupscore.sandbox.runner import ensure_available, run

__all__ = [
    "BadRunRequest", "COMPILE_LIMITS", "CompileResult", "Limits", "Policy", "RunRequest", "RunResult", "SandboxUnavailable",
    "Status", "default_workers", "ensure_available", "run", "run_many", "policy_for",
]


def policy_for(language: str = "python", limits: Limits | None = None, *, compile_step: bool = False) -> Policy:
    """The policy a run of `language` gets on this host (what `groupscore sandbox policy` prints)."""
    from groupscore.sandbox.policy import build_policy
    from groupscore.sandbox.toolchains import toolchain

    return build_policy(toolchain(language), limits or Limits(), compile_step=compile_step)
