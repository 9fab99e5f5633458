"""Whatever ends a `groupscore` command, every process it started ends with it, within seconds.

What a command starts: the embedded service (demo, train), its scoring processes and their templates, nsjail (the warm
template jails among them), `groupscore check`'s target worker, a local Ray cluster and Serve's HAProxy (serve --ray).
Each has its own way to end with its owner (a closed socket or pipe, a watched parent, a context manager's exit), and
those run only when the owner ends through Python, as Ctrl-C makes it (KeyboardInterrupt unwinds every `with` block).
What ends a command in practice is mostly something else, so here, for the command's own process (`install`, called by
`main` when it is the program, not when a test calls it with arguments):

- **SIGTERM** (timeout, SLURM, Kubernetes, `docker stop`) and **SIGHUP** (a closed terminal) are handled as Ctrl-C: the
  handler does what SIGINT does at that moment (KeyboardInterrupt, or the running uvicorn server's own shutdown), so the
  same clean shutdown runs. A second SIGTERM or SIGHUP does not interrupt that shutdown. `nohup` still works: a SIGHUP
  ignored when the command starts stays ignored.
- **SIGINT** is handled even when it was inherited ignored: a non-interactive shell starts `cmd &` that way, and a
  script that started `groupscore serve` in the background could not stop it with SIGINT.
- **The parent dying** (the script or the trainer that started the command, killed or crashed): a thread notices that
  the parent changed and sends this process SIGHUP. Not watched when SIGHUP is ignored (nohup), when the parent is
  already init, or when the command leads its own session (`setsid`, a daemon tool: its starter exits on purpose).
- **Leftovers**: once the shutdown starts, this process becomes a child subreaper (orphans of its descendants come to
  it instead of init: HAProxy when Ray's proxy actor ends, a jail whose scoring process died), and when the command's
  function has returned, `end_descendants` sends every process still below it SIGTERM and, after a grace period,
  SIGKILL. Not a subreaper before that: an orphan that ends is a zombie until its new parent reaps it, and nothing
  else here could tell such orphans from the children that subprocess waits for (a long `serve` would pile them up).

Linux only where it matters (/proc, prctl); elsewhere the handlers still run and the rest does nothing.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
import time
from types import FrameType

PR_SET_CHILD_SUBREAPER = 36
PARENT_POLL_S = 0.25  # how often the parent is checked: the shutdown starts within this of its death
GRACE_S = 2.0  # end_descendants: from SIGTERM to SIGKILL

_received: int | None = None  # the first signal that started the shutdown
_subreaper = False
_ending = False  # end_descendants is running: signals are noted, never raised into it


def received() -> int | None:
    """The signal that ended the command (SIGINT, SIGTERM, SIGHUP), or None."""
    return _received


def exit_status(default: int = 130) -> int:
    """The shell's status for a command ended by `received()` (128 + the signal), else `default`."""
    return 128 + _received if _received is not None else default


def install() -> None:
    """Handle SIGINT, SIGTERM and SIGHUP as one clean shutdown, and start watching the parent (see the module)."""
    hup_ignored = signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    signals = [signal.SIGINT, signal.SIGTERM] + ([] if hup_ignored else [signal.SIGHUP])
    for signum in signals:
        signal.signal(signum, _on_signal)
    parent = os.getppid()
    if not hup_ignored and parent > 1 and os.getsid(0) != os.getpid():
        threading.Thread(target=_watch_parent, args=(parent,), name="parent-watch", daemon=True).start()
    atexit.register(_at_exit)  # first registered, so it runs last: after the pools' and templates' own hooks


def finish(status: int) -> int:
    """The command's function returned `status`. After a signal, the process ends now: the exit hooks run at once
    (pools, templates, cgroup slots closed in order), then `end_descendants`, and no thread is waited for (a batch
    whose items still run would otherwise go on scoring, and start new workers, until it was done). Otherwise
    `status` is returned and the same happens at the interpreter's exit."""
    if _received is None:
        return status
    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(status)


def _at_exit() -> None:
    left = end_descendants()
    if left and _received is None:  # after a signal, busy workers are expected here; otherwise something leaked
        print(f"groupscore: ended {len(left)} processes still running at exit", file=sys.stderr)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    global _received
    first = _received is None
    if first:
        _received = signum
    become_subreaper()
    if _ending or (not first and signum != signal.SIGINT):
        return  # the shutdown is under way; only Ctrl-C interrupts it (as it always did)
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler) and handler is not _on_signal:
        handler(signal.SIGINT, frame)  # what SIGINT does now: uvicorn's own shutdown while a server runs
        return
    raise KeyboardInterrupt


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    os.kill(os.getpid(), signal.SIGHUP)


def become_subreaper() -> None:
    """From now on, orphans of this process's descendants are reparented to it (so `end_descendants` finds them)."""
    global _subreaper
    if _subreaper or not sys.platform.startswith("linux"):
        return
    _subreaper = True
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _running_children() -> dict[int, list[int]]:
    """ppid -> pids of every process in /proc that has not ended (zombies left out)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return children
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue  # it ended while we looked
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1 and fields[0] not in (b"Z", b"X"):
            children.setdefault(int(fields[1]), []).append(int(entry))
    return children


def descendants(root: int | None = None) -> list[int]:
    """Every running process below `root` (default: this one), parents before their children."""
    children = _running_children()
    found: list[int] = []
    todo = [os.getpid() if root is None else root]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


def end_descendants(grace_s: float = GRACE_S) -> list[int]:
    """SIGTERM every process still running below this one, SIGKILL those left after `grace_s`; returns the pids that
    had to be signalled (none when the command's own shutdown ended everything it started). A signal that comes
    meanwhile does not interrupt it."""
    global _ending
    become_subreaper()
    _ending = True
    try:
        signalled = descendants()
        if not signalled:
            return []
        for pid in signalled:
            _kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        left = descendants()
        while left and time.monotonic() < deadline:
            time.sleep(0.05)
            left = descendants()
        for _ in range(3):  # SIGKILL ends them at once; orphans of the killed come to us and are taken next round
            if not left:
                break
            for pid in left:
                _kill(pid, signal.SIGKILL)
            signalled += [pid for pid in left if pid not in signalled]
            time.sleep(0.05)
            left = descendants()
        return signalled
    finally:
        _ending = False


def _kill(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass
