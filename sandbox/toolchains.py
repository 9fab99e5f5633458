"""Find the interpreter and compilers a jail runs, and the host paths each needs mounted read-only.

Everything is found on the local disk (no network); results are cached for the process lifetime.
"""

from __future__ import annotations

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
from groupscore.sandbox.errors import BadRunRequest, SandboxUnavailable

LANGUAGES = ("python", "c", "cpp")
# The file a run of each language starts from when no command names one (C/C++: the source that is compiled).
MAIN_FILE = {"python": "main.py", "c": "main.c", "cpp": "main.cpp"}


@dataclass(frozen=True)
class Toolchain:
    """One language's executables and the read-only host paths they need inside the jail."""

    language: str
    executable: str  # interpreter (python) or compiler driver (gcc / g++)
    version: str
    ro_paths: tuple[str, ...]  # real host paths, bind-mounted read-only at the same place
    run_ro_paths: tuple[str, ...] = ()  # C/C++: what the compiled program needs (no compiler)


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


@functools.lru_cache(maxsize=2)
def compiler_toolchain(language: str) -> Toolchain:
    """gcc (C) or g++ (C++) and the trees a compile needs; the compiled program needs only the loader libs."""
    driver = {"c": "gcc", "cpp": "g++"}[language]
    exe = shutil.which(driver, path="/usr/bin:/bin:/usr/local/bin")
    if not exe:
        raise SandboxUnavailable(f"{driver} not found: install Debian's gcc and g++ (tools/install-system-deps does)")
    try:
        version = subprocess.run([exe, "-dumpfullversion"], capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        raise SandboxUnavailable(f"{driver} cannot run: {exc}") from exc
    # The driver, cc1/cc1plus, as, ld, headers and crt files: /usr/bin, /usr/lib*, /usr/libexec, /usr/include.
    prefix = os.path.dirname(os.path.dirname(os.path.realpath(exe)))
    trees = [os.path.join(prefix, d) for d in ("bin", "lib", "lib64", "libexec", "include")]
    ro = {p for p in trees if os.path.isdir(p)} | set(loader_paths())
    return Toolchain(language, exe, version, tuple(sorted(ro)), run_ro_paths=loader_paths())


def toolchain(language: str) -> Toolchain:
    if language not in LANGUAGES:
        raise BadRunRequest(f"unknown language {language!r}; choose one of {', '.join(LANGUAGES)}")
    return python_toolchain() if language == "python" else compiler_toolchain(language)
