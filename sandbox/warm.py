"""Warm Python runs: a jailed, started interpreter (warm_template.py) forks a fresh jail for each run.

A plain Python run spends most of its time starting: nsjail's own start (its loader, ~20 mounts, the namespaces) and
the interpreter's (~10-15 ms of CPU). A warm run skips both: one template jail per process and interpreter, made by
nsjail, forks per run, and the fork builds a jail of its own before the program's first line (warm_template.py lists
what: namespaces, tmpfs work dir, binds, /proc, cgroup slot, rlimits, uid, capabilities, seccomp). Nothing is shared
between two runs that separate nsjail jails would not share; what the runs share with the template is an interpreter
that has started and never ran untrusted code (each run's copy is its own).

The template's user namespace maps the whole range of per-jail host ids (uids.py) besides its own root, so each run
still runs as a host id of its own; the program's process moves itself into the run's cgroup slot through files the
host opened, and the host kills the run's pid 1 (so its whole pid namespace) at the wall clock. The seccomp program
is the one nsjail installs, read back from a jail (seccomp_capture.py).

Used for Python runs of a script (`python3 -s|-S -B main.py args...`, one template per flag), as root (per-jail ids),
where the filter can be read; anything else, and any failure to start the template, goes through nsjail as before.
A run with as_init (the code verifier's call runner) is the jail's pid 1 itself: the run's init becomes the program
after building the jail, and its parent (a short-lived fork of the template) reports its exit status.
GROUPSCORE_SANDBOX_WARM=0 turns warm runs off. This module holds the templates; the warm launcher (warm_launcher.py),
the nsjail launcher's peer under the same harness, runs one program on one.
"""

from __future__ import annotations

import atexit
import io
import json
import logging
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import zipfile
from pathlib import Path

from groupscore.sandbox import settings as sandbox_settings
from groupscore.sandbox.errors import SandboxUnavailable
from groupscore.sandbox.harness import run_dir
from groupscore.sandbox.nsjail_config import mount_point, namespace_flags, render_exec
from groupscore.sandbox.nsjail_launcher import NSJAIL, nsjail_binary
from groupscore.sandbox.policy import Policy
from groupscore.sandbox.seccomp_capture import capture
from groupscore.sandbox.toolchains import Toolchain
from groupscore.sandbox.uids import ID_COUNT, id_pool, per_jail_ids
from groupscore.sandbox.workdir import run_base

log = logging.getLogger(__name__)

TEMPLATE_SCRIPT = Path(__file__).with_name("warm_template.py")
_TEMPLATE_NAME = ".template.py"  # in the template's work dir, which is the spool (each run's own tmpfs covers it)
INSIDE_BASE = 1000  # a run with host id h runs as uid/gid INSIDE_BASE + (h - id base) in the template's namespace
_FAILED_STARTS_LIMIT = 2
# A shortage (no process or memory to spare just now: EAGAIN, ENOMEM) fails a run's setup but says nothing of whether
# this host can make warm jails: it never counts toward giving the template up.
_SHORTAGE = ("[Errno 11]", "[Errno 12]")
_START_TIMEOUT_S = 20.0


