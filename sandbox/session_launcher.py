"""The session launcher: a jail that stays up across requests, its pid 1 a program that answers one JSON line per
request (the environments' session agent is one).

A one-shot run (harness.execute) starts a jail, feeds it stdin, reads its output to the end and reaps it. A session
keeps its jail: nsjail starts `argv` under the policy (the same config as any run, from nsjail_config.py), with
`binds` mounted read-only (the program's own files), in a cgroup slot of its own and as a host id of its own, and the
host then speaks to it one JSON line at a time. The writable places of a session (`roots`) are tmpfs mounts of the
jail, so what is written there lives and dies with it. This module knows nothing of what the requests mean.

Killing nsjail kills the jail's pid 1, and with it every process of the jail; the slot check then kills anything left
in the cgroup, and the host id goes back to the pool.
"""

from __future__ import annotations

import json
import math
import os
import select
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from groupscore.sandbox.cgroups import Slot
from groupscore.sandbox.harness import RawRun, finish_slot, prepared_slot
from groupscore.sandbox.nsjail_config import config_text, render_exec, render_file_mount, render_idmaps
from groupscore.sandbox.nsjail_launcher import join_slot, kill_nsjail, nsjail_binary, send_config, start_in_slot
from groupscore.sandbox.policy import Mount, Policy
from groupscore.sandbox.uids import id_pool, per_jail_ids

START_TIMEOUT_S = 15.0
MAX_REPLY_BYTES = 256 << 20  # a packed state is the largest reply (its cap is the session's disk)


class SessionLost(Exception):
    """The session's jail is gone or stopped answering. `started`: False when it never came up (the host's fault);
    `timed_out`: its agent said nothing in time (it may still be alive); `too_big`: its reply was over what the host
    reads of one (the agent cuts every field it sends, so only the agent's own state can get there)."""

    def __init__(self, message: str, *, started: bool = True, timed_out: bool = False, too_big: bool = False):
        super().__init__(message)
        self.started, self.timed_out, self.too_big = started, timed_out, too_big

    @property
    def agents_doing(self) -> bool:
        """Whether the jail's own processes caused this (never infra_error): silence or an oversized reply."""
        return self.timed_out or self.too_big


def session_policy(policy: Policy, roots: tuple[str, ...], disk_mb: int, workdir: str) -> Policy:
    """`policy` with its work dir tmpfs (and the /tmp link to it) replaced by one tmpfs per root, `workdir` the cwd and
    HOME, /tmp the TMPDIR."""
    kept = [m for m in policy.mounts if m.target not in (policy.work_dir, "/tmp", *roots)]
    size = disk_mb << 20
    tmpfs = [Mount(kind="tmpfs", target=r, options=f"size={size},nr_inodes=16384,mode=0777") for r in roots]
    env = (*(e for e in policy.env if not e.startswith(("HOME=", "TMPDIR="))), f"HOME={workdir}", "TMPDIR=/tmp")
    return policy.model_copy(update={"mounts": (*kept, *tmpfs), "work_dir": workdir, "tmpfs_mb": disk_mb, "env": env})


