"""The agent's child processes: started in sessions of their own, their output read up to a cap, their exits reaped.

The agent is the jail's init: every process of the jail that exits is its child to reap (`reap`), and SIGCHLD writes to
a pipe (`WAKE`, set up by main) so that a child's exit ends a wait at once. `Child` is a long-lived child (the python
tool's interpreter, the class tools' host: child.py) spoken to one JSON line at a time on its fds 3 and 4.
"""

import json
import os
import select
import signal
import sys
import time

from .protocol import BOOT

# What the agent ignores and its children must not inherit ignored (an ignored disposition survives exec).
DEFAULT_SIGNALS = (signal.SIGINT, signal.SIGPIPE, signal.SIGXFSZ)

# The read end of the pipe SIGCHLD writes to (signal.set_wakeup_fd): a child's exit ends a select at once.
WAKE: "list[int]" = []
children: "dict[int, int | None]" = {}  # pid -> exit status (None while running) of the agent's own children


def poll_readable(fds, timeout_s):
    """The descriptors of `fds` ready to read (or at their end) within `timeout_s`; poll, as select fails on a
    descriptor past FD_SETSIZE."""
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    return [fd for fd, _ in poller.poll(max(0, int(timeout_s * 1000)))]


def reap():
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid in children:
            children[pid] = os.waitstatus_to_exitcode(status)


def spawn(argv, env, fds):
    """Start argv in a session of its own with fds {child fd: our fd}; returns its pid."""
    actions = [(os.POSIX_SPAWN_DUP2, ours, theirs) for theirs, ours in fds.items()]
    pid = os.posix_spawn(argv[0], argv, env, file_actions=actions, setsid=True, setsigdef=DEFAULT_SIGNALS)
    children[pid] = None
    try:  # the tools' processes are the OOM killer's first choice, never the agent (raising it needs no privilege)
        with open(f"/proc/{pid}/oom_score_adj", "w") as fh:
            fh.write("1000")
    except OSError:
        pass
    return pid


def kill_group(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class Output:
    """A child's output, read up to a cap (the rest is counted, not kept)."""

    def __init__(self, fd, cap):
        self.fd, self.cap, self.buf, self.dropped, self.open = fd, cap, bytearray(), 0, True
        os.set_blocking(fd, False)

    def read(self):
        while self.open:
            try:
                chunk = os.read(self.fd, 65536)
            except BlockingIOError:
                return
            if not chunk:
                self.open = False
                return
            room = self.cap - len(self.buf)
            self.buf += chunk[: max(room, 0)]
            self.dropped += max(0, len(chunk) - max(room, 0))

    def text(self):
        out = self.buf.decode("utf-8", errors="replace")
        if self.dropped:
            out += f"\n[output cut: {self.dropped} more bytes]"
        return out


def wait_child(pid, outputs, deadline, reply_fd=None, reply_limit=0):
    """Read outputs until pid exits (or, with reply_fd, a reply line of at most reply_limit bytes arrives); False at
    the deadline, or when the reply is longer."""
    line = bytearray()
    while True:
        reap()
        if reply_fd is None and children.get(pid) is not None:
            break
        if reply_fd is not None and children.get(pid) is not None:
            return False, None
        left = deadline - time.monotonic()
        if left <= 0:
            return False, None
        fds = [o.fd for o in outputs if o.open] + ([reply_fd] if reply_fd is not None else []) + WAKE
        ready = poll_readable(fds, min(left, 0.5))
        if WAKE and WAKE[0] in ready:
            try:
                os.read(WAKE[0], 4096)
            except BlockingIOError:
                pass
        for o in outputs:
            if o.fd in ready:
                o.read()
        if reply_fd is not None and reply_fd in ready:
            chunk = os.read(reply_fd, 65536)
            if not chunk:
                return False, None
            line += chunk
            if len(line) > reply_limit:  # the child cuts its own fields; a line past that is not one of its replies
                return False, None
            if line.endswith(b"\n"):
                for o in outputs:
                    o.read()
                return True, json.loads(line)
    for o in outputs:
        o.read()  # what is there now; a background job may hold the pipe open, so no wait for its end
    return True, None


class Child:
    """A long-lived child (the python tool's interpreter, the class tools' host) spoken to on its fds 3 and 4."""

    def __init__(self, mode, env, cpu_s, roots=()):
        """roots: for the class host, where the agent writes (nothing there goes on its import path)."""
        req_r, self.req_w = os.pipe()
        self.rep_r, rep_w = os.pipe()
        self.out_r, out_w = os.pipe()
        null = os.open("/dev/null", os.O_RDONLY)
        # The class host is ours and holds the state a checker compares: nothing it imports may come from where the
        # agent writes (-P: no current directory on sys.path; -s: no user site under HOME, the work dir). The python
        # tool's interpreter is the agent's own: it puts its working directory back on its path (child.py).
        isolated = ["-s"] if mode == "classes" else []
        boot = BOOT.replace(".main import main", ".child import main")
        argv = [sys.executable, *isolated, "-P", "-q", "-u", "-c", boot, mode, cpu_s, json.dumps(list(roots))]
        self.pid = spawn(argv, env, {0: null, 1: out_w, 2: out_w, 3: req_r, 4: rep_w})
        for fd in (req_r, rep_w, out_w, null):
            os.close(fd)

    def ask(self, msg, timeout, cap, reply_limit=0):
        """(reply or None on timeout, death or a reply over reply_limit bytes, output text). The child cuts each field
        of a reply to `cap` characters (JSON escapes them in up to 12 bytes each): the default limit holds that."""
        output = Output(self.out_r, cap)
        output.buf.clear()
        try:
            os.write(self.req_w, (json.dumps({**msg, "cap": cap}) + "\n").encode())
        except BrokenPipeError:
            return None, ""
        limit = reply_limit or 40 * cap + 65536
        got, reply = wait_child(self.pid, [output], time.monotonic() + timeout, reply_fd=self.rep_r, reply_limit=limit)
        return (reply if got else None), output.text()

    def stop(self):
        kill_group(self.pid)
        for fd in (self.req_w, self.rep_r, self.out_r):
            os.close(fd)
