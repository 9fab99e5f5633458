"""Find the interpreters and compilers a jail runs, and the host paths each needs mounted read-only.

Everything is found on the local disk (no network); results are cached for the process lifetime. A toolchain that is
missing raises SandboxUnavailable naming its Debian package: nothing of that language runs, never outside a jail.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from groupscore.sandbox import settings as sandbox_settings
from groupscore.sandbox.envs import load_env
from groupscore.sandbox.errors import BadRunRequest, SandboxUnavailable
from groupscore.sandbox.languages import LANGUAGES, MAIN_FILE, SPECS

__all__ = ["LANGUAGES", "MAIN_FILE", "Toolchain", "loader_paths", "toolchain"]
HOST_BIN_PATH = "/usr/bin:/bin:/usr/local/bin"  # where toolchains are looked up (never the caller's PATH)


@dataclass(frozen=True)
class Toolchain:
    """One language's executables and the read-only host paths they need inside the jail."""

    language: str
    executable: str  # what a run starts (python3, node, java, bash) or the compiler driver (gcc, g++, go, rustc)
    version: str
    ro_paths: tuple[str, ...]  # real host paths, bind-mounted read-only at the same place (compile step, or the run)
    run_ro_paths: tuple[str, ...] = ()  # compiled languages: what the compiled program needs (no compiler)
    compiler: str = ""  # a compiler apart from the executable: javac, tsc's script
    site_dirs: tuple[str, ...] = ()  # python with a named environment: its site-packages (on PYTHONPATH)
    preimport: tuple[str, ...] = ()  # python with a named environment: what the call runner imports before forking


def _traversable_by_others(path: str) -> bool:
    """True when an unprivileged uid (the jail's) can reach and read `path`: o+x on every parent, o+r on it."""
    real = os.path.realpath(path)
    parts = Path(real).parts
    for i in range(1, len(parts)):
        parent = os.path.join(*parts[:i]) if i > 1 else "/"
        try:
            if not os.stat(parent).st_mode & stat.S_IXOTH:
                return False
        except OSError:
            return False
    try:
        return bool(os.stat(real).st_mode & stat.S_IROTH)
    except OSError:
        return False


@functools.lru_cache(maxsize=1)
def loader_paths() -> tuple[str, ...]:
    """The dynamic loader and the multiarch library dir of this host (read from our own memory map)."""
    found: set[str] = set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            name = line.rsplit(None, 1)[-1] if "/" in line else ""
            base = os.path.basename(name)
            if base.startswith("libc.so") or base.startswith("ld-linux") or base.startswith("ld-musl"):
                found.add(os.path.dirname(os.path.realpath(name)))
    # The ELF interpreter path (/lib64/ld-linux-x86-64.so.2) is looked up by its fixed name.
    for interp_dir in ("/lib64", "/lib"):
        if os.path.isdir(interp_dir):
            found.add(interp_dir)
            break
    if not found:
        raise SandboxUnavailable("cannot locate the C library of this host (no libc in /proc/self/maps)")
    return tuple(sorted(found))


def _python_candidates() -> list[str]:
    env = sandbox_settings.current().python
    if env:
        return [env]
    # The venv's base interpreter first; it often lives under /root (0700), which the jail's
    # unprivileged uid cannot traverse, so the system interpreter is the usual pick.
    cands = [getattr(sys, "_base_executable", ""), sys.executable, "/usr/bin/python3", "/usr/local/bin/python3"]
    return [c for c in dict.fromkeys(cands) if c]


_PY_INFO = (
    "import json,sys,sysconfig;"
    "print(json.dumps({'v':sys.version.split()[0],'prefix':sys.base_prefix,"
    "'stdlib':sysconfig.get_paths()['stdlib'],'platstdlib':sysconfig.get_paths()['platstdlib'],"
    "'libdir':sysconfig.get_config_var('LIBDIR') or '','shared':bool(sysconfig.get_config_var('Py_ENABLE_SHARED'))}))"
)


