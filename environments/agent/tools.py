"""The session's tools as the agent runs them, each in a process of its own: `shell` (a bash per step, the working
directory carried between steps), `python` and class tools (long-lived children, child.py), the file tools and
`sqlite` (in the agent itself: they run no code of the model's). `cap_reply` cuts what any of them replies, at one
place, to the step's cap.
"""

import json
import os
import time

from .procs import Child, Output, children, kill_group, spawn, wait_child

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# $1: the tool's CPU seconds, set on itself before anything of the step runs (a limit the agent set from outside
# would need prlimit on another process, which the jail's seccomp policy refuses so that no tool can lower the agent's).
SHELL_SCRIPT = (
    'if [ -n "$1" ]; then ulimit -t "$1"; fi; set --; '
    'trap \'gs_s=$?; pwd >&3 2>/dev/null; exit $gs_s\' EXIT; cd -- "$GS_CWD" 2>/dev/null || cd -- "$HOME"; '
    'exec 3<&3; eval "$GS_COMMAND"'
)

MAX_ROWS_BYTES = 16 << 20  # a checker's query result, as JSON

# The session: its working directory, environment, database, and the long-lived children of its tools.
state: "dict[str, Any]" = {
    "cwd": None,
    "workdir": None,
    "env": dict(os.environ),
    "db": None,
    "python": None,
    "classes": None,
    "tool_cpu_s": None,
}


def run_shell(msg):
    out_r, out_w = os.pipe()
    cwd_r, cwd_w = os.pipe()
    env = dict(state["env"], GS_CWD=state["cwd"], GS_COMMAND=msg["command"])
    null = os.open("/dev/null", os.O_RDONLY)
    pid = spawn(
        ["/bin/bash", "--noprofile", "--norc", "-c", SHELL_SCRIPT, "/bin/bash", tool_cpu()],
        env,
        {0: null, 1: out_w, 2: out_w, 3: cwd_w},
    )
    for fd in (out_w, cwd_w, null):
        os.close(fd)
    output = Output(out_r, msg["max_output"])
    finished, _ = wait_child(pid, [output], time.monotonic() + msg["timeout"])
    if not finished:
        kill_group(pid)
        output.read()
    os.set_blocking(cwd_r, False)
    try:
        cwd = os.read(cwd_r, 4096).decode(errors="replace").strip().splitlines()
    except BlockingIOError:
        cwd = []
    for fd in (out_r, cwd_r):
        os.close(fd)
    if cwd and cwd[-1].startswith("/"):
        state["cwd"] = cwd[-1]
    if not finished:
        return {"ok": True, "output": output.text(), "timed_out": True, "exit_code": None}
    return {"ok": True, "output": output.text(), "timed_out": False, "exit_code": children.pop(pid)}


# The fields of a tool's reply that make the model's observation, in the order they take from its one cap (the error
# first: it says what went wrong), and the task encoder's text of a call (the checker's record, cut on its own).
OBSERVED = ("error", "result", "output")
CUT_SLACK = 64  # room for the note a reader adds when it cut (Output.text): a reply cut there is not cut again


def cap_reply(reply, cap):
    """The reply with its observed fields together at most `cap` bytes of UTF-8 (a result that is not text, as its
    JSON), each cut said in its field. What a tool produces is the agent's doing whatever its size: it is cut here, in
    the jail, at one place for every tool, never left for the host to refuse (a reply the host cannot take would
    count as the server losing the session)."""
    left = cap
    for key in OBSERVED:
        left -= _cut_field(reply, key, left)
    _cut_field(reply, "text", cap)
    return reply


def _cut_field(reply, key, room):
    """Cut reply[key] to `room` bytes (said); the bytes it keeps."""
    value = reply.get(key)
    if value is None or isinstance(value, (bool, int, float)):
        return 0
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    data = text.encode("utf-8", "replace")
    if len(data) <= room + CUT_SLACK:
        return len(data)
    kept = data[: max(room, 0)].decode("utf-8", "ignore")
    reply[key] = kept + f"\n[output cut: {len(data) - len(kept.encode())} more bytes]"
    reply["cut"] = True
    return len(kept.encode())


def tool_cpu():
    """The tools' CPU seconds as an argument ("" for none: they keep the agent's, the jail's wall time)."""
    return str(state["tool_cpu_s"]) if state["tool_cpu_s"] else ""


