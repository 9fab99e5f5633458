"""The seccomp-bpf program nsjail installs for our policy, read back from a live jail (for the warm template).

kafel compiles the policy (seccomp.py) inside nsjail; the warm template's runs must install exactly that program, not
a second compilation of the same rules. So one jail is started, stopped with ptrace, and its filter read with
PTRACE_SECCOMP_GET_FILTER (root only: CAP_SYS_ADMIN, and a kernel with CONFIG_CHECKPOINT_RESTORE). Where that cannot
be done, the warm template is not used and runs go through nsjail as before.
"""

from __future__ import annotations

import ctypes
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable

from groupscore.sandbox.errors import SandboxUnavailable

PTRACE_ATTACH, PTRACE_DETACH, PTRACE_SECCOMP_GET_FILTER = 16, 17, 0x420C
_WALL = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def _find_marked(marker: bytes, deadline: float, errors: list[BaseException]) -> int:
    """The pid of the jail's init, found by the marker in its command line."""
    while time.monotonic() < deadline and not errors:
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/cmdline", "rb") as fh:
                    args = fh.read().split(b"\0")
            except OSError:
                continue
            if marker in args and b"nsjail" not in os.path.basename(args[0]):
                return int(name)
        time.sleep(0.01)
    raise SandboxUnavailable(f"seccomp capture: the probe jail did not start ({errors[0] if errors else 'timeout'})")


def read_filter(pid: int) -> bytes:
    """The newest seccomp filter of process `pid` (stopped and released here), as raw sock_filter bytes."""
    if _libc.ptrace(PTRACE_ATTACH, pid, None, None) != 0:
        raise SandboxUnavailable(f"seccomp capture: ptrace attach failed ({os.strerror(ctypes.get_errno())})")
    try:
        os.waitpid(pid, _WALL)
        count = _libc.ptrace(PTRACE_SECCOMP_GET_FILTER, pid, ctypes.c_void_p(0), None)
        if count <= 0:
            raise SandboxUnavailable(
                f"seccomp capture: PTRACE_SECCOMP_GET_FILTER failed ({os.strerror(ctypes.get_errno())})"
            )
        buf = ctypes.create_string_buffer(count * 8)
        if _libc.ptrace(PTRACE_SECCOMP_GET_FILTER, pid, ctypes.c_void_p(0), buf) != count:
            raise SandboxUnavailable("seccomp capture: the filter changed while read")
        return buf.raw
    finally:
        _libc.ptrace(PTRACE_DETACH, pid, None, None)


def capture(run_sleeper: Callable[[str], object]) -> bytes:
    """Start a jail through `run_sleeper(marker)` (it blocks until that jail ends), read its filter, end the jail."""
    marker = f"groupscore-seccomp-{uuid.uuid4().hex}"
    errors: list[BaseException] = []

    def target() -> None:
        try:
            run_sleeper(marker)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    thread = threading.Thread(target=target, name="groupscore-seccomp-capture", daemon=True)
    thread.start()
    pid = None
    try:
        pid = _find_marked(marker.encode(), time.monotonic() + 20, errors)
        return read_filter(pid)
    finally:
        if pid is not None:
            try:
                os.kill(pid, signal.SIGKILL)  # the jail's pid 1: its whole pid namespace goes with it
            except ProcessLookupError:
                pass
        thread.join(30)
