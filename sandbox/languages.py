"""Every language the sandbox runs, in one table: its main file, the Debian package of its toolchain, its compile step
(a jail of its own), its run command, and the settings its runtime needs inside a jail.

Runtimes that reserve more than they use, or start threads of their own, are told the jail's limits up front:
- the JVM reserves 1 GiB of compressed class space and 240 MB of code cache at start, which the jail's address-space
  rlimit (2 x memory + 512 MB) refuses; it is started with a heap, metaspace, class space and code cache that fit
  the run's memory, one GC thread (SerialGC) and one "processor", so its own threads (about 10) stay well inside the
  pids limit (32 by default) and its heap error comes before the cgroup's OOM kill;
- Go sizes its scheduler by the host's CPUs (one OS thread per P): GOMAXPROCS=2 keeps a 128-core host from
  spending the pids limit on threads, and GOMEMLIMIT (3/4 of the memory limit) makes its GC work harder before the
  cgroup kills the run;
- node: V8's heap is capped at 3/4 of the memory limit (a clean "heap out of memory"), and its worker pool at 2
  threads (the default is 4 plus libuv's 4);
- glibc's malloc arenas (64 MB of address space per thread) are capped at 2 for the JVM and node.
The compile steps get their own limits (COMPILE_LIMITS, more processes where the compiler is a JVM or `go build`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from groupscore.sandbox.limits import COMPILE_LIMITS, Limits

if TYPE_CHECKING:
    from groupscore.sandbox.toolchains import Toolchain

WORK_DIR = "/work"
BINARY = "prog"  # a compiled native program (C, C++, Go, Rust), in the work dir
JAR = "prog.jar"  # a compiled Java program


@dataclass(frozen=True)
class LanguageSpec:
    """One language: what a run starts from, where its toolchain comes from, and whether it compiles first."""

    name: str
    main_file: str  # the file a run starts from when no command names one (compiled languages: the source)
    package: str  # the Debian package(s) of its toolchain (tools/install-system-deps installs them)
    compiled: bool = False  # a compile step runs first, in a jail of its own, and its artifact is reused
    native: bool = False  # the artifact is a program run directly (made executable in the work dir)
    compile_limits: Limits = COMPILE_LIMITS


# A JVM compiler (javac), `go build` (its compile and link processes, each with its own threads) or rustc (LLVM's
# threads) needs more processes than gcc; each still runs in its own cgroup slot with this pids limit.
_MANY_THREADS = COMPILE_LIMITS.model_copy(update={"max_processes": 64})

SPECS: dict[str, LanguageSpec] = {
    spec.name: spec
    for spec in (
        LanguageSpec("python", "main.py", "python3"),
        LanguageSpec("c", "main.c", "gcc", compiled=True, native=True),
        LanguageSpec("cpp", "main.cpp", "g++", compiled=True, native=True),
        LanguageSpec("javascript", "main.js", "nodejs"),
        LanguageSpec("typescript", "main.ts", "node-typescript", compiled=True),
        LanguageSpec("java", "Main.java", "default-jdk-headless", compiled=True, compile_limits=_MANY_THREADS),
        LanguageSpec("go", "main.go", "golang-go", compiled=True, native=True, compile_limits=_MANY_THREADS),
        LanguageSpec("rust", "main.rs", "rustc", compiled=True, native=True, compile_limits=_MANY_THREADS),
        LanguageSpec("bash", "main.sh", "bash"),
    )
}
LANGUAGES = tuple(SPECS)
MAIN_FILE = {name: spec.main_file for name, spec in SPECS.items()}

# TypeScript is checked and compiled by tsc against the ES2022 library and these few node globals (Debian has no
# @types/node); a type error is a compile error, as in MultiPL-E's TypeScript harness.
TS_GLOBALS_FILE = "groupscore-node-globals.d.ts"
TS_GLOBALS = "\n".join(
    f"declare var {name}: any;"
    for name in ("require", "module", "exports", "process", "console", "Buffer", "__dirname", "__filename")
) + (
    "\ndeclare function setTimeout(callback: (...args: any[]) => void, ms?: number, ...args: any[]): any;"
    "\ndeclare function clearTimeout(handle: any): void;"
    "\ndeclare function setInterval(callback: (...args: any[]) => void, ms?: number, ...args: any[]): any;"
    "\ndeclare function clearInterval(handle: any): void;"
    "\ndeclare function setImmediate(callback: (...args: any[]) => void, ...args: any[]): any;\n"
)
_TSC_FLAGS = ("--target", "es2022", "--lib", "es2022", "--module", "commonjs", "--pretty", "false")
_PLAIN_JAVA_NAME = re.compile(r"^[\w$/.-]+\.java\Z")  # passed to javac through the shell's word splitting
# What a Java source's top-level names are read from: its code with comments, strings, text blocks and char literals
# blanked (unterminated ones run to the end), so a name in a comment never names a file or a class to load.
_JAVA_NOT_CODE = re.compile(
    r'"""[\s\S]*?(?:"""|\Z)|"(?:[^"\\\n]|\\.)*(?:"|$)|\'(?:[^\'\\\n]|\\.)*(?:\'|$)|//[^\n]*|/\*[\s\S]*?(?:\*/|\Z)',
    re.M,
)
_JAVA_DECLARATION = re.compile(
    r"\b((?:(?:public|protected|private|static|final|abstract|sealed|non-sealed|strictfp)\s+)*)class\s+([^\W\d][\w$]*)"
)
# A class name we put in a file name or pass on: ASCII, short (a file name has 255 bytes at most), no path tricks.
# A program that declares another (valid Java, e.g. 300 letters) gets a file of another name: javac's compile error.
_JAVA_PLAIN_CLASS = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]{0,99}\Z")
MAX_JAVA_CLASSES = 200  # top-level classes the call runner looks at


def compile_limits_for(language: str) -> Limits:
    """The limits of a language's compile step when the caller gives none."""
    return SPECS[language].compile_limits


def artifact(language: str, main: str) -> str:
    """The work-dir file the compile step leaves, which the run gets (read-only) instead of the source."""
    if language == "typescript":
        return str(PurePosixPath(main).with_suffix(".js"))
    return JAR if language == "java" else BINARY


def java_code_only(source: str) -> str:
    """A Java source with its comments, string, text-block and char literals blanked (line breaks kept)."""
    return _JAVA_NOT_CODE.sub(lambda m: "\n" * m.group(0).count("\n") or " ", source)


def java_top_level_classes(source: str) -> list[tuple[str, bool]]:
    """(name, public?) of each class a Java source declares outside any braces, in order, comments and literals
    skipped; only names fit for a file name (_JAVA_PLAIN_CLASS), at most MAX_JAVA_CLASSES."""
    code = java_code_only(source)
    found: list[tuple[str, bool]] = []
    depth, at = 0, 0
    for match in _JAVA_DECLARATION.finditer(code):
        between = code[at : match.start()]
        depth += between.count("{") - between.count("}")
        at = match.start()
        if depth == 0 and _JAVA_PLAIN_CLASS.match(match.group(2)):
            found.append((match.group(2), "public" in match.group(1).split()))
            if len(found) >= MAX_JAVA_CLASSES:
                break
    return found


def java_main_class(source: bytes) -> str | None:
    """The public top-level class a Java source declares (javac wants it in <Class>.java), or None: none, or a name
    unfit for a file name (then the file keeps its own name, and javac refuses the program: a compile error)."""
    code = java_code_only(source.decode("utf-8", errors="replace"))
    depth, at = 0, 0
    for match in _JAVA_DECLARATION.finditer(code):
        between = code[at : match.start()]
        depth += between.count("{") - between.count("}")
        at = match.start()
        if depth == 0 and "public" in match.group(1).split():
            return match.group(2) if _JAVA_PLAIN_CLASS.match(match.group(2)) else None
    return None


def _jvm_flags(limits: Limits, *, prefix: str = "") -> list[str]:
    heap = max(32, limits.memory_mb * 3 // 4 - 64)  # room beside the heap for metaspace, code cache, stacks
    flags = [
        "-Xshare:auto",  # the JDK's class-data archive: a shared, read-only mapping, ~2x faster start
        "-XX:+UseSerialGC",
        "-XX:ActiveProcessorCount=1",
        "-XX:TieredStopAtLevel=1",  # C1 only: short runs start faster, and no C2 compiler threads
        f"-Xmx{heap}m",
        "-Xss8m",
        "-XX:MaxMetaspaceSize=128m",
        "-XX:CompressedClassSpaceSize=64m",
        "-XX:ReservedCodeCacheSize=64m",
        "-XX:-UsePerfData",  # no hsperfdata file in /tmp
        # The JVM's own warnings (a thread it could not start at the pids limit, ...) go to stdout by default, where
        # they would be taken for the program's output: to stderr instead.
        "-Xlog:disable",
        "-Xlog:all=warning:stderr",
    ]
    return [prefix + f for f in flags]


def compile_argv(tool: Toolchain, main: str, limits: Limits, shell: str, names: list[str]) -> list[str]:
    """The compile step's command (run in the compile jail, with `main` and the other files `names` in the work dir;
    Java compiles every .java file among them, so a program may come in several classes)."""
    out = f"{WORK_DIR}/{artifact(tool.language, main)}"
    if tool.language in ("c", "cpp"):
        std = "-std=gnu17" if tool.language == "c" else "-std=gnu++17"
        return [tool.executable, "-O2", std, "-pipe", "-o", out, main, "-lm"]
    if tool.language == "typescript":
        return [tool.executable, tool.compiler, *_TSC_FLAGS, "--outDir", WORK_DIR, main, TS_GLOBALS_FILE]
    if tool.language == "java":
        # jar writes its file through a temporary one and a rename, which a collected (bind-mounted) file refuses:
        # it writes the archive to stdout instead, which the shell puts in place.
        # $4 and $5 are word-split on purpose: javac's and jar's arguments, all ours, none with a space or a glob.
        script = '"$1" $4 && exec "$2" $5 c -C classes . > "$3"'
        jar = str(PurePosixPath(tool.compiler).with_name("jar"))
        jvm = _jvm_flags(limits, prefix="-J")
        sources = [main, *sorted(n for n in names if _PLAIN_JAVA_NAME.match(n) and n != main)]
        javac_args = [*jvm, "-encoding", "UTF-8", "-nowarn", "-d", "classes", *sources]
        return [shell, "-c", script, "javac", tool.compiler, jar, out, " ".join(javac_args), " ".join(jvm)]
    if tool.language == "go":
        # No -trimpath: it changes every package's build ID, so the standard library (shipped built) would be rebuilt.
        return [tool.executable, "build", "-ldflags=-s -w", "-o", out, main]
    if tool.language == "rust":
        # One codegen unit: rustc otherwise starts a thread per unit (16), against the compile's pids limit.
        # The linker by its real path: Debian's `cc` is a link through /etc/alternatives, which no jail sees.
        return [
            tool.executable,
            "--edition=2021",
            "-O",
            "-C",
            "codegen-units=1",
            "-C",
            "strip=symbols",
            "-C",
            f"linker={tool.compiler}",
            "-o",
            out,
            main,
        ]
    raise ValueError(f"{tool.language} has no compile step")


def run_argv(tool: Toolchain, main: str, limits: Limits, entry: str | None = None) -> list[str]:
    """The run's command when the caller names none. `entry`: Java's main class."""
    lang = tool.language
    if lang == "python":
        return [tool.executable, "-s", "-B", main]
    if lang in ("javascript", "typescript"):
        heap = max(16, limits.memory_mb * 3 // 4)
        script = artifact(lang, main) if lang == "typescript" else main
        return [tool.executable, f"--max-old-space-size={heap}", "--v8-pool-size=2", script]
    if lang == "java":
        return [tool.executable, *_jvm_flags(limits), "-cp", JAR, entry or "Main"]
    if lang == "bash":
        return [tool.executable, main]
    return [f"{WORK_DIR}/{BINARY}"]


# glibc gives each thread a malloc arena of 64 MB of address space: a JVM's dozen threads would spend the jail's
# address-space rlimit on arenas before its heap (at 128 MB of memory the JVM could not start its threads).
_MALLOC_ARENAS = "MALLOC_ARENA_MAX=2"


def language_env(tool: Toolchain, limits: Limits, compile_step: bool) -> tuple[str, ...]:
    """Environment variables a language's jail adds to the common ones (PATH, HOME, TMPDIR, locale)."""
    language = tool.language
    if language == "python":
        # Fixed hash seed: same program, same set iteration order, same verdict.
        env: tuple[str, ...] = ("PYTHONHASHSEED=0", "PYTHONDONTWRITEBYTECODE=1", "PYTHONIOENCODING=utf-8")
        if tool.site_dirs:
            # A named environment's packages; BLAS and OpenMP pools sized 1 (numpy would start one thread per host
            # CPU at import, against the pids limit).
            threads = ("OPENBLAS_NUM_THREADS=1", "OMP_NUM_THREADS=1", "MKL_NUM_THREADS=1")
            env += (f"PYTHONPATH={':'.join(tool.site_dirs)}", *threads)
        return env
    if language == "go" and compile_step:
        # No network and no modules: the standard library only; the build cache lives and dies in the work dir.
        return (
            f"GOCACHE={WORK_DIR}/.gocache",
            f"GOPATH={WORK_DIR}/.gopath",
            "GO111MODULE=off",
            "GOPROXY=off",
            "CGO_ENABLED=0",
            "GOMAXPROCS=2",
        )
    if language == "go":
        return ("GOMAXPROCS=2", f"GOMEMLIMIT={max(8, limits.memory_mb * 3 // 4)}MiB")
    if language in ("javascript", "typescript"):
        return ("UV_THREADPOOL_SIZE=2", "NODE_DISABLE_COLORS=1", _MALLOC_ARENAS)
    if language == "java":
        return (_MALLOC_ARENAS,)
    return ()