@functools.lru_cache(maxsize=1)
def python_toolchain() -> Toolchain:
    """The jail's Python 3: the first candidate whose files an unprivileged uid can read."""
    tried = []
    for cand in _python_candidates():
        exe = shutil.which(cand) if not os.path.isabs(cand) else cand
        if not exe or not os.path.exists(exe):
            tried.append(f"{cand}: not found")
            continue
        if not _traversable_by_others(exe):
            tried.append(f"{cand}: not readable by an unprivileged uid (a parent dir lacks o+x)")
            continue
        try:
            # Trusted: our own interpreter choice, run on the host only to ask where its stdlib is.
            out = subprocess.run([exe, "-I", "-c", _PY_INFO], capture_output=True, text=True, timeout=20, check=True)
            info = json.loads(out.stdout)
        except (OSError, subprocess.SubprocessError, ValueError) as exc:
            tried.append(f"{cand}: cannot query ({exc})")
            continue
        paths = {os.path.realpath(exe), os.path.realpath(info["stdlib"]), os.path.realpath(info["platstdlib"])}
        if info["shared"] and info["libdir"]:
            paths.add(os.path.realpath(info["libdir"]))
        if not all(_traversable_by_others(p) for p in paths):
            tried.append(f"{cand}: its stdlib is not readable by an unprivileged uid")
            continue
        return Toolchain("python", os.path.realpath(exe), info["v"], tuple(sorted(paths | set(loader_paths()))))
    raise SandboxUnavailable(
        "no Python 3 interpreter usable inside the jail (" + "; ".join(tried) + "). Install Debian's python3 "
        "(tools/install-system-deps does) or set GROUPSCORE_SANDBOX_PYTHON to a world-readable python3."
    )


def _find(program: str, language: str) -> str:
    exe = shutil.which(program, path=HOST_BIN_PATH)
    if not exe:
        raise SandboxUnavailable(
            f"{program} not found, so {language} cannot run: install Debian's {SPECS[language].package} "
            "(tools/install-system-deps does)"
        )
    return os.path.realpath(exe)


def _version(argv: list[str], language: str) -> str:
    """First line of a toolchain's version text (trusted: our own toolchain, run on the host)."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, env={"PATH": "/usr/bin:/bin"})
    except (OSError, subprocess.SubprocessError) as exc:
        raise SandboxUnavailable(f"{argv[0]} cannot run ({exc}): reinstall Debian's {SPECS[language].package}") from exc
    lines = (done.stdout or done.stderr).strip().splitlines()
    if done.returncode != 0 or not lines:
        raise SandboxUnavailable(f"{argv[0]} cannot run: reinstall Debian's {SPECS[language].package}")
    return lines[0].strip()


def _trees(exe: str, dirs: tuple[str, ...]) -> set[str]:
    """The dirs under the executable's prefix (/usr/bin/gcc -> /usr/lib, /usr/libexec, ...) that exist."""
    prefix = os.path.dirname(os.path.dirname(exe))
    return {p for p in (os.path.join(prefix, d) for d in dirs) if os.path.isdir(p)}


def _link_targets(top: str) -> set[str]:
    """Where the symlinks of a toolchain's tree point outside it (Debian's JDK keeps its config in /etc/java-*, Go's
    GOROOT links its src into /usr/share): the parent dir of each target, so the links resolve inside the jail."""
    found = set()
    for root, dirs, files in os.walk(top):
        for name in dirs + files:
            path = os.path.join(root, name)
            if os.path.islink(path):
                target = os.path.realpath(path)
                inside = target.startswith(top.rstrip("/") + "/") or target.startswith("/usr/share/doc/")
                if not inside and os.path.exists(target):
                    found.add(target if os.path.isdir(target) else os.path.dirname(target))
    return found


