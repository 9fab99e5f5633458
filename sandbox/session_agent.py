"""The session agent: pid 1 of a session's jail, run by the jail's own Python (standard library only).

It reads one JSON request per line on stdin and writes one JSON reply per line on stdout (session_launcher.py is
the other end). Every tool runs in a child process of its own, in its own process group: `shell` a bash per step
(the working directory is carried from step to step), `python` one interpreter kept for the session (its own
process, so code it runs never holds the agent's state), class tools one process holding the instances. Output is
read up to a cap, every reply's observed fields are cut at one place (`cap_reply`), a step is killed at its time
limit, and orphans are reaped (the agent is the pid namespace's init:
from inside the jail no signal reaches it that it has not asked for, so a policy cannot end its own session's agent).
It asks for none that would end it: SIGINT, which CPython handles by default, is ignored (its children get the default
back). Its own CPU limit is the jail's wall time; each tool process sets the task's CPU limit on itself
(`tool_cpu_s`), so a policy that makes the agent read a flood of output cannot run the agent out of CPU and have its
session counted lost; and no tool can lower the agent's limits (the seccomp policy refuses prlimit on another process).

`finish` ends the episode: every other process of the jail is killed, then the state directories are packed as a
tar (regular files, directories, symlinks, hard links and FIFOs, with modes and times) and sent back. A restore
(`safe_extract`) unpacks such a tar without writing through a symlink and keeps only the links that resolve, now and
within the state or the read-only system tree; `check` runs a hidden test over a restored state (in a fresh jail,
after the episode), with a HOME and TMPDIR of its own.

One module because the jail's interpreter runs it as a script with nothing of ours importable (only this file is
bound into the jail): the protocol, every tool, and the packing must travel as one file.
"""

import json
import os
import select
import signal
import sys
import time

TYPE_CHECKING = False  # mypy reads the block below; the jail's Python never imports typing (it costs each start)
if TYPE_CHECKING:
    from typing import Any

# base64, io, sqlite3, stat and tarfile are imported where they are used: a session's start (every reset) pays only
# for what its first request needs (bench/RESULTS.md, "Environments": about 10 ms of CPU a start).

CHILD_CODE = r"""
import ast, json, os, sys, traceback
req = os.fdopen(3, "r", encoding="utf-8")
rep = os.fdopen(4, "w", encoding="utf-8")
mode = sys.argv[1]
cpu_s = sys.argv.pop(2)  # the tool's CPU seconds ("" for none), set on itself (see SHELL_SCRIPT)
if cpu_s:
    import resource
    resource.setrlimit(resource.RLIMIT_CPU, (int(cpu_s), int(cpu_s)))
if mode == "classes":
    import ctypes
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: the model's processes cannot open our /proc/pid/fd
    sys.path[:] = [p for p in sys.path if os.path.isabs(p)]  # an empty PYTHONPATH entry would be the work dir
ns = {"__name__": "__main__"}
instances = {}
methods = {}

encoder = {}  # a task's own state encoding (public_state, result_text, error_text), when it brings one


def cut(text, n):  # text cut to n characters, the cut said: what a tool makes may be any size, a reply may not
    return text if len(text) <= n else text[:n] + f"\n[output cut: {len(text) - n} more characters]"



def jsonable(v, path=()):
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if id(v) in path or len(path) > 30:
        return "<cycle>"  # a link back up (a tree's parent): named, never followed
    path = (*path, id(v))
    if isinstance(v, dict):
        return {str(k): jsonable(x, path) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x, path) for x in v]
    if isinstance(v, (set, frozenset)):
        return sorted((jsonable(x, path) for x in v), key=repr)
    if hasattr(v, "__dict__"):
        out = {"__class__": type(v).__name__}
        out.update({k: jsonable(x, path) for k, x in vars(v).items() if not k.startswith("_")})
        return out
    return repr(v)

def load(spec):
    import importlib
    if spec.get("encoder") and not encoder:
        exec(compile(spec["encoder"], "<state encoder>", "exec"), encoder)
    if spec.get("source") is not None:
        import types
        mod = types.ModuleType("gs_class_" + spec["class_name"])
        sys.modules[mod.__name__] = mod
        exec(compile(spec["source"], "<class " + spec["class_name"] + ">", "exec"), mod.__dict__)
    else:
        mod = importlib.import_module(spec["module"])
    obj = getattr(mod, spec["class_name"])(**spec.get("init_args", {}))
    if spec.get("setup"):
        getattr(obj, spec["setup"])(**spec.get("setup_args", {}))
    instances[spec["class_name"]] = obj
    names = spec.get("methods") or [n for n in dir(obj) if not n.startswith("_") and callable(getattr(obj, n))]
    for n in names:
        methods[n] = obj

for line in req:
    msg = json.loads(line)
    cap = msg.get("cap", 1 << 20)
    reply = {"ok": True}
    try:
        if mode == "python":
            tree = ast.parse(msg["code"], "<python>", "exec")
            last = None
            if tree.body and isinstance(tree.body[-1], ast.Expr):
                last = ast.Expression(tree.body.pop().value)
            exec(compile(tree, "<python>", "exec"), ns)
            if last is not None:
                value = eval(compile(last, "<python>", "eval"), ns)
                if value is not None:
                    print(repr(value))
        elif msg["op"] == "load":
            for spec in msg["classes"]:
                load(spec)
            reply["methods"] = sorted(methods)
        elif msg["op"] == "call":
            obj = methods.get(msg["name"])
            if obj is None:
                raise LookupError("no tool named " + repr(msg["name"]))
            try:
                result = getattr(obj, msg["name"])(**msg["arguments"])
            except Exception as exc:
                if encoder:
                    reply["text"] = cut(str(encoder["error_text"](exc)), cap)
                raise
            value = jsonable(result)
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            reply["result"] = value if len(text) <= cap else cut(text, cap)
            if encoder:
                reply["text"] = cut(str(encoder["result_text"](result)), cap)
        elif msg["op"] == "state":
            if encoder:
                reply["state"] = encoder["public_state"](instances)
            else:
                reply["state"] = {name: jsonable(obj) for name, obj in instances.items()}
    except SystemExit as exc:
        reply = {"ok": False, "error": cut("SystemExit: " + repr(exc.code), cap)}
    except BaseException as exc:
        if mode == "python":
            traceback.print_exc()
        try:
            error = type(exc).__name__ + ": " + cut(str(exc), cap)
        except BaseException:  # noqa: BLE001 an exception whose str() fails is still the tool's error
            error = type(exc).__name__
        reply = {"ok": False, "error": error, "text": reply.get("text")}
    sys.stdout.flush()
    sys.stderr.flush()
    rep.write(json.dumps(reply) + "\n")
    rep.flush()
"""

