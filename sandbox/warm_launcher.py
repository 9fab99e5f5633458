"""The warm launcher: one Python run forked from a warm template jail (warm.py), seen from the host.

The peer of the nsjail launcher (nsjail_launcher.py), under the same harness (harness.py): the run's dir (in the
template's spool), its cgroup slot, its output caps and its wall clock are the harness's. What the jail is made of comes
from the same `Policy`, sent to the template as the run's request: the work dir's tmpfs, /proc and the binds of the
run's files with their mounts' flags, the namespaces made per run, the rlimits (`Rlimits.settings`), the hostname, the
environment, no_new_privs and the seccomp program nsjail installs for the policy. warm_template.py builds the jail
from it; this module reads what the run's init reported.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import time

from groupscore.sandbox.errors import SandboxUnavailable
from groupscore.sandbox.harness import (
    LauncherName,
    RawRun,
    await_pidfd,
    collect_output,
    execute,
    finish_slot,
    prepared_slot,
)
from groupscore.sandbox.policy import FILE_BIND_FLAGS, Policy
from groupscore.sandbox.uids import per_jail_ids
from groupscore.sandbox.warm import INSIDE_BASE, Template
from groupscore.sandbox.workdir import RunDir

# How long the host waits for a run's init to say it is ready (the template forked it and it set up its jail).
_READY_TIMEOUT_S = 10.0


def _creds_pid(ancillary: list[tuple[int, int, bytes]]) -> int | None:
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and len(data) >= 12:
            pid: int = struct.unpack("3i", data[:12])[0]
            return pid
    return None


class WarmLauncher:
    """Runs the script argv[3] (argv = [python, -s|-S, -B, script, args...]) on `template`, its dir in the template's
    spool."""

    name: LauncherName = "warm"

    def __init__(self, template: Template):
        self.template = template
        self.run_dir_parent: str | None = template.spool
        self.run_dir_owner = template.host_id

    def launch(self, policy: Policy, rundir: RunDir, argv: list[str], stdin: bytes, as_init: bool) -> RawRun:
        """as_init: the program is the jail's pid 1, as through nsjail (see runner.run)."""
        if not per_jail_ids():  # warm runs are made only as root (warm.enabled): each has a host id of its own
            raise SandboxUnavailable("warm runs need a host id per run (root)")
        template = self.template
        inside = INSIDE_BASE + rundir.uid - template.base
        work = next(m for m in policy.mounts if m.kind == "tmpfs" and m.target == policy.work_dir)
        proc = next(m for m in policy.mounts if m.kind == "proc")
        request = {
            "binds": [[f"{rundir.path.name}/{src}", dst, rw] for src, dst, rw in rundir.binds],
            "bind_flags": FILE_BIND_FLAGS,
            "uid": inside,
            "gid": inside,
            "hostname": policy.hostname,
            "work_dir": policy.work_dir,
            "tmpfs": [work.options, work.flags],
            "proc": [proc.target, proc.options, proc.flags],
            # The user namespace is the template's (nsjail made it from the same list); every other one is the run's.
            "namespaces": [name for name in policy.namespaces if name != "user"],
            "rlimits": policy.rlimits.settings(as_init=as_init),
            "no_new_privs": policy.no_new_privs,
            # PWD as the init shell of an nsjail run sets it; a pid-1 program has none there, so none here either.
            "env": dict(e.split("=", 1) for e in (*policy.env, *(() if as_init else (f"PWD={policy.work_dir}",)))),
            "script": f"{policy.work_dir}/{argv[3]}",
            "argv": argv[3:],
            "seccomp": template.seccomp_hex,
        }
        template.begin()
        try:
            return _run(template, policy, rundir, request, stdin, as_init)
        finally:
            template.end()


def execute_warm(
    template: Template,
    policy: Policy,
    files: dict[str, bytes],
    argv: list[str],
    stdin: bytes,
    collect: list[str],
    as_init: bool = False,
) -> tuple[RawRun, dict[str, bytes], list[str]]:
    """harness.execute on `template`; a run whose jail was set up, or could not be before the program's first line,
    counts toward whether the template is kept (Template.count_start)."""
    out, got, truncated = execute(WarmLauncher(template), policy, files, argv, stdin, collect, as_init=as_init)
    if out.never_started or not out.setup_failed:
        template.count_start(out.never_started, out.log)
    return out, got, truncated


