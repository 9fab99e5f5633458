"""The warm Python template, the jail side of warm.py: a started interpreter that forks one fresh jail per run.

This file runs under the jail's own interpreter (the system python3 or a named environment's), inside a template
jail that nsjail made (its own user, mount, pid, network, ipc and uts namespaces; only the toolchain's files, bound
read-only). It imports only the standard library. Per run it forks, and the fork builds a jail of its own before a line
of the program runs, from the policy the host sends in the run's request (warm_launcher.py): new mount, pid, network,
ipc, uts and cgroup namespaces, its own tmpfs work dir with the run's files bound in, a fresh /proc of its own pid
namespace (each mount with the policy's flags), the host's cgroup slot for the run, the run's rlimits, an unprivileged
uid and gid of its own (mapped to the run's host id), no capabilities, no_new_privs and the same seccomp-bpf program
nsjail installs (read from a nsjail jail by the host). What it saves is the interpreter's start:
the program runs in a copy of an interpreter that has already started, as `python3 -s -B main.py` would run it.
It is one file because the template jail runs exactly this file, where no package of ours can be imported.

Processes: the template (pid 1 of the template jail) forks B as pid 1 of a new pid namespace; B unshares the run's
other namespaces, stays root in the template's user namespace, sets the jail up, forks C (pid 2) and reaps. C joins
the run's cgroup slot, drops to the run's uid and runs the program. B reaps every process of the run, then reports C's
exit status to the host over the run's own socket, which C never holds; the host kills B (and so the whole pid
namespace) at the wall clock. A program that must be pid 1 (as_init: a supervisor such as the code verifier's call
runner) is B itself, forked by R, a short-lived fork of the template: B joins the slot, sets the jail up, drops to the
run's uid, closes the run's socket and runs the program; R reaps B and reports its exit status.
"""

from __future__ import annotations

# What most judged programs import, loaded once here rather than in every run (a copy per fork costs nothing).
import array
import bisect  # noqa: F401
import collections  # noqa: F401
import ctypes
import functools  # noqa: F401
import gc
import heapq  # noqa: F401
import importlib.machinery
import importlib.util
import itertools  # noqa: F401
import json
import marshal
import math  # noqa: F401
import os
import re  # noqa: F401
import resource
import signal
import socket
import string  # noqa: F401
import sys
import threading
import types
from typing import Any

CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS = 0x00020000, 0x02000000, 0x04000000
CLONE_NEWIPC, CLONE_NEWPID, CLONE_NEWNET = 0x08000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = (
    1,
    2,
    4,
    8,
    32,
    4096,
    16384,
    1 << 18,
)
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_SECCOMP = 1, 4, 24, 22
PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 38, 47, 4
SECCOMP_MODE_FILTER = 2
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
# The request names the policy's namespaces and mount flags (policy.py); these are their numbers. A run's pid namespace
# is made by the template's fork (serve) and its cgroup namespace once it has joined its slot (_join_slot).
_UNSHARED = {"mount": CLONE_NEWNS, "network": CLONE_NEWNET, "ipc": CLONE_NEWIPC, "uts": CLONE_NEWUTS}
_MOUNT_FLAGS = {"ro": MS_RDONLY, "nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC}

_libc = ctypes.CDLL(None, use_errno=True)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = [None if v is None else v.encode() for v in (source, target, fstype, data)]
    _check(_libc.mount(enc[0], enc[1], enc[2], ctypes.c_ulong(flags), enc[3]), f"mount {target}")


def _mount_flags(names: list[str]) -> int:
    flags = 0
    for name in names:
        flags |= _MOUNT_FLAGS[name]
    return flags


def _prctl(option: int, arg: Any = 0) -> None:
    _check(_libc.prctl(option, arg, 0, 0, 0), f"prctl {option}")


def _send(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.send(json.dumps(message).encode())


def _last_cap() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as fh:
            return int(fh.read())
    except OSError:
        return 40


def _drop_privileges(uid: int, gid: int, no_new_privs: bool) -> None:
    """The run's uid and gid, and nothing else: no capabilities in any set, none to gain back (no_new_privs)."""
    for cap in range(_last_cap() + 1):
        _prctl(PR_CAPBSET_DROP, cap)
    _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)  # from uid 0 to another: the kernel clears the permitted and effective sets
    header, data = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0), (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(header), ctypes.byref(data)), "capset")  # and the inheritable set
    if no_new_privs:
        _prctl(PR_SET_NO_NEW_PRIVS, 1)
    # As after an exec: the uid change made the process undumpable, which would give its /proc files to root.
    _prctl(PR_SET_DUMPABLE, 1)


