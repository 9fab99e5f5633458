"""The code verifier's requests to the sandbox: the call runner job and stdio jobs, run in parallel.

Nothing here runs code itself: every job goes through `groupscore.sandbox`, and when the sandbox cannot isolate a run
the whole item fails with JailFailed (never a fallback to a plain subprocess).
"""

from __future__ import annotations

import functools
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from groupscore.sandbox import (
    BAD_REQUEST,
    MAIN_FILE,
    Limits,
    RunRequest,
    RunResult,
    RunStatus,
    SandboxUnavailable,
    default_workers,
    run_many,
)
from groupscore.sandbox.languages import SPECS, artifact, java_main_class, java_top_level_classes, run_argv
from groupscore.sandbox.toolchains import toolchain

RUNNER_MEMORY_HEADROOM_MB = 64  # the runner process itself, beside the worker
RUNNER_OUTPUT_BYTES = 16 << 20  # marked result lines; each call result is capped at 8 MiB inside the jail


class JailFailed(RuntimeError):
    """The sandbox could not run the item (unavailable, or a jail setup error): an infra_error verdict, not a score."""


class RunRefused(ValueError):
    """The sandbox refused the run request built from this item (e.g. a program that is not encodable text): the
    item's fault, so an error verdict that is trained on, never an infra_error a policy could hide behind."""


class CompileFailed(RuntimeError):
    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class Job:
    runner_source: str | None  # the call runner's source, or None for a stdio job (the program reads stdin)
    stdin: bytes
    limits: Limits
    runner_language: str = "python"  # the call runner's language: python (jail_runner.py), javascript or java


# The JavaScript and Java call runners (runners/), shipped as package data; each answers with returned values as JSON.
RUNNER_FILES = {"javascript": "call_runner.js", "typescript": "call_runner.js", "java": "GsCallRunner.java"}
# The Java runner reads the program's top-level classes (where it looks for a test's method) from this file, one a
# line: a list on its command line could outgrow execve's limits (E2BIG), a jail failure the program would choose.
JAVA_CLASS_LIST = "gs-call-classes.txt"
JAVA_RUNNER_FILE = "gs-call-runner.java"
JAVA_RUNNER_CLASS = "gsrunner.GsCallRunner"


@functools.cache
def runner_source(language: str) -> str:
    return (resources.files("groupscore.verifiers.code") / "runners" / RUNNER_FILES[language]).read_text()


def runner_job(
    runner_source: str, plan_bytes: bytes, *, wall_time_s: float, memory_mb: int, language: str = "python"
) -> Job:
    """The call runner, reading `plan_bytes` on stdin; the program itself is added by run_jobs."""
    return Job(
        runner_source,
        plan_bytes,
        Limits(
            wall_time_s=min(wall_time_s, 3600.0),
            memory_mb=memory_mb + RUNNER_MEMORY_HEADROOM_MB,
            max_output_bytes=RUNNER_OUTPUT_BYTES,
        ),
        language,
    )


def stdio_job(stdin: str, *, time_limit_s: float, memory_mb: int, expected_bytes: int) -> Job:
    # Room for twice the expected output, so a slightly longer wrong answer is judged wrong, not cut off.
    output_cap = max(1 << 20, 2 * expected_bytes + (64 << 10))
    return Job(None, stdin.encode(), Limits(wall_time_s=time_limit_s, memory_mb=memory_mb, max_output_bytes=output_cap))


def run_jobs(language: str, program: str, jobs: list[Job], python_env: str | None = None) -> list[RunResult]:
    """Results in job order, all jobs of the item in parallel.

    Compiled languages: the first job runs alone, so the program is compiled once (the sandbox caches a successful
    compile by source) and a compile error ends the item after one compile instead of one per test.
    """
    source = MAIN_FILE[language]
    try:
        requests: list[RunRequest | dict[str, Any]] = [
            _request(language, source, program, job, python_env) for job in jobs
        ]
        first: list[RunResult] = []
        if SPECS[language].compiled and len(requests) > 1:
            first = run_many(requests[:1], workers=1)
            _raise_on_compile_error(first)
            _raise_on_sandbox_error(first)  # the compile's jail failed: the other jobs would fail the same way
            requests = requests[1:]
        results = first + run_many(requests, workers=min(len(requests), default_workers()))
    except SandboxUnavailable as exc:
        raise JailFailed(f"sandbox unavailable: {exc}") from exc
    _raise_on_compile_error(results)
    _raise_on_sandbox_error(results)
    return results


def _raise_on_sandbox_error(results: list[RunResult]) -> None:
    for result in results:
        if result.status is RunStatus.SANDBOX_ERROR and (result.error or "").startswith(BAD_REQUEST):
            raise RunRefused(f"the sandbox refused this item's run: {result.error}")
        if result.status is RunStatus.SANDBOX_ERROR:
            raise JailFailed(f"sandbox error: {result.error}")


def _raise_on_compile_error(results: list[RunResult]) -> None:
    failed = next((r for r in results if r.status is RunStatus.COMPILE_ERROR), None)
    if failed is not None:
        raise CompileFailed(_compile_message(failed))


def _compile_message(result: RunResult) -> str:
    step = result.compile
    if step is None:
        return result.error or "compile failed"
    if step.status is not RunStatus.RUNTIME_ERROR:
        return f"the compile step ended with {step.status.value}"
    # tsc writes its errors to stdout
    return step.stderr.strip() or step.stdout.strip() or f"the compiler exited with {step.exit_code}"