def _run(
    template: Template, policy: Policy, rundir: RunDir, request: dict[str, object], stdin: bytes, as_init: bool
) -> RawRun:
    out = RawRun()
    stdin_fd = os.open(rundir.write("stdin", stdin), os.O_RDONLY | os.O_CLOEXEC)
    # The slot holds the program's processes alone (the run's init, outside it, reaps them all before it reports): as
    # many as through nsjail, whose slot holds nsjail and its init shell besides. A pid-1 program's tree gets one more,
    # as through nsjail, whose slot keeps the unused shell's place.
    slot = prepared_slot(policy, own_tasks=1 if as_init else 0)
    host_sock, run_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    host_sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    pidfd, started = -1, False
    start = time.monotonic()
    try:
        cgroup_fds = [] if slot is None else [os.open(f, os.O_WRONLY | os.O_CLOEXEC) for f in slot.join_files]
        try:
            template.submit(request, [stdin_fd, out_w, err_w, run_sock.fileno(), *cgroup_fds], as_init)
        finally:
            for fd in (stdin_fd, out_w, err_w, *cgroup_fds):
                os.close(fd)
            run_sock.close()
        host_sock.settimeout(_READY_TIMEOUT_S)
        try:
            msg, ancillary, _, _ = host_sock.recvmsg(4096, socket.CMSG_SPACE(12))
        except TimeoutError:
            template.retire()  # replaced at the next run; closed once the runs in flight on it have returned
            raise
        pid = _creds_pid(ancillary)
        if msg != b"ready" or pid is None:
            return _failed(out, msg, start, never_started=True)
        pidfd = os.pidfd_open(pid)
        started = True  # from the go on the program may run: set before it, so a failed send counts as a start
        host_sock.sendall(b"go")

        def kill() -> float:
            try:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            except ProcessLookupError:
                pass
            return time.monotonic()

        with os.fdopen(out_r, "rb", buffering=0) as stdout, os.fdopen(err_r, "rb", buffering=0) as stderr:
            out_r = err_r = -1
            collect_output(stdout, stderr, out, policy, start, kill)
        if not (out.timed_out or out.output_limit):
            await_pidfd(pidfd, out, start + policy.wall_time_s)
        if out.timed_out or out.output_limit:
            kill()
        host_sock.settimeout(2.0)
        report = _receive(host_sock)
        if as_init and report and not _reaped(report):
            _receive(host_sock)  # B, in the slot, is reaped (what it said came first): the slot is free
        _read_report(out, report)
        out.wall_time_s = time.monotonic() - start
        return out
    except OSError as exc:
        why = json.dumps({"setup_error": f"{type(exc).__name__}: {exc}"}).encode()
        return _failed(out, why, start, never_started=not started)
    finally:
        for fd in (out_r, err_r, pidfd):
            if fd >= 0:
                os.close(fd)
        host_sock.close()
        if slot is not None:
            finish_slot(slot, out)


def _receive(sock: socket.socket) -> bytes:
    try:
        return sock.recv(65536)
    except OSError:
        return b""


def _reaped(message: bytes) -> bool:
    """Whether this is the reaper's word that the run's init is gone (for an as_init run, the program's exit)."""
    try:
        return message.startswith(b"{") and json.loads(message).get("reaped") is True
    except ValueError:
        return False


def _failed(out: RawRun, message: bytes, start: float, never_started: bool) -> RawRun:
    try:
        why = json.loads(message).get("setup_error", "") if message.startswith(b"{") else message.decode()
    except ValueError:
        why = repr(message[:200])
    out.setup_failed, out.never_started = True, never_started
    out.log = f"[E] warm run: {why or 'the template gave no answer'}"
    out.wall_time_s = time.monotonic() - start
    return out


def _read_report(out: RawRun, report: bytes) -> None:
    if out.timed_out or out.output_limit:
        if report.startswith(b"{"):
            _fill(out, json.loads(report))
        if out.exit_code is None and out.signal is None:
            out.signal = signal.SIGKILL
        return
    if not report.startswith(b"{"):
        out.setup_failed = True
        out.log = "[E] warm run: the jail's init ended without a report"
        return
    data = json.loads(report)
    if "setup_error" in data or "init_error" in data:
        # A setup error is told before the program's first line, on a socket (or pipe) the program never holds.
        out.setup_failed, out.never_started = True, "setup_error" in data
        out.log = f"[E] warm run: {data.get('setup_error') or data['init_error']}"
        return
    _fill(out, data)


def _fill(out: RawRun, data: dict[str, object]) -> None:
    exit_code, sig = data.get("exit"), data.get("signal")
    out.exit_code = exit_code if isinstance(exit_code, int) else None
    out.signal = sig if isinstance(sig, int) else None
    cpu, rss = data.get("cpu"), data.get("maxrss")
    out.cpu_time_s = float(cpu) if isinstance(cpu, (int, float)) else 0.0
    out.maxrss_kb = int(rss) if isinstance(rss, int) else 0
