"""`run`: one untrusted program in a fresh jail, and the once-per-process check that jails work.

A run goes through one of two launchers under the same harness (harness.py): the warm launcher (warm_launcher.py)
where it can take the run (a Python script, as root, a template at hand), else the nsjail launcher
(nsjail_launcher.py); RunResult.launcher says which, and RunResult.fallback why a run that could have been warm was
not. No code runs unless nsjail is there to jail it: `ensure_available` proves a jail (pid namespace, unprivileged
uid) before the first run, and raises SandboxUnavailable otherwise.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
from dataclasses import dataclass
from pathlib import PurePosixPath

from groupscore.sandbox import nsjail_launcher, warm
from groupscore.sandbox.classify import classify
from groupscore.sandbox.compiler import compile_program
from groupscore.sandbox.errors import BadRunRequest, SandboxUnavailable
from groupscore.sandbox.harness import LauncherName, RawRun, cgroup_note, decode, peak_mb
from groupscore.sandbox.languages import SPECS, artifact, java_main_class, run_argv
from groupscore.sandbox.limits import Limits
from groupscore.sandbox.nsjail_launcher import execute_nsjail, nsjail_binary
from groupscore.sandbox.policy import INIT_SHELL, Policy, build_policy
from groupscore.sandbox.result import RunResult, RunStatus
from groupscore.sandbox.toolchains import MAIN_FILE, Toolchain, toolchain
from groupscore.sandbox.warm_launcher import execute_warm
from groupscore.sandbox.workdir import check_name

MAX_INPUT_BYTES = 64 << 20


def normalize_files(files: dict[str, str | bytes]) -> dict[str, bytes]:
    out, total = {}, 0
    for name, content in files.items():
        data = content.encode() if isinstance(content, str) else bytes(content)
        total += len(data)
        out[check_name(name)] = data
    if total > MAX_INPUT_BYTES:
        raise BadRunRequest(f"input files total {total} bytes, above {MAX_INPUT_BYTES}")
    return out


def run(
    files: dict[str, str | bytes],
    command: str | list[str] | None = None,
    *,
    language: str = "python",
    main: str | None = None,
    stdin: str | bytes = b"",
    limits: Limits = Limits(),
    collect: list[str] | tuple[str, ...] = (),
    compile_limits: Limits | None = None,
    compile_command: list[str] | None = None,
    as_init: bool = False,
    args: list[str] | tuple[str, ...] = (),
    python_env: str | None = None,
) -> RunResult:
    """Run untrusted code in a fresh jail and return what happened.

    files: written read-only into the jail's work dir (/work, also the cwd); names are relative paths.
    command: argv (a string is one program path, not a shell line); default runs `main`:
        python: [python3, -s, -B, main]; javascript: node main; bash: bash main; compiled languages (c, cpp,
        typescript, java, go, rust): compile `main` in a jail of its own (compile_limits, default: the language's),
        then run the artifact (./prog, node main.js, java -cp prog.jar <its public class>); see languages.py.
    collect: work-dir paths the program may write (pre-created, empty); returned in RunResult.files,
        each capped at limits.max_file_bytes. This (or stdout) is how results leave the jail.
    as_init: run the program itself as the jail's pid 1, for a supervisor that reaps its own children (the code
        verifier's runner): one process less per run, and no signal sent from inside the jail can kill it (the
        kernel drops those, bar ones it installed a handler for). Without it an init shell is pid 1, which also
        sets the soft CPU limit (SIGXCPU at limits.cpu_seconds); a pid-1 program gets only the hard one (+1 s).
    args: more arguments after the default command (not with `command`), e.g. a runner's input file.
    python_env: Python only: a named environment (envs.py) bound read-only, its packages importable; None: the
        GROUPSCORE_SANDBOX_PYTHON_ENV setting (unset: the standard library alone); "": none whatever the setting.
    Raises SandboxUnavailable when nsjail cannot start; BadRunRequest (a ValueError) on bad arguments. Never runs
    anything outside the jail.
    """
    if python_env is not None and language != "python":
        raise BadRunRequest(f"python_env applies to python runs, not {language}")
    tool = toolchain(language, python_env)
    ensure_available(language)
    main = main or MAIN_FILE[language]
    data = normalize_files(files)
    collect = [check_name(c) for c in collect]
    if clash := sorted(set(collect) & set(data)):
        raise BadRunRequest(f"collect paths are also input files (inputs are read-only): {clash}")
    stdin_bytes = stdin.encode() if isinstance(stdin, str) else bytes(stdin)
    if isinstance(command, str):
        command = [command]
    compile_result = None
    executable: frozenset[str] = frozenset()
    entry = None
    spec = SPECS[language]
    if spec.compiled:
        if main not in data:
            raise BadRunRequest(f"{language} run needs its source {main!r} in files")
        if language == "java":  # the run starts the public class (else the file's name), which javac wants in
            entry = java_main_class(data[main]) or PurePosixPath(main).stem  # a file of that name
            if main == MAIN_FILE["java"] and f"{entry}.java" not in data:
                data = {(f"{entry}.java" if name == main else name): content for name, content in data.items()}
                main = f"{entry}.java"
        compile_result, built = compile_program(
            tool, data, main, compile_limits or spec.compile_limits, compile_command
        )
        if compile_result.status is RunStatus.SANDBOX_ERROR:  # the compiler's jail failed on our side, not the program
            return RunResult(
                status=RunStatus.SANDBOX_ERROR,
                compile=compile_result,
                cgroup=cgroup_note(),
                error="compile step: jail setup failed",
            )
        if compile_result.status is not RunStatus.OK:
            return RunResult(
                status=RunStatus.COMPILE_ERROR,
                compile=compile_result,
                cgroup=cgroup_note(),
                error="compile failed"
                if compile_result.status is RunStatus.RUNTIME_ERROR
                else f"compile step: {compile_result.status.value}",
            )
        output = artifact(language, main)
        data = {**data, output: built}
        executable = frozenset({output}) if spec.native else frozenset()
    elif command is None and main not in data:
        raise BadRunRequest(f"no command given and main file {main!r} is not in files")
    if command and args:
        raise BadRunRequest("args go after the default command; with a command of your own, put them in it")
    argv = command or [*run_argv(tool, main, limits, entry), *args]
    if not argv or not all(isinstance(a, str) for a in argv):
        raise BadRunRequest("command must be a non-empty list of strings")
    for a in argv:
        if "\x00" in a:
            raise BadRunRequest("command arguments cannot contain NUL bytes")
        a.encode("utf-8")  # surrogates raise UnicodeEncodeError, a ValueError
    policy = build_policy(tool, limits)
    launched = _launch(tool, policy, data, list(argv), stdin_bytes, collect, executable, as_init)
    out, got, truncated = launched.out, launched.files, launched.files_truncated
    status, note = classify(out, limits)
    return RunResult(
        status=status,
        exit_code=out.exit_code,
        signal=out.signal,
        stdout=decode(out.stdout),
        stderr=decode(out.stderr),
        stdout_truncated=out.stdout_truncated,
        stderr_truncated=out.stderr_truncated,
        wall_time_s=round(out.wall_time_s, 4),
        cpu_time_s=round(out.cpu_time_s, 4),
        peak_memory_mb=peak_mb(out),
        files=got,
        files_truncated=truncated,
        compile=compile_result,
        cgroup=cgroup_note(),
        launcher=launched.launcher,
        fallback=launched.fallback,
        error=note,
    )


@dataclass
class _Launched:
    out: RawRun
    files: dict[str, bytes]
    files_truncated: list[str]
    launcher: LauncherName
    fallback: str | None  # why a run the warm launcher could have taken went through nsjail


def _launch(
    tool: Toolchain,
    policy: Policy,
    files: dict[str, bytes],
    argv: list[str],
    stdin: bytes,
    collect: list[str],
    executable: frozenset[str],
    as_init: bool,
) -> _Launched:
    """The run through the warm launcher where it can take it, else through nsjail."""
    fallback = None
    if tool.language == "python" and warm.enabled() and warm.warm_argv(tool, argv, files):
        template, why = warm.template_for(tool, policy, argv[1])
        if template is not None:
            out, got, truncated = execute_warm(template, policy, files, argv, stdin, collect, as_init)
            if not out.never_started:
                return _Launched(out, got, truncated, "warm", None)
            # The warm jail could not be set up, and nothing of the program ran: through nsjail.
            why = out.log.removeprefix("[E] warm run: ")
        fallback = f"warm run not set up: {why}" if template is not None else f"no warm template: {why}"
    out, got, truncated = execute_nsjail(policy, files, argv, stdin, collect, executable, as_init)
    return _Launched(out, got, truncated, "nsjail", fallback)


_AVAILABLE: bool = False
_AVAILABLE_LOCK = threading.Lock()


# The probe is the init shell itself (mounted in every policy), so it needs no interpreter: its pid,
# its real uid as the kernel reports it, and how many processes it can see.
_PROBE = (
    'echo $$; while read -r k v rest; do [ "$k" = Uid: ] && echo "$v"; done < /proc/self/status; '
    "set -- /proc/[0-9]*; echo $#"
)


def ensure_available(language: str = "python") -> None:
    """Start one harmless jail (once per process) and check it is a jail: the program is pid 2 under
    the init shell, sees no host process, and is not root.

    Raises SandboxUnavailable naming what is missing (binary, shared library, namespaces, toolchain).
    """
    global _AVAILABLE
    if _AVAILABLE:
        return
    with _AVAILABLE_LOCK:
        if _AVAILABLE:  # another thread may have set it while this one waited for the lock
            return  # type: ignore[unreachable]  # (mypy narrowed the global at the first check)
        binary = nsjail_binary()
        probe = subprocess.run([binary, "--help"], capture_output=True, timeout=30, env={"PATH": "/usr/bin:/bin"})
        nsjail_launcher.measure_loader_noise(probe.stderr)
        help_err = probe.stderr.decode(errors="replace")
        missing = re.search(r"error while loading shared libraries: (\S+?):", help_err)
        if missing:
            raise SandboxUnavailable(
                f"nsjail cannot start: shared library {missing.group(1)} is missing. Install Debian's "
                "libnl-3-200 and libnl-route-3-200 (as root: tools/install-system-deps)"
            )
        if probe.returncode not in (0, 1) and "Usage" not in probe.stdout.decode(errors="replace") + help_err:
            raise SandboxUnavailable(f"nsjail cannot start ({binary}): {help_err.strip()[-300:]}")
        limits = Limits(wall_time_s=20)
        policy = build_policy(toolchain(language), limits)
        out, _, _ = execute_nsjail(policy, {}, [INIT_SHELL, "-c", _PROBE], b"", [])
        if out.setup_failed or out.exit_code != 0:
            log = out.log
            if "CLONE_NEWUSER" in log or "clone(" in log or "unshare(" in log:
                why = (
                    "user/pid/net namespaces are not available (check kernel.unprivileged_userns_clone, "
                    "user.max_user_namespaces, or a container seccomp profile that blocks clone/unshare)"
                )
            else:
                why = "the probe jail failed"
            errs = " | ".join(ln for ln in log.splitlines() if ln.startswith(("[E]", "[F]")))[-600:]
            raise SandboxUnavailable(f"nsjail cannot start a jail: {why}. nsjail said: {errs or out.stderr[-300:]!r}")
        try:
            pid, uid, nprocs = (int(x) for x in out.stdout.decode().split())
        except ValueError:
            raise SandboxUnavailable(f"probe jail gave an unexpected answer: {out.stdout[:200]!r}") from None
        if pid != 2 or nprocs > 2:  # pid 1 is the init shell
            raise SandboxUnavailable(f"probe jail is not isolated: pid {pid}, sees {nprocs} processes")
        if os.geteuid() == 0 and uid == 0:
            raise SandboxUnavailable("probe jail runs as uid 0; refusing (would be root on the host)")
        _AVAILABLE = True