# Run by the jail's interpreter on the host, on our own runner source only: compile it once to the bytecode file that
# interpreter runs directly (`python runner.pyc`), and list its site-packages dirs. A jail's /work is a fresh tmpfs, so
# the runner would otherwise be compiled from source in every jail, a few ms of CPU per item.
_COMPILE_RUNNER = (
    "import importlib.util,marshal,site,sys;src=sys.stdin.buffer.read();"
    "code=compile(src,'runner.py','exec',dont_inherit=True);"
    # The 16-byte header of a .pyc: magic, flags (0: timestamp-based), mtime, source size; the interpreter checks
    # only the magic when it runs a .pyc given on its command line.
    "sys.stdout.buffer.write(importlib.util.MAGIC_NUMBER+bytes(8)+(len(src)&0xFFFFFFFF).to_bytes(4,'little')"
    "+marshal.dumps(code));sys.stderr.write(repr(site.getsitepackages()))"
)


@functools.lru_cache(maxsize=4)
def runner_files(runner_source: str) -> tuple[dict[str, str | bytes], tuple[str, ...]]:
    """The runner's files in the jail and its argv after the script: the compiled runner and the interpreter's
    site-packages dirs (the runner puts those that exist in the jail on the candidate's path without importing
    `site`). Falls back to the source when the interpreter cannot compile it on the host."""
    exe = toolchain("python").executable
    try:
        done = subprocess.run(
            [exe, "-I", "-S", "-B", "-c", _COMPILE_RUNNER],
            input=runner_source.encode(),
            capture_output=True,
            timeout=60,
            check=True,
            env={"PATH": "/usr/bin:/bin"},
        )
        dirs = tuple(d for d in _literal_list(done.stderr.decode()) if d.startswith("/"))
        if done.stdout[:4] and len(done.stdout) > 16:
            return {"runner.pyc": done.stdout}, ("runner.pyc", *dirs)
    except (OSError, subprocess.SubprocessError, UnicodeDecodeError):
        pass
    return {"runner.py": runner_source}, ("runner.py",)


_IMPORT = re.compile(r"^\s*(?:import|from)\s+([A-Za-z_]\w*)", re.M)


def imported_modules(program: str) -> set[str]:
    """Top-level modules the program's import statements name (a scan of its text: a pre-import is only a saving)."""
    return set(_IMPORT.findall(program))


def _literal_list(text: str) -> list[str]:
    import ast

    try:
        value = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError):
        return []
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _request(language: str, source: str, program: str, job: Job, python_env: str | None = None) -> dict[str, Any]:
    files: dict[str, str | bytes]
    if job.runner_source is not None and job.runner_language == "javascript":
        files = {"call_runner.js": job.runner_source, "solution.js": program}
        return {**_base(job, "javascript", files, "call_runner.js"), "args": ("solution.js",)}
    if job.runner_source is not None and job.runner_language == "typescript":
        # The sandbox compiles the program (tsc, its own jail) and the runner loads what tsc wrote, with node.
        files = {source: program, "call_runner.js": job.runner_source}
        node = run_argv(toolchain("javascript"), "call_runner.js", job.limits)
        return {**_base(job, "typescript", files, source), "command": [*node, artifact("typescript", source)]}
    if job.runner_source is not None and job.runner_language == "java":
        # The program in a file its public class may have (javac wants that), else Solution.java; the runner, a
        # class of its own, is compiled with it and looks for each test's method on the program's classes.
        # The runner (not public, in a package of its own) is in a file no program class can name, and started by its
        # full name: a program's public class GsCallRunner is just another class.
        program_file = f"{java_main_class(program.encode()) or 'Solution'}.java"
        classes = "".join(f"{name}\n" for name, _ in java_top_level_classes(program))
        files = {JAVA_RUNNER_FILE: job.runner_source, program_file: program, JAVA_CLASS_LIST: classes}
        java = run_argv(toolchain("java"), JAVA_RUNNER_FILE, job.limits, JAVA_RUNNER_CLASS)
        return {**_base(job, "java", files, JAVA_RUNNER_FILE), "command": [*java, JAVA_CLASS_LIST]}
    if job.runner_source is not None:
        runner, argv = runner_files(job.runner_source)
        files = {**runner, "solution.py": program}
        tool = toolchain("python", python_env)
        # The environment's packages, and those of its slow modules the program imports, imported before any worker.
        preimport = [f"+{m}" for m in tool.preimport if m in imported_modules(program)]
        # -S: no site processing at start-up (the runner adds the site-packages dirs given on its command line).
        command = [tool.executable, "-S", "-B", *argv, *tool.site_dirs, *preimport]
        # The runner is the jail's pid 1: no init shell to start, and workers cannot signal it away.
        return {
            "files": files,
            "command": command,
            "language": "python",
            "stdin": job.stdin,
            "limits": job.limits,
            "as_init": True,
            "python_env": python_env,
        }
    # Compiled languages: the sandbox compiles `source` first; its compile cache makes that once per program.
    request = _base(job, language, {source: program}, source)
    return {**request, "python_env": python_env} if language == "python" else request


def _base(job: Job, language: str, files: Mapping[str, str | bytes], main: str) -> dict[str, Any]:
    return {"files": files, "language": language, "main": main, "stdin": job.stdin, "limits": job.limits}