# $1: the tool's CPU seconds, set on itself before anything of the step runs (a limit the agent set from outside
# would need prlimit on another process, which the jail's seccomp policy refuses so that no tool can lower the agent's).
SHELL_SCRIPT = (
    'if [ -n "$1" ]; then ulimit -t "$1"; fi; set --; '
    'trap \'gs_s=$?; pwd >&3 2>/dev/null; exit $gs_s\' EXIT; cd -- "$GS_CWD" 2>/dev/null || cd -- "$HOME"; '
    'exec 3<&3; eval "$GS_COMMAND"'
)

# What the agent ignores and its children must not inherit ignored (an ignored disposition survives exec).
DEFAULT_SIGNALS = (signal.SIGINT, signal.SIGPIPE, signal.SIGXFSZ)

# The class tools' state (a checker's data, never an observation) may be this large; past it the state is missing.
STATE_REPLY_BYTES = 64 << 20
# The packed state in one reply, below what the host reads of one (session_launcher.MAX_REPLY_BYTES, 256 MiB) once
# base64 has grown it by a third: a larger state is the agent's doing, said as such (finish), never a lost session.
MAX_STATE_BYTES = 160 << 20

MAX_ROWS_BYTES = 16 << 20  # a checker's query result, as JSON
# A checker's HOME and TMPDIR: empty, on the checker's own tmpfs (/logs), never a directory the agent wrote.
CHECK_HOME, CHECK_TMP = "/logs/home", "/logs/tmp"

# The read end of the pipe SIGCHLD writes to (signal.set_wakeup_fd): a child's exit ends a select at once.
WAKE: "list[int]" = []
children: "dict[int, int | None]" = {}  # pid -> exit status (None while running) of the agent's own children
state: "dict[str, Any]" = {
    "cwd": None,
    "workdir": None,
    "env": dict(os.environ),
    "db": None,
    "python": None,
    "classes": None,
    "tool_cpu_s": None,
}


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
        ready, _, _ = select.select(fds, [], [], min(left, 0.5))
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


class Child:
    """A long-lived child (the python tool's interpreter, the class tools' host) spoken to on its fds 3 and 4."""

    def __init__(self, mode, env):
        req_r, self.req_w = os.pipe()
        self.rep_r, rep_w = os.pipe()
        self.out_r, out_w = os.pipe()
        null = os.open("/dev/null", os.O_RDONLY)
        # The class host is ours and holds the state a checker compares: nothing it imports may come from where the
        # agent writes (-P: no current directory on sys.path; -s: no user site under HOME, the work dir). The python
        # tool's interpreter is the agent's own: importing the agent's modules from its work dir is what it is for.
        isolated = ["-P", "-s"] if mode == "classes" else []
        argv = [sys.executable, *isolated, "-q", "-u", "-c", CHILD_CODE, mode, tool_cpu()]
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
        child = Child("python", child_env())
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


