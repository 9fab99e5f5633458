"""The sandbox's languages beside Python, C and C++: JavaScript, TypeScript, Java, Go, Rust and Bash.

Each runs stdin to stdout in a jail; a compiled one compiles in a jail of its own (its own limits, reported as
RunResult.compile) once per source; each run policy binds only that language's runtime; a missing toolchain is
SandboxUnavailable naming its Debian package. The toolchains are installed by `make` (tools/install-system-deps), so a
missing one fails these tests, never skips them.
"""

from __future__ import annotations

import pytest

from groupscore.sandbox import Limits, RunStatus, SandboxUnavailable, policy_for, run
from groupscore.sandbox import toolchains as toolchains_module
from groupscore.sandbox.languages import SPECS
from groupscore.sandbox.toolchains import toolchain

QUICK = Limits(wall_time_s=10, memory_mb=256)
# language -> (main file, a program that prints the sum of two numbers read from stdin, a program that does not compile)
SUM = {
    "javascript": (
        "main.js",
        "const [a, b] = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/).map(Number);\nconsole.log(a + b);\n",
        None,
    ),
    "typescript": (
        "main.ts",
        "const text: string = require('fs').readFileSync(0, 'utf8');\n"
        "const [a, b] = text.trim().split(/\\s+/).map(Number);\nconsole.log(a + b);\n",
        "const n: number = 'not a number';\n",
    ),
    "java": (
        "Main.java",
        "import java.util.Scanner;\npublic class Sum {\n  public static void main(String[] args) {\n"
        "    Scanner in = new Scanner(System.in);\n    System.out.println(in.nextLong() + in.nextLong());\n  }\n}\n",
        'public class Main { public static void main(String[] a) { int x = "s"; } }\n',
    ),
    "go": (
        "main.go",
        'package main\n\nimport "fmt"\n\nfunc main() {\n\tvar a, b int\n\tfmt.Scan(&a, &b)\n\tfmt.Println(a + b)\n}\n',
        "package main\n\nfunc main() { undefined() }\n",
    ),
    "rust": (
        "main.rs",
        "use std::io::Read;\nfn main() {\n    let mut s = String::new();\n"
        "    std::io::stdin().read_to_string(&mut s).unwrap();\n"
        "    let v: Vec<i64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();\n"
        '    println!("{}", v[0] + v[1]);\n}\n',
        'fn main() { let x: i32 = "s"; }\n',
    ),
    "bash": ("main.sh", "read -r a b\necho $((a + b))\n", None),
}
LANGUAGES = list(SUM)


@pytest.mark.usefixtures("jail_available")
@pytest.mark.parametrize("language", LANGUAGES)
def test_stdin_to_stdout_and_the_compile_step_is_reused(language):
    main, source, _ = SUM[language]
    first = run({main: source}, language=language, stdin="40 2\n", limits=QUICK)
    assert (first.status, first.stdout, first.stderr) == (RunStatus.OK, "42\n", ""), first
    if not SPECS[language].compiled:
        assert first.compile is None
        return
    assert first.compile is not None and first.compile.status is RunStatus.OK and not first.compile.cached
    # The compile step's own limits (COMPILE_LIMITS, or more processes for javac, go build and rustc), not the run's.
    assert first.compile.wall_time_s > 0 and first.compile.command
    again = run({main: source}, language=language, stdin="1 2", limits=QUICK)
    assert again.stdout == "3\n" and again.compile is not None and again.compile.cached


@pytest.mark.usefixtures("jail_available")
@pytest.mark.parametrize("language", [lang for lang in LANGUAGES if SUM[lang][2] is not None])
def test_a_compile_error_is_the_compilers_message_and_nothing_runs(language):
    main, _, broken = SUM[language]
    r = run({main: broken}, language=language, limits=QUICK)
    assert r.status is RunStatus.COMPILE_ERROR and r.compile is not None
    assert r.compile.status is RunStatus.RUNTIME_ERROR and r.compile.exit_code not in (None, 0)
    assert (r.compile.stderr + r.compile.stdout).strip() and r.stdout == ""