def _seccomp(program: bytes) -> None:
    if not program or len(program) % 8:
        raise OSError("no seccomp program to install")
    prog = _SockFprog(len(program) // 8, program)
    _check(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0), "seccomp")


class Program(BaseException):
    """Raised in the program's process once its jail is set up: unwinds to the module's top level, where the program
    runs (see there)."""

    def __init__(self, path: str, source: bytes):
        super().__init__()
        self.path, self.source = path, source
        # As the interpreter (maybe_pyc_file): bytecode by its .pyc name, or by its magic number's first half.
        self.pyc = path.endswith(".pyc") or source[:2] == importlib.util.MAGIC_NUMBER[:2]

    def pyc_code(self) -> types.CodeType:
        """A .pyc program's code, as the interpreter reads one: marshalled after the 16-byte header, whose magic must
        be this interpreter's."""
        if self.source[:4] != importlib.util.MAGIC_NUMBER:
            raise RuntimeError("Bad magic number in .pyc file")
        code = marshal.loads(self.source[16:])
        if not isinstance(code, types.CodeType):
            raise RuntimeError("Bad code object in .pyc file")
        return code


def _prepare_program(path: str, argv: list[str]) -> Program:
    """The program's __main__, sys.argv and sys.path as `python3 -s -B path` has them, and its source."""
    import builtins

    with open(path, "rb") as fh:
        program = Program(path, fh.read())
    main = types.ModuleType("__main__")
    loader = importlib.machinery.SourcelessFileLoader if program.pyc else importlib.machinery.SourceFileLoader
    main.__dict__.update(
        __file__=path,
        __cached__=None,
        __loader__=loader("__main__", path),
        __spec__=None,
        __package__=None,
        __annotations__={},
        __builtins__=builtins,
    )
    sys.modules["__main__"] = main
    sys.argv = argv
    sys.path[0] = os.path.dirname(path)
    return program


def _exit_status(exc: BaseException) -> int:
    """The exit status the interpreter gives a SystemExit (pythonrun.c, _Py_HandleSystemExit): its `code` (the
    exception itself when that cannot be read); None 0; an int (a subclass's value, never its operators) as a C long,
    -1 when it does not fit; anything else printed to stderr, and 1."""
    try:
        value: object = exc.code  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001
        value = exc
    if value is None:
        return 0
    if isinstance(value, int):
        number = int.__int__(value)
        return (number if -(1 << 63) <= number < 1 << 63 else -1) & 0xFF
    try:
        stderr = getattr(sys, "stderr", None)
        if stderr is not None:
            stderr.write(str(value))
            stderr.write("\n")
        else:
            os.write(2, f"{value}\n".encode(errors="backslashreplace"))
    except Exception:  # noqa: BLE001
        pass
    return 1


def _uncaught(exc: BaseException) -> int:
    """Report an exception that left the program as the interpreter does, through sys.excepthook without this file's
    frame, and give its exit status (1; a SystemExit the hook raises is read as the program's own)."""
    tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
    try:
        sys.excepthook(type(exc), exc.with_traceback(tb), tb)
    except SystemExit as hook_exit:
        return _exit_status(hook_exit)
    except BaseException as hook_error:  # noqa: BLE001 - as PyErr_PrintEx: both, then exit 1
        stderr = getattr(sys, "stderr", None) or sys.__stderr__
        try:
            print("Error in sys.excepthook:", file=stderr)
            sys.__excepthook__(type(hook_error), hook_error, hook_error.__traceback__)
            print("\nOriginal exception was:", file=stderr)
            sys.__excepthook__(type(exc), exc, tb)
        except Exception:  # noqa: BLE001
            pass
    return 1