# Where a link of the state may lead besides the state's own roots: the read-only system tree, the same in the episode's
# jail and the checker's. Nothing else: /proc's links name processes (and their roots and working directories) that
# differ between the moment of the restore and the moment a checker's program follows them.
SYSTEM_RO = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc", "/opt")
MAX_HOPS = 40  # symlinks followed in one path, as the kernel's limit
# Modes are restored whole (set-uid, set-gid and sticky bits included) but for the owner's read, and search on
# directories: a test in a container runs as root and reads what the agent left whatever its mode; here it runs as the
# state's owner, and a chmod 000 must not hide the state from it (docs/environments.md, "What a checker sees").
OWNER_FILE, OWNER_DIR = 0o400, 0o500


def inside(path, places):
    return any(path == p or path.startswith(p.rstrip("/") + "/") for p in places)


def resolves_within(path, allowed):
    """Whether `path` resolves, link by link as the kernel would, to something that exists, every step of the way
    inside `allowed`. A link through /proc, a link out of the state, a loop or a link to nothing does not."""
    import stat

    todo = [p for p in path.split("/") if p]
    done, hops = "/", 0
    while todo:
        name = todo.pop(0)
        if name == ".":
            continue
        if name == "..":
            done = os.path.dirname(done)
            continue
        step = os.path.join(done, name)
        if not inside(step, allowed):
            return False
        try:
            mode = os.lstat(step).st_mode
        except OSError:
            return False
        if stat.S_ISLNK(mode):
            hops += 1
            target = os.readlink(step)
            if hops > MAX_HOPS:
                return False
            todo = [p for p in target.split("/") if p] + todo
            done = "/" if target.startswith("/") else done
            continue
        if todo and not stat.S_ISDIR(mode):
            return False
        done = step
    return True


def confine_links(roots):
    """Remove every symlink under `roots` that does not resolve, now and within the state or the read-only system
    tree, to something that exists (repeated: removing one can leave another pointing at nothing). A link that
    resolves only later, when a checker's program follows it, is never carried. The paths removed."""
    allowed = (*roots, *SYSTEM_RO)
    removed = []
    while True:
        found = []
        for root in roots:
            for top, dirs, files in os.walk(root):
                for name in dirs + files:
                    path = os.path.join(top, name)
                    if os.path.islink(path) and not resolves_within(path, allowed):
                        found.append(path)
        for path in found:
            os.unlink(path)
        removed += found
        if not found:
            return removed


def safe_extract(data, roots):
    """Unpack a tar of state dirs, whole: regular files, directories, symlinks, hard links and FIFOs, with their full
    modes (set-uid, set-gid and sticky bits too) and times. Only members under `roots`, none written through a
    symlink; links then confined (confine_links). The paths not carried (another type, outside, or a link removed)."""
    import io
    import tarfile

    skipped, dirs = [], []
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for m in tar:
            path = os.path.normpath("/" + m.name)
            parent = os.path.dirname(path)
            if not inside(path, roots) or ".." in m.name.split("/") or os.path.realpath(parent) != parent:
                skipped.append(path)  # outside, or a symlink on the way: writing through it could leave the state
                continue
            os.makedirs(parent, exist_ok=True)
            if m.isdir():
                if os.path.islink(path) or (os.path.lexists(path) and not os.path.isdir(path)):
                    skipped.append(path)
                    continue
                os.makedirs(path, exist_ok=True)
                os.chmod(path, 0o700 | m.mode & 0o777)  # its own mode once its contents are in (below)
                dirs.append((path, m))
                continue
            if os.path.lexists(path) and not (m.isfile() and os.path.isfile(path) and not os.path.islink(path)):
                skipped.append(path)
                continue
            if m.isfile():
                src = tar.extractfile(m)
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
                with os.fdopen(fd, "wb") as fh:
                    fh.write(src.read() if src else b"")
                    fh.flush()  # a write after the mode would clear its set-uid and set-gid bits
                    os.fchmod(fh.fileno(), m.mode & 0o7777 | OWNER_FILE)
            elif m.issym():
                os.symlink(m.linkname, path)
            elif m.islnk():
                target = os.path.normpath("/" + m.linkname)
                if not inside(target, roots) or not os.path.isfile(target) or os.path.islink(target):
                    skipped.append(path)
                    continue
                os.link(target, path, follow_symlinks=False)
                continue  # its times and mode are its target's
            elif m.isfifo():
                os.mkfifo(path, m.mode & 0o777)
                os.chmod(path, m.mode & 0o7777)
            else:
                skipped.append(path)
                continue
            os.utime(path, (m.mtime, m.mtime), follow_symlinks=False)
    skipped += confine_links(roots)
    for path, m in reversed(dirs):  # deepest first: a directory's mode and time once nothing more is written in it
        os.chmod(path, m.mode & 0o7777 | OWNER_DIR)
        os.utime(path, (m.mtime, m.mtime))
    return skipped


