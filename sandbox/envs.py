"""Named Python environments for the jail: third-party packages (numpy, pandas, ...) a Python run can import.

An environment is a directory `<GROUPSCORE_SANDBOX_ENVS>/<name>/` holding `site-packages/` (installed by pip for the
jail's interpreter: its Python version, binary wheels only) and `env.json` (that version, the packages, how long
importing each took inside a jail, and which the call runner imports before it forks its first worker). A run that
names it gets the directory bound read-only and its site-packages on PYTHONPATH; nothing in it is writable from a
jail. `groupscore sandbox env create NAME PACKAGES...` (and `make`, for the tests' `sci`) makes one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from groupscore.sandbox import settings as sandbox_settings
from groupscore.sandbox.errors import BadRunRequest, SandboxUnavailable

ENV_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")
MODULE_NAME = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*\Z")
# An import that takes longer than this inside a jail is done by the call runner before it forks its first worker, so
# a program's `import numpy` finds it loaded (one import per item instead of one per worker).
PREIMPORT_ABOVE_S = 0.02


@dataclass(frozen=True)
class PythonEnv:
    name: str
    path: str  # the environment's dir, bound read-only into the jail at the same place
    site_packages: str
    python_version: str  # major.minor of the interpreter it was made for
    preimport: tuple[str, ...] = ()  # modules the call runner imports before forking workers


def envs_dir() -> Path:
    return Path(sandbox_settings.current().envs)


def check_env_name(name: str) -> str:
    if not ENV_NAME.match(name):  # also keeps the dir out of the jail's /tmp (its work dir): see load_env
        raise BadRunRequest(f"bad python_env name {name!r}: use letters, digits, '_', '.', '-' (at most 64)")
    return name


def load_env(name: str, python_version: str) -> PythonEnv:
    """The named environment, checked against the jail's interpreter version; SandboxUnavailable when it is missing."""
    path = envs_dir() / check_env_name(name)
    if str(path).startswith(("/tmp/", "/work/", "/proc/", "/dev/")):
        raise SandboxUnavailable(
            f"python_env dir {path} is under a path the jail has its own of: set GROUPSCORE_SANDBOX_ENVS"
        )
    try:
        meta = json.loads((path / "env.json").read_text())
    except (OSError, ValueError):
        raise SandboxUnavailable(
            f"python_env {name!r} not found in {envs_dir()}: create it with "
            f"`groupscore sandbox env create {name} PACKAGES...` (GROUPSCORE_SANDBOX_ENVS sets the dir)"
        ) from None
    made_for = str(meta.get("python", ""))
    if made_for != ".".join(python_version.split(".")[:2]):
        raise SandboxUnavailable(
            f"python_env {name!r} was made for Python {made_for}, the jail runs {python_version}: create it again"
        )
    preimport = tuple(m for m in meta.get("preimport", []) if isinstance(m, str) and MODULE_NAME.match(m))
    return PythonEnv(name, str(path), str(path / "site-packages"), made_for, preimport)


def create_env(name: str, packages: list[str], python_exe: str, python_version: str) -> Path:
    """Install `packages` for the jail's interpreter into a new environment `name` (replacing one of that name).

    pip runs on the host (trusted: the operator's package list), for the jail's Python version, binary wheels only, so
    nothing is built here; the result is made world-readable, since jails run as uids of their own."""
    check_env_name(name)
    if not packages:
        raise BadRunRequest("name at least one package to install")
    version = ".".join(python_version.split(".")[:2])
    final = envs_dir() / name
    staging = envs_dir() / f".{name}.new"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True, mode=0o755)
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile"]
    pip += ["--target", str(staging / "site-packages"), "--python-version", version, "--only-binary=:all:"]
    done = subprocess.run([*pip, *packages], capture_output=True, text=True)
    if done.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise SandboxUnavailable(f"pip could not install {' '.join(packages)}: {done.stderr.strip()[-600:]}")
    # Compile the bytecode now with the jail's interpreter: a jail cannot write __pycache__ in a read-only bind.
    subprocess.run([python_exe, "-m", "compileall", "-q", str(staging / "site-packages")], capture_output=True)
    tops = sorted(
        {_top_module(p) for p in (staging / "site-packages").iterdir() if _top_module(p)} - {"bin", "__pycache__"}
    )
    meta = {"python": version, "packages": packages, "modules": tops, "import_s": {}, "preimport": []}
    (staging / "env.json").write_text(json.dumps(meta, indent=1))
    _world_readable(staging)
    if final.exists():
        shutil.rmtree(final)
    staging.rename(final)
    return final


def record_import_times(path: Path, import_s: dict[str, float]) -> list[str]:
    """Store how long each module took to import in a jail, and pick those the runner imports before forking."""
    meta = json.loads((path / "env.json").read_text())
    meta["import_s"] = {m: round(t, 4) for m, t in import_s.items()}
    meta["preimport"] = sorted(m for m, t in import_s.items() if t > PREIMPORT_ABOVE_S)
    (path / "env.json").write_text(json.dumps(meta, indent=1))
    os.chmod(path / "env.json", 0o644)
    return list(meta["preimport"])


def import_probe(module: str) -> str:
    """A program that prints how long importing `module` takes (run in a jail by the CLI)."""
    if not MODULE_NAME.match(module):
        raise BadRunRequest(f"bad module name {module!r}")
    return f"import time\nt = time.perf_counter()\nimport {module}\nprint(time.perf_counter() - t)\n"


def _top_module(path: Path) -> str:
    name = path.name
    if name.endswith((".dist-info", ".egg-info", ".libs", ".pth")) or name.startswith(("_", ".")):
        return ""
    if path.is_dir() and (path / "__init__.py").exists():
        return name
    return name.split(".")[0] if name.endswith((".py", ".so")) else ""


def _world_readable(root: Path) -> None:
    for dirpath, _dirs, filenames in os.walk(root):
        os.chmod(dirpath, 0o755)
        for f in filenames:
            full = os.path.join(dirpath, f)
            if not os.path.islink(full):
                os.chmod(full, os.stat(full).st_mode | 0o444)
