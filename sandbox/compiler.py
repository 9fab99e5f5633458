"""Compiled languages (C, C++, TypeScript, Java, Go, Rust): compile in a jail of its own (own limits), and reuse the
artifact (a binary, a jar, a script) for the same sources."""

from __future__ import annotations

import hashlib
import shutil
import threading
from collections import OrderedDict

from groupscore.sandbox.classify import classify
from groupscore.sandbox.harness import decode, peak_mb
from groupscore.sandbox.languages import TS_GLOBALS, TS_GLOBALS_FILE, artifact, compile_argv
from groupscore.sandbox.limits import Limits
from groupscore.sandbox.nsjail_launcher import execute_nsjail
from groupscore.sandbox.policy import INIT_SHELL, build_policy
from groupscore.sandbox.result import CompileResult, RunStatus
from groupscore.sandbox.toolchains import Toolchain


class CompileCache:
    """Compiled programs by (compiler, command, limits, every input file): the many runs of one program (one per
    test) compile it once. Only successful compiles are kept; a per-key lock makes
    parallel runs of the same program wait for one compile instead of each starting their own."""

    def __init__(self, max_bytes: int = 256 << 20):
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, tuple[CompileResult, bytes]] = OrderedDict()
        self._lock = threading.Lock()
        self._key_locks: dict[str, threading.Lock] = {}

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


COMPILED = CompileCache()


def compile_program(
    tool: Toolchain, files: dict[str, bytes], main: str, limits: Limits, command: list[str] | None
) -> tuple[CompileResult, bytes]:
    """The compile step's result and its artifact (empty unless the step succeeded). `command`: the caller's own
    compile argv ("{main}" is replaced by the main file), else the language's."""
    if command:
        argv = [a.replace("{main}", main) for a in command]
        argv[0] = shutil.which(argv[0], path="/usr/bin:/bin") or argv[0]
    else:
        argv = compile_argv(tool, main, limits, INIT_SHELL, list(files))
    if tool.language == "typescript":
        files = {**files, TS_GLOBALS_FILE: TS_GLOBALS.encode()}
    key = CompileCache.key(tool, argv, limits, files)
    with COMPILED.lock_for(key):
        if (hit := COMPILED.get(key)) is not None:
            return hit[0].model_copy(update={"cached": True}), hit[1]
        result = _compile_inrun_jail(tool, files, argv, limits, artifact(tool.language, main))
        if result[0].status is RunStatus.OK:
            COMPILED.put(key, result)
        return result


def _compile_inrun_jail(
    tool: Toolchain, files: dict[str, bytes], argv: list[str], limits: Limits, output: str
) -> tuple[CompileResult, bytes]:
    policy = build_policy(tool, limits, compile_step=True)
    out, got, _ = execute_nsjail(policy, files, argv, b"", [output])
    status, _ = classify(out, limits)
    binary = got.get(output, b"")
    if status is RunStatus.OK and not binary:
        status = RunStatus.RUNTIME_ERROR
    return CompileResult(
        status=status,
        exit_code=out.exit_code,
        signal=out.signal,
        stdout=decode(out.stdout),
        stderr=decode(out.stderr),
        wall_time_s=round(out.wall_time_s, 4),
        cpu_time_s=round(out.cpu_time_s, 4),
        peak_memory_mb=peak_mb(out),
        command=argv,
    ), binary