def _flush_std_files(failed: set[int]) -> bool:
    """The interpreter's flush of sys.stdout and sys.stderr at exit (pylifecycle.c, flush_std_files): skipped when
    missing, None or closed; a failed stdout flush reported as unraisable. False when one failed (exit 120)."""
    ok = True
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name, None)
        if stream is None:
            continue
        try:
            closed = bool(stream.closed)
        except Exception:  # noqa: BLE001
            closed = False
        if closed or id(stream) in failed:  # a stream that failed once is not flushed again (reported once)
            continue
        try:
            stream.flush()
        except Exception as exc:  # noqa: BLE001
            ok = False
            failed.add(id(stream))
            if name == "stdout":
                _unraisable(exc, stream)
    return ok


class _Unraisable:
    """What sys.unraisablehook receives (the interpreter builds it in C)."""

    def __init__(self, exc: BaseException, obj: object, tb: types.TracebackType | None):
        self.exc_type, self.exc_value, self.exc_traceback, self.err_msg, self.object = type(exc), exc, tb, None, obj


def _unraisable(exc: BaseException, obj: object) -> None:
    """PyErr_WriteUnraisable: the program's own sys.unraisablehook, else the default's text on sys.stderr."""
    tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
    try:
        if sys.unraisablehook is not sys.__unraisablehook__:
            sys.unraisablehook(_Unraisable(exc, obj, tb))  # type: ignore[arg-type]
            return
        import traceback

        text = "".join(traceback.format_exception(type(exc), exc, tb))
        stderr = getattr(sys, "stderr", None) or sys.__stderr__
        if stderr is not None:
            stderr.write(f"Exception ignored in: {obj!r}\n{text}")
            stderr.flush()
    except Exception:  # noqa: BLE001 - as the interpreter: nothing more to do
        pass


_MODULE_NAMES: dict[str, frozenset[str]] = {}  # each module's names when the template was ready


def _clear_names(names: dict[str, Any], keys: list[str]) -> None:
    """Set `keys` of a module dict to None as module teardown does: one leading underscore first, __builtins__ kept."""
    for key in [k for k in keys if isinstance(k, str) and k[:1] == "_" and k[:2] != "__"]:
        names[key] = None
    for key in [k for k in keys if k != "__builtins__"]:
        names[key] = None


def _finish(status: int, interrupted: bool) -> None:
    """The interpreter's exit (Py_FinalizeEx), the parts a program can tell apart, then _exit: non-daemon threads
    joined, atexit handlers, standard streams flushed, the original streams put back, garbage collected and the
    program's module cleared as module teardown does (names with one leading underscore first) so finalizers run
    and unclosed files flush, the streams flushed again. The rest (tearing down every module of the interpreter) would
    cost more than the whole run and changes nothing a verifier reads."""
    import atexit

    try:
        threading._shutdown()  # type: ignore[attr-defined]
    except BaseException:  # noqa: BLE001 - the interpreter goes on with its exit too
        pass
    atexit._run_exitfuncs()
    failed: set[int] = set()
    ok = _flush_std_files(failed)
    for name in ("stdin", "stdout", "stderr"):
        setattr(sys, name, getattr(sys, f"__{name}__", None))
    gc.collect()
    main = sys.modules.get("__main__")
    if main is not None:
        _clear_names(main.__dict__, list(main.__dict__))
    # Then every module the run imported, and what the run put into the template's own (a writer parked there is
    # flushed as teardown would flush it); the template's modules as they were are left alone.
    for name, module in reversed(list(sys.modules.items())):
        names = getattr(module, "__dict__", None)
        if module is main or not isinstance(names, dict):
            continue
        before = _MODULE_NAMES.get(name)
        _clear_names(names, list(names) if before is None else [k for k in list(names) if k not in before])
    gc.collect()
    ok = _flush_std_files(failed) and ok
    if interrupted:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        os._exit(128 + signal.SIGINT)  # as the interpreter, where that signal is dropped: a pid 1 program's
    os._exit(status if ok else 120)


