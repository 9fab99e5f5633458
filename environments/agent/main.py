"""The session agent: pid 1 of a session's jail, run by the jail's own Python (standard library only).

It reads one request a line on stdin and writes one reply a line on stdout (protocol.py; environments/session.py and
checkers.py are the other end). Every tool runs in a child process of its own, in its own process group (tools.py,
procs.py); every reply's observed fields are cut at one place (`cap_reply`); orphans are reaped (the agent is the pid
namespace's init: from inside the jail no signal reaches it that it has not asked for, so a policy cannot end its own
session's agent). It asks for none that would end it: SIGINT, which CPython handles by default, is ignored (its
children get the default back). Its own CPU limit is the jail's wall time; each tool process sets the task's CPU limit
on itself (`tool_cpu_s`), so a policy that makes the agent read a flood of output cannot run the agent out of CPU and
have its session counted lost; and no tool can lower the agent's limits (the seccomp policy refuses prlimit on another
process).

`finish` ends the episode: every other process of the jail is killed, then the state is packed (state.py) and sent
back; `check` runs a hidden test over a restored state, in a fresh jail after the episode, with a HOME and TMPDIR of
its own.

The package is bound read-only into every jail (protocol.JAIL_DIR) and imports nothing but the standard library and
itself; modules it needs only for some requests (base64, sqlite3, tarfile) are imported where they are used, so a
session's start (every reset) pays only for what its first request needs.
"""

import json
import os
import signal
import sys
import time

from .procs import DEFAULT_SIGNALS, WAKE, Child, reap
from .protocol import TOOL_OPS
from .state import pack, safe_extract
from .tools import (
    cap_reply,
    child_env,
    resolve,
    run_call,
    run_file,
    run_python,
    run_shell,
    run_sqlite,
    state,
    tool_cpu,
)

# The class tools' state (a checker's data, never an observation) may be this large; past it the state is missing.
STATE_REPLY_BYTES = 64 << 20
# The packed state in one reply, below what the host reads of one (session_launcher.MAX_REPLY_BYTES, 256 MiB) once
# base64 has grown it by a third: a larger state is the agent's doing, said as such (finish), never a lost session.
MAX_STATE_BYTES = 160 << 20

# A checker's HOME and TMPDIR: empty, on the checker's own tmpfs (/logs), never a directory the agent wrote.
CHECK_HOME, CHECK_TMP = "/logs/home", "/logs/tmp"