class SessionJail:
    """One live jail and its pid 1. Not thread-safe by itself: a session is used by one caller at a time (`lock`)."""

    def __init__(self, policy: Policy, argv: Sequence[str], binds: Mapping[str, str]):
        """argv: pid 1's command (its program under the policy's binds or `binds`); binds: {path in the jail: host
        path}, mounted read-only."""
        self.policy, self.argv, self.binds = policy, list(argv), dict(binds)
        self.lock = threading.Lock()
        self._host_id = id_pool().acquire() if per_jail_ids() else None
        self._slot: Slot | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._buf = bytearray()
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 (held for the jail's life; closed in close())
        self.closed = False
        self.oom_killed: bool | None = None  # after close: whether the kernel's OOM killer acted in its cgroup
        try:
            self._start()
        except BaseException:
            self.close()
            raise

    def _start(self) -> None:
        policy = self.policy
        uid = self._host_id or policy.uid_outside
        gid = self._host_id or policy.gid_outside
        config = "\n".join(
            [
                config_text(policy),
                render_idmaps(policy, uid, gid),
                *(render_file_mount(host, target, writable=False) for target, host in self.binds.items()),
                render_exec(self.argv),
            ]
        ).encode()
        self._slot = prepared_slot(policy, own_tasks=2)
        config_r, config_w = os.pipe()
        cmd = [nsjail_binary(), "--config", f"/dev/fd/{config_r}", "--log_fd", "2"]

        def start() -> subprocess.Popen[bytes]:
            return subprocess.Popen(
                cmd,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._log,
                start_new_session=True,
                close_fds=True,
                pass_fds=(config_r,),
                env={"PATH": "/usr/bin:/bin"},
            )

        try:
            self._proc, in_slot = start_in_slot(self._slot, start)
        except OSError as exc:
            os.close(config_w)
            raise SessionLost(f"nsjail did not start: {exc}", started=False) from exc
        finally:
            os.close(config_r)
        if not (in_slot or join_slot(self._proc, self._slot)):
            os.close(config_w)
            raise SessionLost("could not put the session's jail in its cgroup slot", started=False)
        send_config(config_w, config + b"\n")
        try:
            hello = self._read_reply(time.monotonic() + START_TIMEOUT_S)
        except SessionLost as exc:
            raise SessionLost(f"the session's jail did not start: {exc}; {self.log_tail()}", started=False) from exc
        if not hello.get("ready"):
            raise SessionLost(f"the session's program did not say it was ready: {hello}", started=False)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def alive(self) -> bool:
        return not self.closed and self._proc is not None and self._proc.poll() is None

    def request(self, message: Mapping[str, Any], timeout: float) -> dict[str, Any]:
        """Send one request and wait for its reply; SessionLost if the jail died or said nothing for `timeout` s."""
        if not self.alive():
            raise SessionLost("the session's jail is gone")
        assert self._proc is not None and self._proc.stdin is not None
        try:
            self._proc.stdin.write(json.dumps(message).encode() + b"\n")
            self._proc.stdin.flush()
        except (BrokenPipeError, ValueError) as exc:
            raise SessionLost("the session's jail is gone") from exc
        return self._read_reply(time.monotonic() + timeout)

    def _read_reply(self, deadline: float) -> dict[str, Any]:
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        # poll, not select: a service holding hundreds of sessions has descriptors past select's FD_SETSIZE (1024)
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise SessionLost("the session's agent did not answer in time", timed_out=True)
            if not poller.poll(max(1, math.ceil(left * 1000))):
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise SessionLost("the session's jail ended")
            self._buf += chunk
            if len(self._buf) > MAX_REPLY_BYTES:
                raise SessionLost(f"the session's reply was over {MAX_REPLY_BYTES} bytes", too_big=True)
        line, _, rest = bytes(self._buf).partition(b"\n")
        self._buf = bytearray(rest)
        reply: dict[str, Any] = json.loads(line)
        return reply

    @staticmethod
    def _kill_init(nsjail_pid: int) -> None:
        """SIGKILL the jail's pid 1 (nsjail's child), through a pidfd checked to be that child: never another
        process that took a reused pid."""
        try:
            children = Path(f"/proc/{nsjail_pid}/task/{nsjail_pid}/children").read_text().split()
        except OSError:
            return
        for child in children:
            try:
                fd = os.pidfd_open(int(child))
            except OSError:
                continue
            try:
                status = Path(f"/proc/{child}/status").read_text()
                if f"\nPPid:\t{nsjail_pid}\n" in status:
                    signal.pidfd_send_signal(fd, signal.SIGKILL)
            except OSError:
                pass
            finally:
                os.close(fd)

    def log_tail(self, limit: int = 2000) -> str:
        try:
            self._log.seek(0)
            return self._log.read().decode(errors="replace")[-limit:].strip()
        except (OSError, ValueError):
            return ""

    def close(self) -> None:
        """Kill the jail (all of it), reap nsjail, give back the slot and the host id. Safe to call twice."""
        if self.closed:
            return
        self.closed = True
        proc = self._proc
        if proc is not None:
            # The jail's init first: nsjail reaps it and exits, so no part of the jail is left a zombie for the host's
            # init to reap (its host id would show in use past its release). nsjail itself if it lingers.
            self._kill_init(proc.pid)
            try:
                proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                kill_nsjail(proc)
                proc.wait()
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    try:
                        stream.close()
                    except BrokenPipeError:
                        pass
        if self._slot is not None:
            stats = RawRun()
            finish_slot(self._slot, stats)
            self.oom_killed = stats.oom_killed
            self._slot = None
        if self._host_id is not None:
            id_pool().release(self._host_id)
            self._host_id = None
        self._log.close()