def _probe_depth(n: int) -> int:
    try:
        return _probe_depth(n + 1)
    except RecursionError:
        return n


def _depth() -> int:
    """How deep a script's module can recurse (called from this module's top level, where a script's code runs)."""
    return _probe_depth(0)


def _exec_depth() -> int:
    """The same, from code exec'd at this module's top level, as the program's is."""
    scope: dict[str, Any] = {"probe": _probe_depth}
    exec("depth = probe(0)", scope)
    return int(scope["depth"])


def _same_recursion_depth(offset: int) -> None:
    """Run the program `offset` recursion levels deeper than it would start as a script, and give it the limit it
    would see: sys.getrecursionlimit and sys.setrecursionlimit take the offset off and put it back."""
    if offset <= 0:
        return
    import operator

    get_limit, set_limit = sys.getrecursionlimit, sys.setrecursionlimit

    def getrecursionlimit() -> int:
        return get_limit() - offset

    def setrecursionlimit(limit: int, /) -> None:
        limit = operator.index(limit)
        if limit < 1:
            raise ValueError("recursion limit must be greater or equal than 1")
        set_limit(limit + offset)

    getrecursionlimit.__doc__, setrecursionlimit.__doc__ = get_limit.__doc__, set_limit.__doc__
    set_limit(get_limit() + offset)
    # A new thread starts at depth 0: it spends the same levels first, so it recurses as deep as a script's would.
    import _thread

    start = _thread.start_new_thread

    def start_new_thread(function: Any, args: Any, kwargs: Any = None, /) -> int:
        def deeper(levels: int) -> Any:
            return deeper(levels - 1) if levels else function(*args, **(kwargs or {}))

        return start(deeper, (offset - 1,))

    _thread.start_new_thread = threading._start_new_thread = start_new_thread  # type: ignore[attr-defined]
    sys.getrecursionlimit, sys.setrecursionlimit = getrecursionlimit, setrecursionlimit


def _standard_streams() -> None:
    """New sys.stdin/stdout/stderr on the run's fds 0-2, made as the interpreter makes them at start (the template's
    were made on its own fds, and cache what those were)."""
    import io

    for fd, name, errors in ((0, "stdin", "strict"), (1, "stdout", "strict"), (2, "stderr", "backslashreplace")):
        # Buffered as the interpreter's: sized by the fd's st_blksize (4096 for a pipe), not io's default.
        buffered = io.open(fd, "rb" if fd == 0 else "wb", buffering=-1, closefd=False)  # noqa: SIM115, UP020
        buffered.raw.name = f"<{name}>"  # type: ignore[attr-defined]
        stream = io.TextIOWrapper(
            buffered, encoding="utf-8", errors=errors, newline="\n", line_buffering=name == "stderr"
        )
        stream.mode = "r" if fd == 0 else "w"  # type: ignore[misc]
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def _program(
    request: dict[str, Any], fds: list[int], setup_w: int, as_init: bool = False, cgroup_fds: list[int] | None = None
) -> None:
    """The program's process: sets it up, then raises Program (never returns). Usually C, pid 2 of the run's jail;
    B itself for a program that must be its jail's pid 1 (as_init).

    A failed setup is written to `setup_w`: for C the pipe B alone reads, for B the run's socket (as its report to the
    host). It is closed before the program's first line, so the program can never pass for a failed setup (an infra
    error, masked, instead of its own zero), nor, as B, write its own report (its parent R reports B's exit).
    """
    try:
        if not as_init:  # C: first of all, so all the program does is charged to its slot (B, as_init, has joined)
            _join_slot(cgroup_fds or [], "cgroup" in request["namespaces"])
        for target, fd in enumerate(fds[:3]):
            os.dup2(fd, target, inheritable=True)
        if setup_w != 3:
            os.dup2(setup_w, 3, inheritable=False)  # kept by the closerange below
            os.close(setup_w)
            setup_w = 3
        os.closerange(4, resource.getrlimit(resource.RLIMIT_NOFILE)[1])
        for name, (soft, hard) in request["rlimits"].items():
            resource.setrlimit(getattr(resource, name), (soft, hard))
        os.chdir(request["work_dir"])
        if dict(os.environ) != request["env"]:  # the template starts with the policy's environment: rarely differs
            os.environ.clear()
            os.environ.update(request["env"])
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        _standard_streams()
        _drop_privileges(request["uid"], request["gid"], request["no_new_privs"])
        _seccomp(bytes.fromhex(request["seccomp"]))
        program = _prepare_program(request["script"], request["argv"])  # read as the run's uid, as nsjail's run does
        os.close(setup_w)
    except BaseException as exc:  # noqa: BLE001 - setup failed: tell B (or the host), never run the program
        why = f"{type(exc).__name__}: {exc}"[:2000]
        os.write(setup_w, json.dumps({"setup_error": why}).encode() if as_init else why.encode(errors="replace"))
        os._exit(127)
    raise program


