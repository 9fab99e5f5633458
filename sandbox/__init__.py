"""Isolated, timed, no-network code execution. Imports nothing else of groupscore.

    from groupscore.sandbox import run, run_many, Limits, RunResult, SandboxUnavailable
    r = run({"main.py": "print(input())"}, stdin="hi", limits=Limits(wall_time_s=2))
    r.status, r.stdout            # RunStatus.OK, "hi\\n"

One harness (harness.py: the run's dir, cgroup slot, output caps, wall clock; classify.py: its status) and two
launchers beside it that apply the same `Policy` (policy.py): nsjail (nsjail_launcher.py, every language) and warm
Python templates (warm_launcher.py, warm.py, warm_template.py). RunResult.launcher says which ran a program.
Results leave the jail through stdout/stderr and through `collect=[...]` files (RunResult.files).
"""

from groupscore.sandbox.errors import BadRunRequest, SandboxUnavailable
from groupscore.sandbox.languages import compile_limits_for
from groupscore.sandbox.limits import COMPILE_LIMITS, Limits
from groupscore.sandbox.parallel import BAD_REQUEST, RunRequest, default_workers, run_many
from groupscore.sandbox.policy import Policy
from groupscore.sandbox.result import CompileResult, RunResult, RunStatus, launch_summary
from groupscore.sandbox.runner import ensure_available, run
from groupscore.sandbox.toolchains import LANGUAGES, MAIN_FILE

__all__ = [
    "BAD_REQUEST",
    "COMPILE_LIMITS",
    "LANGUAGES",
    "MAIN_FILE",
    "BadRunRequest",
    "CompileResult",
    "Limits",
    "Policy",
    "RunRequest",
    "RunResult",
    "RunStatus",
    "SandboxUnavailable",
    "compile_limits_for",
    "default_workers",
    "ensure_available",
    "launch_summary",
    "policy_for",
    "run",
    "run_many",
]


def policy_for(language: str = "python", limits: Limits | None = None, *, compile_step: bool = False) -> Policy:
    """The policy a run of `language` gets on this host (what `groupscore sandbox policy` prints)."""
    from groupscore.sandbox.policy import build_policy
    from groupscore.sandbox.toolchains import toolchain

    return build_policy(toolchain(language), limits or Limits(), compile_step=compile_step)
