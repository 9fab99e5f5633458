"""`groupscore sandbox run|policy|env create`: run one file in the jail, print the isolation policy, or make a named
Python environment for the jail."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from groupscore.sandbox import MAIN_FILE, Limits, SandboxUnavailable, policy_for, run, warm
from groupscore.sandbox.harness import cgroup_note
from groupscore.sandbox.languages import SPECS

# Suffixes other than the one each language's main file has (main.cpp) that name the same language.
EXTRA_SUFFIXES = {".cc": "cpp", ".cxx": "cpp", ".c++": "cpp"}


def language_of(file: Path) -> str:
    """The language a file's suffix names, among those the sandbox runs (its main files' suffixes); ValueError
    naming the suffix and the way out (--language) otherwise."""
    suffixes = {Path(main).suffix: language for language, main in MAIN_FILE.items()}
    suffixes.update({s: lang for s, lang in EXTRA_SUFFIXES.items() if lang in MAIN_FILE})
    language = suffixes.get(file.suffix.lower())
    if language is None:
        known = ", ".join(f"{suffix} ({lang})" for suffix, lang in sorted(suffixes.items()))
        raise ValueError(
            f"cannot tell the language of {file.name!r} from its suffix; give --language (suffixes: {known})"
        )
    return language


def run_file(
    file: Path,
    language: str | None = None,
    time_limit_s: float | None = None,
    memory_mb: int | None = None,
    stdin_path: Path | None = None,
    stdin_data: bytes | None = None,
) -> int:
    """Print the RunResult as JSON. Exit status: 0 ok, 1 the program failed, 2 the sandbox is unavailable.

    `language` None: from the file's suffix. The program's stdin: `stdin_data`, else the file `stdin_path`, else
    nothing. A limit left as None is Limits' default."""
    file = Path(file)
    language = language or language_of(file)
    source = file.read_bytes()
    if stdin_data is not None:
        stdin = stdin_data
    else:
        stdin = Path(stdin_path).read_bytes() if stdin_path else b""
    given: dict[str, Any] = {"wall_time_s": time_limit_s, "memory_mb": memory_mb}
    try:
        result = run(
            {MAIN_FILE[language]: source},
            language=language,
            stdin=stdin,
            limits=Limits(**{name: value for name, value in given.items() if value is not None}),
        )
    except SandboxUnavailable as exc:
        print(f"sandbox unavailable: {exc}", file=sys.stderr)
        return 2
    print(result.model_dump_json(indent=2, exclude={"files"}))
    return 0 if result.ok else 1


def show_policy(language: str = "python") -> int:
    """Print the run policy (and, for a compiled language, the compile policy) as JSON."""
    try:
        policies: dict[str, Any] = {"run": policy_for(language).model_dump(mode="json")}
        if SPECS[language].compiled:
            policies["compile"] = policy_for(language, compile_step=True).model_dump(mode="json")
        policies["cgroup_on_this_host"] = cgroup_note()
        if language == "python":
            # Said before any run: the template starts at the first warm run (a failure then shows in warm.note()).
            policies["warm_python_runs"] = warm.note()
    except SandboxUnavailable as exc:
        print(f"sandbox unavailable: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(policies, indent=2))
    return 0


def create_env(name: str, packages: list[str]) -> int:
    """`groupscore sandbox env create NAME PACKAGES...`: install the packages for the jail's Python, then time each
    top-level module's import inside a jail (those above envs.PREIMPORT_ABOVE_S the call runner imports before it forks
    its first worker). Exit status: 0 made, 2 it could not be made."""
    from groupscore.sandbox.envs import create_env as make_env
    from groupscore.sandbox.envs import import_probe, load_env, record_import_times
    from groupscore.sandbox.toolchains import python_env_toolchain, python_toolchain

    try:
        base = python_toolchain()
        path = make_env(name, packages, base.executable, base.version)
        python_env_toolchain.cache_clear()  # a new env of an old name
        modules = json.loads((path / "env.json").read_text())["modules"]
        times: dict[str, float] = {}
        for module in modules:
            r = run({"main.py": import_probe(module)}, limits=Limits(wall_time_s=60, memory_mb=1024), python_env=name)
            if r.ok:
                times[module] = float(r.stdout.strip())
            else:
                print(f"importing {module} failed in the jail: {r.stderr.strip()[-300:]}", file=sys.stderr)
        preimport = record_import_times(path, times)
        python_env_toolchain.cache_clear()
        env = load_env(name, base.version)
    except (SandboxUnavailable, ValueError) as exc:
        print(f"groupscore sandbox env create: {exc}", file=sys.stderr)
        return 2
    shown = ", ".join(f"{m} {t * 1000:.0f} ms" for m, t in sorted(times.items()))
    print(f"{env.path}: Python {env.python_version}; import in a jail: {shown or 'nothing to import'}")
    print(f"imported by the call runner before it forks: {', '.join(preimport) or 'nothing'}")
    return 0