def _make_dirs(path: str, uid: int, gid: int) -> None:
    """The directories of a file in the work dir, the run's own (it may add files beside its inputs)."""
    if os.path.isdir(path):
        return
    _make_dirs(os.path.dirname(path), uid, gid)
    os.mkdir(path, 0o755)
    os.chown(path, uid, gid)


def _join_slot(cgroup_fds: list[int], new_namespace: bool) -> None:
    """Into the run's cgroup slot, whose root becomes this process's cgroup namespace's (new_namespace): the slot's
    tasks files (v1; cgroup.procs on v2), opened by the host. A task moving itself skips the kernel's global lock that
    moving another one takes. Done by the program's own process, so the slot holds the program's processes alone,
    reaped before its run is reported (a zombie still counts in the slot's pids)."""
    for fd in cgroup_fds:
        os.write(fd, b"0")
        os.close(fd)
    if new_namespace:
        _check(_libc.unshare(CLONE_NEWCGROUP), "unshare cgroup")


def _jail_init(request: dict[str, Any], fds: list[int], cgroup_fds: list[int], sock: socket.socket) -> None:
    """B: pid 1 of the run's pid namespace. Builds the jail, forks the program (which joins the slot), reaps, reports;
    or (as_init) joins the slot, builds the jail and becomes the program."""
    os.setsid()  # the run's own session and process group, as each nsjail jail's (signals to a group, autogroups)
    _prctl(PR_SET_DUMPABLE, 0)  # the program runs as another uid; this keeps its /proc files root's too
    if request.get("init"):
        _join_slot(cgroup_fds, "cgroup" in request["namespaces"])
        cgroup_fds = []
    sock.send(b"ready")  # the host reads our pid from the message's credentials (to kill the run at the wall clock)
    if sock.recv(16) != b"go":
        os._exit(0)
    if "uts" in request["namespaces"]:
        socket.sethostname(request["hostname"])
    # The template's work dir is the spool (this script and every run's files). The run's files are held open, then the
    # run's own tmpfs goes over the work dir: the spool is out of sight (and out of reach: nothing of it stays open)
    # before the program starts, and the jail's tree is nsjail's, name for name.
    work, (tmpfs_options, tmpfs_flags) = request["work_dir"], request["tmpfs"]
    sources = [os.open(os.path.join(work, source), os.O_PATH | os.O_CLOEXEC) for source, _, _ in request["binds"]]
    _mount("tmpfs", work, "tmpfs", _mount_flags(tmpfs_flags), tmpfs_options)
    os.chown(work, request["uid"], request["gid"])
    bind_flags = MS_BIND | MS_REMOUNT | _mount_flags(request["bind_flags"])
    for fd, (_, target, writable) in zip(sources, request["binds"], strict=True):
        path = os.path.join(work, target)
        _make_dirs(os.path.dirname(path), request["uid"], request["gid"])
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND)
        os.close(fd)
        _mount(None, path, None, bind_flags | (0 if writable else MS_RDONLY))
    # On top of the template's /proc (the kernel lets a user namespace mount proc only where one is already in view);
    # the program, without capabilities, cannot take it off.
    proc_target, proc_options, proc_flags = request["proc"]
    _mount("proc", proc_target, "proc", _mount_flags(proc_flags), proc_options or None)
    if request.get("init"):
        # A supervisor that must be its jail's pid 1 (the kernel drops the signals its children send it; it reaps their
        # orphans): this process becomes the program. Its parent R reports its exit status to the host.
        _program(request, fds, sock.detach(), as_init=True)
    setup_r, setup_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        sock.close()
        os.close(setup_r)
        _program(request, fds, setup_w, cgroup_fds=cgroup_fds)
    os.close(setup_w)
    for fd in fds + cgroup_fds:
        os.close(fd)
    with os.fdopen(setup_r, "rb") as fh:
        setup_error = fh.read(4096).decode(errors="replace")  # EOF when the program starts
    if setup_error:
        raise OSError(f"run setup: {setup_error}")
    # The program runs: a failure from here on is no setup error (the host reruns a run whose setup failed through
    # nsjail, which must never give a program that has run a second try).
    try:
        _await_program(pid, sock)
    except BaseException as exc:  # noqa: BLE001
        try:
            _send(sock, {"init_error": f"{type(exc).__name__}: {exc}"})
        finally:
            os._exit(1)