def init(msg):
    import base64
    import sqlite3

    state["tool_cpu_s"] = msg.get("tool_cpu_s")
    state["workdir"] = state["cwd"] = msg["workdir"]
    state["env"] = dict(os.environ, **msg["env"], HOME=msg["workdir"], PWD=msg["workdir"])
    for d in msg["roots"]:
        os.makedirs(d, exist_ok=True)
    packed = msg.pop("tar", None)  # the request's only reference: freed once decoded (a state may be large)
    data = base64.b64decode(packed) if packed else b""
    del packed
    skipped = safe_extract(data, msg["roots"]) if data else []
    del data
    for name, text in msg.get("files", {}).items():
        path = resolve(name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
    if msg.get("database"):
        state["db"] = msg["database"]["path"]
        con = sqlite3.connect(resolve(state["db"]), isolation_level=None)
        try:
            con.executescript(msg["database"]["sql"])
        finally:
            con.close()
    if msg.get("classes"):
        host = Child("classes", child_env(), tool_cpu(), msg["roots"])
        reply, text = host.ask({"op": "load", "classes": msg["classes"]}, msg.get("timeout", 30), 65536)
        if reply is None or not reply.get("ok"):
            host.stop()
            return {"ok": False, "error": f"class tools did not load: {(reply or {}).get('error') or text[-2000:]}"}
        state["classes"] = host
        return {"ok": True, "methods": reply["methods"], "not_carried": skipped}
    return {"ok": True, "not_carried": skipped}


def class_state(msg):
    if state["classes"] is None:
        return {"ok": True, "state": None}
    try:
        os.kill(state["classes"].pid, signal.SIGCONT)  # the model's shell may have stopped it (same uid)
    except ProcessLookupError:
        pass
    reply, _ = state["classes"].ask({"op": "state"}, msg.get("timeout", 30), 4096, reply_limit=STATE_REPLY_BYTES)
    if reply is None:  # no answer in time: its late reply must not be read as the next request's
        state["classes"].stop()
        state["classes"] = None
    return {"ok": True, "state": None if reply is None else reply.get("state")}


def kill_all_others(wait_s=2.0):
    """Kill every process of the jail but the agent (it is init) and wait until none is left, reaping them: nothing
    may still be writing while the state is packed or a reward read."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
        reap()
        others = [p for p in os.listdir("/proc") if p.isdigit() and p != "1"]
        if not others or time.monotonic() > deadline:
            return
        time.sleep(0.001)


def finish(msg):
    kill_all_others()
    state["python"] = state["classes"] = None
    try:
        data, odd = pack(msg["roots"], min(msg["max_bytes"], MAX_STATE_BYTES))
    except OverflowError as exc:
        return {"ok": True, "tar": None, "error": str(exc)}
    return {"ok": True, "not_carried": odd[:100], "tar": data}  # written out in base64 as it goes (write_reply)


def check(msg):
    """After the episode, in a jail of its own: the state, then the tests, then the command; the reward file.

    Nothing of the agent's steers the test but the state it judges: its programs' HOME and TMPDIR are fresh and empty
    (unless the task sets HOME), so no start-up file the agent wrote (~/.sqliterc, ~/.jq, ~/.gitconfig, ~/.curlrc,
    XDG config, ...) is read; links were confined when the state was restored (safe_extract)."""
    import base64

    started = init(
        {
            "workdir": msg["workdir"],
            "env": msg["env"],
            "roots": msg["roots"],
            "tar": msg.pop("tar", None),
            "tool_cpu_s": msg.get("tool_cpu_s"),
        }
    )
    home = msg["env"].get("HOME") or CHECK_HOME
    for d in ("/tests", "/logs/verifier", home, CHECK_TMP):
        os.makedirs(d, exist_ok=True)
    state["env"].update(HOME=home, TMPDIR=CHECK_TMP)
    safe_extract(base64.b64decode(msg["tests"]), ["/tests"])
    if msg.get("db_path"):
        state["db"] = msg["db_path"]
        query = {"query": msg["query"], "timeout": msg["timeout"], "max_output": 1 << 20, "raw": True}
        return run_sqlite({**query, "views": msg.get("views", [])})  # None (the task allows the agent's views): any
    result = run_shell({"command": msg["command"], "timeout": msg["timeout"], "max_output": msg["max_output"]})
    kill_all_others()  # what the test started (the agent's code among it) cannot write the reward after the test
    result["not_carried"] = started.get("not_carried", [])[:100]
    for name in ("reward.txt", "reward.json"):
        try:
            with open("/logs/verifier/" + name, "rb") as fh:
                result[name.replace(".", "_")] = fh.read(65536).decode("utf-8", errors="replace")
        except OSError:
            pass
    return result


OPS = {
    "init": init,
    "shell": run_shell,
    "python": run_python,
    "call": run_call,
    "read_file": run_file,
    "write_file": run_file,
    "list_files": run_file,
    "sqlite": run_sqlite,
    "state": class_state,
    "finish": finish,
    "check": check,
}


def undumpable():
    """PR_SET_DUMPABLE 0: the model's processes (the same uid) cannot open this process's /proc/pid/fd, mem or
    environ, so they cannot write requests into the class host's pipes or read the agent's."""
    import ctypes

    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)


def main():
    undumpable()
    for signum in DEFAULT_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)  # a flood of SIGCHLD from a tool: nothing to say
    signal.signal(signal.SIGCHLD, lambda *_: None)
    WAKE.append(wake_r)
    os.umask(0o022)
    out = os.fdopen(1, "w", encoding="utf-8")
    out.write(json.dumps({"ok": True, "ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        reap()
        try:
            msg = json.loads(line)
            del line  # a restore's request holds a whole state: one copy of it at a time
            reply = OPS[msg["op"]](msg)
            if msg["op"] in TOOL_OPS:
                reply = cap_reply(reply, msg["max_output"])
        except Exception as exc:  # noqa: BLE001 a bad request, or the agent's own failure: said, and the agent goes on
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:4000]}
        write_reply(out, reply)


def write_reply(out, reply, chunk=3 << 20):
    """One reply line. A packed state (`tar`, bytes) is written in base64 a chunk at a time, never held whole as text
    (a chunk of a multiple of 3 bytes encodes to base64 that joins with the next)."""
    data = reply.pop("tar") if isinstance(reply.get("tar"), (bytes, memoryview)) else None
    text = json.dumps(reply, ensure_ascii=False)
    # A lone surrogate (a tool's text can hold one) is no UTF-8: replaced here, so the host reads valid UTF-8.
    if not text.isascii():
        text = text.encode("utf-8", "replace").decode("utf-8")
    if data is None:
        out.write(text + "\n")
    else:
        import base64

        out.write(text[:-1] + ', "tar": "')
        for start in range(0, len(data), chunk):
            out.write(base64.b64encode(data[start : start + chunk]).decode())
        out.write('"}\n')
    out.flush()