@functools.lru_cache(maxsize=16)
def compiled_toolchain(language: str) -> Toolchain:
    """A compiler and the trees its compile step needs; the compiled program needs only the loader's libraries."""
    loader = set(loader_paths())
    if language in ("c", "cpp", "rust"):
        # The driver, cc1/cc1plus (rustc: its libraries and rustlib), as, ld, headers and crt files.
        exe = _find({"c": "gcc", "cpp": "g++", "rust": "rustc"}[language], language)
        version = _version([exe, "-dumpfullversion" if language != "rust" else "--version"], language)
        ro = _trees(exe, ("bin", "lib", "lib64", "libexec", "include"))
        linker = _find("gcc", language) if language == "rust" else ""  # rustc links through gcc
        return Toolchain(language, exe, version, tuple(sorted(ro | loader)), tuple(sorted(loader)), compiler=linker)
    if language == "go":
        exe = _find("go", language)
        goroot = os.path.dirname(os.path.dirname(exe))  # /usr/lib/go-1.19: bin/go, pkg/ (the built std), src ->
        ro = {goroot} | _link_targets(goroot) | loader
        return Toolchain(language, exe, _version([exe, "version"], language), tuple(sorted(ro)), tuple(sorted(loader)))
    if language == "java":
        javac = _find("javac", language)
        java = _find("java", language)
        jdk = os.path.dirname(os.path.dirname(javac))  # /usr/lib/jvm/java-17-openjdk-amd64 (javac, java, jar)
        jdk_ro = tuple(sorted({jdk} | _link_targets(jdk) | loader))  # compile and run: the JVM is the runtime
        return Toolchain(language, java, _version([javac, "-version"], language), jdk_ro, jdk_ro, compiler=javac)
    if language == "typescript":
        node = _find("node", language)
        tsc = _find("tsc", language)
        # Debian's tsc is `require('../lib/tsc.js')`: run that script with node directly; its package is its tree.
        package = os.path.dirname(os.path.dirname(tsc))
        script = os.path.join(package, "lib", "tsc.js")
        version = _version([node, script, "--version"], language) + "; node " + _version([node, "--version"], language)
        run_ro = tuple(sorted({node} | loader))
        return Toolchain(language, node, version, tuple(sorted({node, package} | loader)), run_ro, compiler=script)
    raise BadRunRequest(f"{language} is not a compiled language")


@functools.lru_cache(maxsize=4)
def interpreter_toolchain(language: str) -> Toolchain:
    """node (JavaScript) or bash and what a run needs: the interpreter and the loader's libraries; bash also gets
    /usr/bin read-only, since shell scripts are made of the host's small tools (sort, tr, awk, ...)."""
    loader = set(loader_paths())
    if language == "javascript":
        node = _find("node", language)
        return Toolchain(language, node, _version([node, "--version"], language), tuple(sorted({node} | loader)))
    bash = _find("bash", language)
    # C.UTF-8's locale files: the jail's LC_ALL names it, and bash warns on every run without them.
    ro = {bash, os.path.dirname(bash), "/usr/lib/locale/C.utf8"} | loader
    return Toolchain(language, bash, _version([bash, "--version"], language), tuple(sorted(ro)))


@functools.lru_cache(maxsize=16)
def python_env_toolchain(name: str) -> Toolchain:
    """The jail's Python with the named environment (envs.py) bound read-only beside it."""
    base = python_toolchain()
    env = load_env(name, base.version)
    if not _traversable_by_others(env.site_packages):
        raise SandboxUnavailable(
            f"python_env {name!r} at {env.path} is not readable by an unprivileged uid (a parent dir lacks o+x): "
            "set GROUPSCORE_SANDBOX_ENVS to a world-readable dir and create it there"
        )
    return dataclasses.replace(
        base,
        version=f"{base.version} + env {name}",
        ro_paths=tuple(sorted({*base.ro_paths, env.path})),
        site_dirs=(env.site_packages,),
        preimport=env.preimport,
    )


def toolchain(language: str, python_env: str | None = None) -> Toolchain:
    """The toolchain of a language; Python with `python_env`, else $GROUPSCORE_SANDBOX_PYTHON_ENV, else alone ("" for
    alone whatever the setting)."""
    if language not in LANGUAGES:
        raise BadRunRequest(f"unknown language {language!r}; choose one of {', '.join(LANGUAGES)}")
    if language == "python":
        env = sandbox_settings.current().python_env if python_env is None else python_env
        return python_env_toolchain(env) if env else python_toolchain()
    return compiled_toolchain(language) if SPECS[language].compiled else interpreter_toolchain(language)