def _await_program(pid: int, sock: socket.socket) -> None:
    """B, once the program (C, `pid`) runs: reap it, end what is left of the jail, report C's exit. Never returns."""
    status, usage = 0, None
    while True:
        try:
            got, status, usage = os.wait4(-1, 0)
        except ChildProcessError:
            break
        if got == pid:
            break
    try:
        os.kill(-1, signal.SIGKILL)  # what is left of the program: the jail ends with it
    except ProcessLookupError:
        pass
    while True:
        try:
            os.wait4(-1, 0)
        except ChildProcessError:
            break
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    report = {
        "exit": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
        "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
        "cpu": own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime,
        "maxrss": max(kids.ru_maxrss, usage.ru_maxrss if usage is not None else 0),
    }
    _send(sock, report)
    os._exit(0)


def _start_run(request: dict[str, Any], fds: list[int], ctl: socket.socket | None) -> None:
    """B, just forked as pid 1 of a new pid namespace: the run's other namespaces, then its jail. Never returns."""
    if ctl is not None:
        ctl.close()
    sock = socket.socket(fileno=fds[3])
    try:
        namespaces = 0
        for name in request["namespaces"]:
            namespaces |= _UNSHARED.get(name, 0)
        _check(_libc.unshare(namespaces), "unshare namespaces")
        _mount(None, "/", None, MS_REC | MS_PRIVATE)
        _jail_init(request, fds[:3], fds[4:], sock)
    except Program:
        raise  # the program's process, set up: on to the top level
    except BaseException as exc:  # noqa: BLE001 - report a failed setup to the host, never run the program
        try:
            _send(sock, {"setup_error": f"{type(exc).__name__}: {exc}"})
        finally:
            os._exit(1)
    os._exit(0)


def _fork_in_new_pid_namespace(own_pid_ns: int) -> int:
    """fork(), the child being pid 1 of a pid namespace of its own; this process then forks into its own again."""
    _check(_libc.unshare(CLONE_NEWPID), "unshare pid namespace")
    try:
        pid = os.fork()
    except BaseException:
        _check(_libc.setns(own_pid_ns, CLONE_NEWPID), "setns back")
        raise
    if pid == 0:
        os.close(own_pid_ns)
    else:
        _check(_libc.setns(own_pid_ns, CLONE_NEWPID), "setns back")
    return pid


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _reaper(request: bytes, fds: list[int], ctl: socket.socket, own_pid_ns: int) -> None:
    """R, the template's fork for a run whose program is B (as_init): forks B as pid 1 of a new pid namespace, reaps it
    and reports its exit status on the run's socket ("reaped"), after whatever B said there. Never returns (B goes on to
    the program).

    The host releases the run's cgroup slot only then: B is in it, and a zombie still counts in the slot's pids. And R,
    not the template, reaps B: what the report holds (an exit status, CPU time and peak memory a program may choose)
    is never in the memory that later runs are copies of; R's ends with it."""
    ctl.close()
    sock = socket.socket(fileno=fds[3])
    try:
        pid = _fork_in_new_pid_namespace(own_pid_ns)
    except BaseException as exc:  # noqa: BLE001 - no B: the run's setup failed
        try:
            _send(sock, {"setup_error": f"{type(exc).__name__}: {exc}"})
        finally:
            os._exit(1)
    if pid == 0:  # B: the program, or its setup's failure
        _start_run({**json.loads(request), "init": True}, fds, None)
    os.close(own_pid_ns)
    for fd in fds[:3] + fds[4:]:
        os.close(fd)
    try:
        _, status, usage = os.wait4(pid, 0)
        _send(
            sock,
            {
                "reaped": True,
                "exit": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
                "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
                "cpu": usage.ru_utime + usage.ru_stime,  # B's own and its reaped descendants'
                "maxrss": usage.ru_maxrss,
            },
        )
    finally:
        os._exit(0)