@pytest.mark.usefixtures("jail_available")
def test_the_compile_step_has_limits_of_its_own():
    main, source, _ = SUM["java"]
    # A new source (no cached artifact) and a compile clock far too short for javac: the compile times out.
    r = run({main: source + "// limits\n"}, language="java", limits=QUICK, compile_limits=Limits(wall_time_s=0.2))
    assert r.status is RunStatus.COMPILE_ERROR and r.compile is not None and r.compile.status is RunStatus.TIMEOUT


@pytest.mark.usefixtures("jail_available")
def test_the_jvm_starts_within_a_small_memory_limit_and_its_heap_error_is_memory_limit():
    # 96 MB: the JVM's reservations (heap, class space, code cache, malloc arenas) must fit the address-space rlimit.
    fits = 'public class Main { public static void main(String[] a) { System.out.println("up"); } }\n'
    r = run({"Main.java": fits}, language="java", limits=Limits(wall_time_s=10, memory_mb=96))
    assert (r.status, r.stdout) == (RunStatus.OK, "up\n"), r.stderr[-400:]
    grows = (
        "import java.util.*;\npublic class Main { public static void main(String[] a) {\n"
        "  List<long[]> keep = new ArrayList<>(); for (;;) keep.add(new long[1 << 20]); } }\n"
    )
    r = run({"Main.java": grows}, language="java", limits=Limits(wall_time_s=10, memory_mb=96))
    assert r.status is RunStatus.MEMORY_LIMIT and "OutOfMemoryError" in r.stderr


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_run_binds_only_its_own_runtime(language):
    run_ro = {m.target for m in policy_for(language).mounts if m.kind == "bind_ro"}
    tool = toolchain(language)
    compilers = {"/usr/lib/go-1.19", "/usr/share/nodejs/typescript", "/usr/bin/rustc", "/usr/include", "/usr/libexec"}
    assert not run_ro & compilers
    assert not run_ro & {"/", "/etc", "/root", "/home", "/usr", "/var", "/tmp", "/usr/share"}
    if language in ("javascript", "typescript"):
        assert tool.executable in run_ro and "/usr/bin" not in run_ro
    if language == "java":
        assert any(p.startswith("/usr/lib/jvm/") for p in run_ro) and "/usr/bin" not in run_ro
    if language in ("go", "rust"):  # a compiled program gets the loader's libraries and nothing else
        assert "/usr/bin" not in run_ro and not any(p.startswith(("/usr/lib/jvm", "/usr/lib/go")) for p in run_ro)
    if language == "bash":  # shell scripts are made of the host's small tools
        assert "/usr/bin" in run_ro
    # Java is the exception: javac is a module of the same runtime image (lib/modules) that `java` runs from.
    if SPECS[language].compiled and language != "java":
        compile_ro = {m.target for m in policy_for(language, compile_step=True).mounts if m.kind == "bind_ro"}
        assert compile_ro - run_ro, "the compile step binds its compiler; the run does not"


def test_runtime_settings_follow_the_limits():
    go = policy_for("go", Limits(memory_mb=400))
    assert "GOMAXPROCS=2" in go.env and "GOMEMLIMIT=300MiB" in go.env
    assert any(e.startswith("GOCACHE=/work/") for e in policy_for("go", compile_step=True).env)
    from groupscore.sandbox.languages import run_argv

    java = run_argv(toolchain("java"), "Main.java", Limits(memory_mb=512))
    assert "-Xmx320m" in java and "-XX:+UseSerialGC" in java and "-XX:ActiveProcessorCount=1" in java
    node = run_argv(toolchain("javascript"), "main.js", Limits(memory_mb=512))
    assert "--max-old-space-size=384" in node


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_missing_toolchain_is_unavailable_naming_its_package(language, monkeypatch, tmp_path):
    monkeypatch.setattr(toolchains_module, "HOST_BIN_PATH", str(tmp_path))
    toolchains_module.compiled_toolchain.cache_clear()
    toolchains_module.interpreter_toolchain.cache_clear()
    try:
        with pytest.raises(SandboxUnavailable, match=SPECS[language].package):
            run({SUM[language][0]: SUM[language][1]}, language=language, limits=QUICK)
    finally:
        monkeypatch.undo()
        toolchains_module.compiled_toolchain.cache_clear()
        toolchains_module.interpreter_toolchain.cache_clear()