def child_env():
    return dict(state["env"], PWD=state["cwd"])


def run_python(msg):
    if state["python"] is None:
        child = Child("python", child_env(), tool_cpu())
        child.ask({"code": f"import os; os.chdir({state['cwd']!r})"}, 10, 1024)
        state["python"] = child
    reply, text = state["python"].ask({"code": msg["code"]}, msg["timeout"], msg["max_output"])
    if reply is None:
        state["python"].stop()
        state["python"] = None
        return {"ok": True, "output": text, "timed_out": True, "lost": True}
    return {"ok": True, "output": text, "timed_out": False, "error": reply.get("error")}


def run_call(msg):
    host = state["classes"]
    if host is None:
        return {"ok": True, "error": "this task has no class tools", "output": ""}
    reply, text = host.ask(
        {"op": "call", "name": msg["name"], "arguments": msg["arguments"]}, msg["timeout"], msg["max_output"]
    )
    if reply is None:
        host.stop()
        state["classes"] = None
        return {"ok": True, "output": text, "timed_out": True, "lost": True}
    return {
        "ok": True,
        "output": text,
        "result": reply.get("result"),
        "error": reply.get("error"),
        "text": reply.get("text"),
    }


def resolve(path, base=None):
    return os.path.normpath(os.path.join(base or state["cwd"], path))


def run_file(msg):
    path = resolve(msg.get("path") or ".")
    op = msg["op"]
    try:
        if op == "read_file":
            with open(path, "rb") as fh:
                data = fh.read(msg["max_output"] + 1)
            text = data[: msg["max_output"]].decode("utf-8", errors="replace")
            if len(data) > msg["max_output"]:
                text += "\n[file cut at the output cap]"
            return {"ok": True, "output": text}
        if op == "write_file":
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(msg["content"])
            return {"ok": True, "output": f"wrote {len(msg['content'].encode())} bytes to {path}"}
        lines = []
        for name in sorted(os.listdir(path)):
            full = os.path.join(path, name)
            kind = "link" if os.path.islink(full) else "dir" if os.path.isdir(full) else "file"
            size = os.lstat(full).st_size
            lines.append(f"{kind}\t{size}\t{name}")
        return {"ok": True, "output": "\n".join(lines)}
    except OSError as exc:
        return {"ok": True, "error": f"{type(exc).__name__}: {exc.strerror or exc}", "output": ""}


def run_sqlite(msg):
    import sqlite3

    if state["db"] is None:
        return {"ok": True, "error": "this task has no database", "output": ""}
    deadline = time.monotonic() + msg["timeout"]
    con = sqlite3.connect(resolve(state["db"], state["workdir"]), isolation_level=None)
    con.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, 1000)
    if msg.get("raw") and msg.get("views") is not None:  # a checker's: tables and the task's views, not the agent's
        allowed = set(msg["views"])
        con.set_authorizer(lambda _action, _a, _b, _db, view: 1 if view is not None and view not in allowed else 0)
    try:
        cur = con.execute(msg["query"])
        cols = [d[0] for d in cur.description or []]
        rows = cur.fetchmany(10_001)
        if msg.get("raw"):
            raw = [list(map(_plain, r)) for r in rows]
            if len(json.dumps(raw)) > MAX_ROWS_BYTES:  # the database is the agent's: so is the size of what it gives
                return {"ok": True, "error": f"the query's rows are above {MAX_ROWS_BYTES} bytes", "output": ""}
            return {"ok": True, "rows": raw, "columns": cols, "output": ""}
        lines = ["\t".join(cols)] if cols else []
        lines += ["\t".join("NULL" if v is None else str(v) for v in r) for r in rows]
        text = "\n".join(lines) if cols else f"ok ({con.total_changes} rows changed)"
        if len(text.encode()) > msg["max_output"]:
            text = text.encode()[: msg["max_output"]].decode(errors="replace") + "\n[output cut]"
        return {"ok": True, "output": text}
    except sqlite3.Error as exc:
        return {"ok": True, "error": f"{type(exc).__name__}: {exc}", "output": ""}
    finally:
        con.close()


def _plain(v):
    import base64

    return base64.b64encode(v).decode() if isinstance(v, bytes) else v