def serve(ctl: socket.socket) -> None:
    """Read run requests until the host closes: a mode byte (P: the program is pid 2 under B; I: it is B, pid 1) and
    JSON; fds: stdin, stdout, stderr, the run socket, the slot files."""
    ctl.settimeout(1.0)
    # Requests are read into one buffer, parsed only in the fork and zeroed after it: every run starts from a copy
    # of this process, so nothing of an earlier run's request (names, arguments) may linger in its memory.
    buf = bytearray(1 << 20)
    own_pid_ns = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    fd_space = socket.CMSG_SPACE(8 * array.array("i").itemsize)
    while True:
        _reap()
        try:
            size, ancillary, _, _ = ctl.recvmsg_into([buf], fd_space)
        except TimeoutError:
            continue
        if not size:
            return
        fds = array.array("i")
        for level, kind, data in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
        try:
            if len(fds) >= 4 and buf[:1] == b"I":
                if os.fork() == 0:
                    _reaper(bytes(buf[1:size]), list(fds), ctl, own_pid_ns)
            elif len(fds) >= 4 and _fork_in_new_pid_namespace(own_pid_ns) == 0:
                _start_run(json.loads(bytes(buf[1:size])), list(fds), ctl)
        except OSError as exc:  # no fork (the host's process limit): this run's setup failed, the template goes on
            with socket.socket(fileno=os.dup(fds[3])) as sock:
                _send(sock, {"setup_error": f"{type(exc).__name__}: {exc}"})
        buf[:size] = bytes(size)
        for fd in fds:
            os.close(fd)


if __name__ == "__main__":
    _ctl = socket.socket(fileno=int(sys.argv.pop(1)))
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    # Objects made so far live as long as the template: out of the collector's reach, a run's collections do not
    # touch (and so copy) every page of them.
    _RECURSION_OFFSET = _depth() - _exec_depth()
    _MODULE_NAMES.update({name: frozenset(vars(m)) for name, m in list(sys.modules.items()) if hasattr(m, "__dict__")})
    gc.freeze()
    _ctl.send(b"ready")
    try:
        serve(_ctl)
        sys.exit(0)  # the host closed the control socket
    except Program as _ready:
        _run = _ready
    # Only a run's program process (C) gets here, in its jail: the program runs at this module's level, as a
    # script's own module does, and leaves as the interpreter would (_exit_status, _uncaught, _finish).
    _same_recursion_depth(_RECURSION_OFFSET)
    _interrupted = False
    try:
        # Compiled here, at the top level: a SyntaxError's traceback has no frame of this file, as the interpreter's.
        if _run.pyc:
            _code = _run.pyc_code()
        else:
            _code = compile(_run.source, _run.path, "exec", dont_inherit=True)
        exec(_code, sys.modules["__main__"].__dict__)
        _status = 0
    except SystemExit as _exc:
        _status = _exit_status(_exc)
    except BaseException as _exc:  # noqa: BLE001 - the top level: reported as the interpreter does
        _status = _uncaught(_exc)
        _interrupted = isinstance(_exc, KeyboardInterrupt)
    _finish(_status, _interrupted)