def survey(root):
    """Owner read (and search, on directories) on everything under root, so that a chmod 000 the agent left keeps
    nothing from the packing (no process of the episode is left to race); the modes as the agent left them, to pack,
    and what cannot be packed (sockets, devices)."""
    import stat

    modes, odd = {root: os.lstat(root).st_mode & 0o7777}, []
    os.chmod(root, modes[root] | 0o700)
    for top, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(top, name)
            mode = os.lstat(path).st_mode
            modes[path] = mode & 0o7777
            if stat.S_ISDIR(mode) or stat.S_ISREG(mode):
                os.chmod(path, mode & 0o7777 | (0o700 if stat.S_ISDIR(mode) else 0o400))
            elif not (stat.S_ISLNK(mode) or stat.S_ISFIFO(mode)):
                odd.append(path)
    return modes, odd


def pack(roots, cap):
    """A tar of the state dirs (regular files, directories, symlinks, hard links, FIFOs, with the agent's modes and
    times), and the paths it could not hold."""
    import io
    import tarfile

    buf = io.BytesIO()
    total = [0]
    modes, odd = {}, []

    def keep(info):
        if not (info.isfile() or info.isdir() or info.issym() or info.islnk() or info.isfifo()):
            return None
        total[0] += info.size
        if total[0] > cap:
            raise OverflowError(f"the state is above {cap} bytes")
        info.mode = modes.get("/" + info.name, info.mode)
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        return info

    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for root in roots:
            if os.path.isdir(root):
                found, unpackable = survey(root)
                modes.update(found)
                odd += unpackable
                tar.add(root, arcname=root.lstrip("/"), filter=keep)
    return buf.getvalue(), odd


def init(msg):
    import base64
    import sqlite3

    state["tool_cpu_s"] = msg.get("tool_cpu_s")
    state["workdir"] = state["cwd"] = msg["workdir"]
    state["env"] = dict(os.environ, **msg["env"], HOME=msg["workdir"], PWD=msg["workdir"])
    for d in msg["roots"]:
        os.makedirs(d, exist_ok=True)
    skipped = safe_extract(base64.b64decode(msg["tar"]), msg["roots"]) if msg.get("tar") else []
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
        host = Child("classes", child_env())
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
    import base64

    kill_all_others()
    state["python"] = state["classes"] = None
    try:
        data, odd = pack(msg["roots"], min(msg["max_bytes"], MAX_STATE_BYTES))
    except OverflowError as exc:
        return {"ok": True, "tar": None, "error": str(exc)}
    return {"ok": True, "tar": base64.b64encode(data).decode(), "not_carried": odd[:100]}


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
            "tar": msg.get("tar"),
            "tool_cpu_s": msg.get("tool_cpu_s"),
        }
    )
    home = msg["env"].get("HOME") or CHECK_HOME
    for d in ("/tests", "/logs/verifier", home, CHECK_TMP):
        os.makedirs(d, exist_ok=True)
    state["env"].update(HOME=home, TMPDIR=CHECK_TMP)
    safe_extract(base64.b64decode(msg["tests"]), ["/tests"])
    if msg.get("database"):
        state["db"] = msg["database"]
        return run_sqlite({"query": msg["query"], "timeout": msg["timeout"], "max_output": 1 << 20, "raw": True})
    result = run_shell({"command": msg["command"], "timeout": msg["timeout"], "max_output": msg["max_output"]})
    kill_all_others()  # what the test started (the agent's code among it) cannot write the reward after the test
    result["not_carried"] = started.get("not_carried", [])[:100]
    for name in ("reward.txt", "reward.json"):
        try:
            with open("/logs/verifier/" + name, "rb") as fh:
                result[name] = fh.read(65536).decode("utf-8", errors="replace")
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
            reply = OPS[msg["op"]](msg)
            if "max_output" in msg and msg["op"] not in ("check", "finish"):
                reply = cap_reply(reply, msg["max_output"])
            text = json.dumps(reply, ensure_ascii=False)
        except Exception as exc:  # noqa: BLE001 a bad request, or the agent's own failure: said, and the agent goes on
            text = json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"[:4000]}, ensure_ascii=False)
        # A lone surrogate (a tool's text can hold one) is no UTF-8: replaced here, so the host reads valid UTF-8.
        if not text.isascii():
            text = text.encode("utf-8", "replace").decode("utf-8")
        out.write(text + "\n")
        out.flush()


if __name__ == "__main__":
    main()
