"""The jails of environments: a session's (its work dir and /tmp writable, the host's /usr read-only for the shell's
programs) and a checker's (the same, plus /tests and /logs), built from the sandbox's one policy.

Both are `SessionJail`s (sandbox/session_launcher.py) whose pid 1 is the session agent (agent/, bound read-only at
agent.protocol.JAIL_DIR and started by the jail's own Python), spoken to by JSON lines (agent/protocol.py). What a
task may use (memory, processes, disk, CPU) is its `EpisodeLimits`; the policy's wall clock is only a backstop, since
each step and the episode are timed here.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import TYPE_CHECKING, cast

from groupscore.environments.agent.protocol import BOOT, JAIL_DIR, PACKAGE, PYTHON_FLAGS
from groupscore.environments.task import JAIL_LIFE_S, EpisodeLimits, Task
from groupscore.sandbox import Limits
from groupscore.sandbox.policy import Policy, build_policy
from groupscore.sandbox.session_launcher import SessionJail, session_policy
from groupscore.sandbox.toolchains import toolchain

if TYPE_CHECKING:
    from groupscore.environments.agent.protocol import Reply, Request

# What a shell in the jail may run and read besides the Python toolchain: the host's programs and their data, all
# read-only (no set-uid bit takes effect: nosuid, no_new_privs).
SHELL_RO = ("/usr/bin", "/usr/lib", "/usr/share/zoneinfo", "/usr/share/misc", "/etc/alternatives", "/usr/lib/locale")
CHECK_ROOTS = ("/tests", "/logs")
# A checker must not run what the agent left in the state in place of the test's own programs: no current directory
# on Python's path, no user site-packages (HOME is the work dir the agent wrote).
CHECK_ENV = {"PYTHONSAFEPATH": "1", "PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1"}


def state_roots(task: Task) -> tuple[str, ...]:
    """The session's writable places, whose contents are its state."""
    return (task.workdir, "/tmp")


def python_env(task: Task) -> str:
    """The named jail Python environment the task's classes need ("" for none)."""
    envs = {c.python_env for c in task.classes if c.python_env}
    if len(envs) > 1:
        raise ValueError(f"task {task.id}: its classes name several Python environments: {sorted(envs)}")
    return envs.pop() if envs else ""


@functools.lru_cache(maxsize=64)
def _policy(limits: EpisodeLimits, env: str, roots: tuple[str, ...], workdir: str) -> tuple[Policy, str]:
    tool = toolchain("python", env)
    wall = min(JAIL_LIFE_S, limits.episode_time_s + 120)
    run_limits = Limits(
        wall_time_s=wall,
        cpu_time_s=wall,  # the agent's; its tools get `limits.cpu_s` from it (agent/tools.py)
        memory_mb=limits.memory_mb,
        max_processes=limits.max_processes,
        max_output_bytes=1 << 20,
        tmpfs_mb=limits.disk_mb,
        max_open_files=256,
        max_file_bytes=max(1 << 20, min(limits.disk_mb, 256) << 20),
    )
    base = build_policy(tool, run_limits, extra_ro=tuple(p for p in SHELL_RO if os.path.exists(p)))
    return session_policy(base, roots, limits.disk_mb, workdir), tool.executable


def checker_cpu_s(timeout_s: float) -> int:
    """The CPU seconds of each process a checker's test runs."""
    return max(1, int(timeout_s) + 1)


# The session agent's package on the host, bound read-only into every session's and checker's jail.
AGENT_DIR = Path(__file__).with_name("agent")


def ask(jail: SessionJail, request: Request, timeout: float) -> Reply:
    """One request of the typed protocol (agent/protocol.py) to a jail's agent, and its reply. SessionLost as the
    launcher raises it."""
    return cast("Reply", jail.request(request, timeout))


def _agent_jail(policy: Policy, python: str) -> SessionJail:
    _agent_bytecode(python)
    return SessionJail(policy, [python, *PYTHON_FLAGS, "-c", BOOT], {f"{JAIL_DIR}/{PACKAGE}": str(AGENT_DIR)})


@functools.cache
def _agent_bytecode(python: str) -> None:
    """The agent's modules compiled once, by the jail's own Python, beside their sources: every session's start then
    reads bytecode (-B writes none) instead of compiling the package again (about 7 of its 30 ms). Where the package's
    folder is not writable, sessions compile as they go: slower, the same."""
    import subprocess

    try:
        subprocess.run([python, "-m", "compileall", "-q", str(AGENT_DIR)], capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        pass


def open_session_jail(task: Task) -> SessionJail:
    return _agent_jail(*_policy(task.limits, python_env(task), state_roots(task), task.workdir))


def open_checker_jail(task: Task, timeout_s: float) -> SessionJail:
    limits = task.limits.model_copy(update={"episode_time_s": timeout_s, "cpu_s": checker_cpu_s(timeout_s)})
    return _agent_jail(*_policy(limits, python_env(task), (*state_roots(task), *CHECK_ROOTS), task.workdir))
