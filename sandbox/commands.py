"""`groupscore sandbox run|policy`: run one file in the jail, or print the isolation policy."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from groupscore.sandbox import MAIN_FILE, Limits, SandboxUnavailable, policy_for, run
from groupscore.sandbox.jail import cgroup_note

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
    """Print the run policy (and, for C/C++, the compile policy) as JSON."""
    try:
        policies: dict[str, Any] = {"run": policy_for(language).model_dump(mode="json")}
        if language in ("c", "cpp"):
            policies["compile"] = policy_for(language, compile_step=True).model_dump(mode="json")
        policies["cgroup_on_this_host"] = cgroup_note()
    except SandboxUnavailable as exc:
        print(f"sandbox unavailable: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(policies, indent=2))
    return 0