class Template:
    """One warm template jail: nsjail running warm_template.py under `tool`'s interpreter, and its control socket."""

    def __init__(self, tool: Toolchain, policy: Policy, seccomp: bytes, site_flag: str = "-s"):
        self.tool, self.seccomp_hex, self.site_flag = tool, seccomp.hex(), site_flag
        self.host_id = id_pool().acquire()  # the template's own root maps here, for its whole life
        self.base = id_pool().base
        _remove_stale_spools(run_base())
        self.spool = tempfile.mkdtemp(prefix=f"groupscore-warm-{os.getpid()}-", dir=run_base())
        os.chown(self.spool, self.host_id, self.host_id)
        os.chmod(self.spool, 0o700)
        script = os.path.join(self.spool, _TEMPLATE_NAME)
        shutil.copyfile(TEMPLATE_SCRIPT, script)
        os.chown(script, self.host_id, self.host_id)
        os.chmod(script, 0o400)
        self._lock = threading.Lock()
        self.closed = self.retired = False
        self.in_flight = 0
        self.key: tuple[object, ...] = ()  # its key in _TEMPLATES, set by template_for
        self.failed_starts = 0  # runs in a row whose jail could not be set up
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

        work = policy.work_dir
        mounts = [mount_point(m) for m in policy.mounts if m.target != work]
        mounts.append(MountPt(src=self.spool, dst=work, is_bind=True, rw=True, is_dir=True, nosuid=True))
        inf = RLimitType.INF
        cfg = NsJailConfig(
            name="groupscore-warm",
            hostname=policy.hostname,
            cwd="/",
            nice_level=0,
            keep_env=False,
            envar=[*policy.env, f"PWD={work}"],
            **namespace_flags(policy),  # the runs' user namespace is this one; each run makes its others anew
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
        argv = [self.tool.executable, self.site_flag, "-B", f"{work}/{_TEMPLATE_NAME}", str(ctl_fd)]
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

    def submit(self, request: dict[str, object], fds: list[int], as_init: bool = False) -> None:
        """Start a run: the program as pid 2 under an init of ours, or (as_init) as its jail's pid 1."""
        with self._lock:
            socket.send_fds(self.ctl, [b"I" if as_init else b"P", json.dumps(request).encode()], fds)

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
        # A spool removed under it (a temp-dir cleaner) retires it too: no run could be set up there.
        return not (self.closed or self.retired) and self.proc.poll() is None and os.path.isdir(self.spool)

    def begin(self) -> None:
        with self._lock:
            self.in_flight += 1

    def end(self) -> None:
        with self._lock:
            self.in_flight -= 1
            last = self.retired and not self.in_flight
        if last:
            self.close()

    def count_start(self, failed: bool, why: str) -> None:
        """A run's setup succeeded, or failed before the program's first line (the run then goes through nsjail).
        Failing twice in a row with no success between, this host cannot make warm jails this way (a cgroup it may not
        join, a kernel that refuses a step): the template is given up and later runs go through nsjail, said once."""
        if failed and any(mark in why for mark in _SHORTAGE):
            return
        with self._lock:
            self.failed_starts = self.failed_starts + 1 if failed else 0
            give_up = self.failed_starts >= _FAILED_STARTS_LIMIT and not self.retired
        if give_up:
            with _LOCK:
                _BROKEN[self.key] = f"runs could not be set up: {why[-300:]}"
            log.warning("warm Python runs are off for %s (runs go through nsjail): %s", self.tool.executable, why)
            self.retire()

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


def _remove_stale_spools(base: str) -> None:
    """Spools of processes that died without closing their templates (a worker killed outright): the template ended
    with its control socket, its spool stayed."""
    for name in os.listdir(base):
        parts = name.split("-")
        mine = name.startswith("groupscore-warm-") and len(parts) > 3 and parts[2].isdigit()
        if mine and not os.path.exists(f"/proc/{parts[2]}"):
            shutil.rmtree(os.path.join(base, name), ignore_errors=True)


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


def _seccomp_program(tool: Toolchain, policy: Policy) -> bytes:
    global _SECCOMP
    if _SECCOMP is None:

        def sleeper(marker: str) -> None:
            # A host id of its own, as every jail's (run_dir): the base id may be another live jail's.
            with run_dir(policy, {}, []) as rundir:
                argv = [tool.executable, "-S", "-c", "import time; time.sleep(30)", marker]
                NSJAIL.launch(policy, rundir, argv, b"", as_init=True)

        _SECCOMP = capture(sleeper)
    return _SECCOMP


def policy_unsupported(policy: Policy) -> str | None:
    """Why a template's runs could not apply `policy` as nsjail would (None: they can). A run is its template's fork:
    the template's user namespace, the run's own pid and mount namespaces are how it is made; it drops every
    capability, and installs its seccomp program unprivileged, which takes no_new_privs."""
    missing = {"user", "pid", "mount"} - set(policy.namespaces)
    if missing:
        return f"the policy makes no {', '.join(sorted(missing))} namespace"
    if policy.capabilities:
        return f"the policy keeps capabilities ({', '.join(policy.capabilities)})"
    if not policy.no_new_privs:
        return "the policy turns no_new_privs off"
    return None


def warm_argv(tool: Toolchain, argv: list[str], files: dict[str, bytes]) -> bool:
    """Whether argv runs a script as a warm template can: `python -s|-S -B script args...`, the script one of the
    run's files (no -c, -m or other flags: those go through nsjail), and no zip archive: the interpreter runs a zip's
    __main__.py whatever the file is named, where the template would compile the file as source."""
    return (
        len(argv) > 3
        and argv[0] == tool.executable
        and argv[1] in ("-s", "-S")
        and argv[2] == "-B"
        and (argv[3] in files and not argv[3].startswith("-"))
        and not zipfile.is_zipfile(io.BytesIO(files[argv[3]]))
    )


def template_for(tool: Toolchain, policy: Policy, site_flag: str = "-s") -> tuple[Template | None, str | None]:
    """This process's template for `tool` started with `site_flag` (-s, or -S: no site module, whose names such as
    exit() a program could tell apart), started on first use; else None and why warm runs cannot be had."""
    if why := policy_unsupported(policy):
        return None, why
    # Not the work dir's tmpfs: its size is the run's (in the request), and every size would start a template.
    # The nsjail binary as configured now: a bad GROUPSCORE_NSJAIL fails this run as it fails an nsjail run (the
    # sandbox is misconfigured, warm template or not), and a new one starts a new template.
    binary = nsjail_binary()
    mounts = tuple(m for m in policy.mounts if m.target != policy.work_dir)
    made_by_nsjail = (policy.work_dir, policy.namespaces, policy.hostname, policy.rlimits.stack_mb)
    key = (binary, tool, site_flag, mounts, policy.env, made_by_nsjail)
    with _LOCK:
        template = _TEMPLATES.get(key)
        if template is not None and template.alive():
            return template, None
        if template is not None:
            template.close()
            del _TEMPLATES[key]
        if key in _BROKEN:
            return None, _BROKEN[key]
        try:
            template = Template(tool, policy, _seccomp_program(tool, policy), site_flag)
        except (SandboxUnavailable, OSError) as exc:
            _BROKEN[key] = str(exc)
            log.warning("warm Python runs are off for %s (runs go through nsjail): %s", tool.executable, exc)
            return None, _BROKEN[key]
        template.key = key
        _TEMPLATES[key] = template
        return template, None


def note() -> str:
    """How Python runs start here, for the printed policy."""
    if not enabled():
        return "off" if per_jail_ids() else "off (needs root: a host id per run)"
    broken = "; ".join(_BROKEN.values())
    return f"on{' (not available: ' + broken + ')' if broken else ''}"
