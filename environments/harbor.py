"""Harbor task directories as tasks: `instruction.md`, `task.toml`, `environment/Dockerfile`, `tests/test.sh`.

A task directory becomes one `Task`: the shell and file tools, one user turn (the instruction), the Dockerfile's work
dir, environment and files (dockerfile.py reads the subset the jail can reproduce), and one `tests` checker whose
files are the directory's `tests/` (placed at /tests only after the episode, in the checker's own jail). The task's
`solution/solve.sh` is its oracle, kept in `metadata` (never shown to the agent).

RUN steps run once, in a session jail (`build_state`), and their packed result is the task's initial `state`, cached
on disk by a hash of everything the build reads ($XDG_CACHE_HOME, else ~/.cache, then groupscore/harbor).
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from pathlib import Path
from typing import Any

from groupscore.environments.dockerfile import Build, parse_dockerfile
from groupscore.environments.errors import SourceError
from groupscore.environments.harbor_config import parse_task_config
from groupscore.environments.task import Checker, EpisodeLimits, ScriptedTurn, Task

TOOLS = ("shell", "read_file", "write_file", "list_files")
CACHE_FORMAT = "harbor-state-2"  # part of every cache key: a change to how states are built retires old entries


def cache_dir() -> Path:
    """Where built states are kept: the user's cache dir (XDG_CACHE_HOME, else ~/.cache), groupscore/harbor."""
    base = os.environ.get("XDG_CACHE_HOME", "").strip()
    return (Path(base) if base else Path.home() / ".cache") / "groupscore" / "harbor"


def is_task_dir(path: Path) -> bool:
    return (path / "task.toml").is_file()


def load_harbor(path: str | Path, *, build: bool = True) -> list[Task]:
    """The tasks of a Harbor task directory, or of a directory of them (sorted by name).

    build=False leaves the RUN steps unrun (state None; the steps are in metadata["build_commands"]): enough to list
    tasks or read them, not to run them."""
    root = Path(path)
    if is_task_dir(root):
        return [load_harbor_task(root, build=build)]
    if not root.is_dir():
        raise SourceError(f"{root}: not a Harbor task directory (task.toml) or a directory of them")
    dirs = sorted(d for d in root.iterdir() if d.is_dir() and is_task_dir(d))
    if not dirs:
        raise SourceError(f"{root}: holds no Harbor task directory (a folder with task.toml)")
    return [load_harbor_task(d, build=build) for d in dirs]


def _need(task_dir: Path, relative: str) -> Path:
    path = task_dir / relative
    if not path.is_file():
        raise SourceError(f"task {task_dir.name}: {relative} is missing ({path})")
    return path


def _read_text(path: Path, task_dir: Path) -> str:
    """A file of the task, read as text; a link that leads out of the task's directory is refused (the loader runs on
    the host: a task must not carry the host's files into a prompt, a jail or a test's output)."""
    task_id = task_dir.name
    if not path.resolve().is_relative_to(task_dir.resolve()):
        raise SourceError(f"task {task_id}: {path.relative_to(task_dir)} leads outside the task's directory")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SourceError(f"task {task_id}: {path} is not UTF-8 text") from exc


def load_harbor_task(task_dir: Path, *, build: bool = True) -> Task:
    task_dir = Path(task_dir)
    task_id = task_dir.name
    try:
        config = parse_task_config(tomllib.loads(_read_text(_need(task_dir, "task.toml"), task_dir)))
    except tomllib.TOMLDecodeError as exc:
        raise SourceError(f"task {task_id}: task.toml is not TOML: {exc}") from exc
    except ValueError as exc:
        raise SourceError(f"task {task_id}: {exc}") from None
    env_config = config.environment
    instruction = _read_text(_need(task_dir, "instruction.md"), task_dir)
    _need(task_dir, "tests/test.sh")
    if not instruction.strip():
        raise SourceError(f"task {task_id}: instruction.md is empty")

    dockerfile = task_dir / "environment" / "Dockerfile"
    if dockerfile.is_file():
        image = parse_dockerfile(_read_text(dockerfile, task_dir), dockerfile.parent, task_id)
    elif env_config.docker_image:
        raise SourceError(
            f"task {task_id}: task.toml: environment.docker_image: a prebuilt image cannot be run in a jail; "
            "give environment/Dockerfile"
        )
    else:  # no environment: an empty work dir in the jail's own root
        image = Build(base="", base_maps_to="", workdir=env_config.workdir or "/app", env={}, files={})
    if env_config.workdir and env_config.workdir.rstrip("/") != image.workdir.rstrip("/"):
        raise SourceError(
            f"task {task_id}: task.toml: environment.workdir: {env_config.workdir} is not the Dockerfile's WORKDIR "
            f"({image.workdir}); a jail's state is its work dir: make them agree"
        )

    # The whole tests/ tree: its files (text; a binary one refuses the task), which are executable, empty folders.
    tests_dir = task_dir / "tests"
    tree = sorted(tests_dir.rglob("*"))
    tests = {p.relative_to(tests_dir).as_posix(): _read_text(p, task_dir) for p in tree if p.is_file()}
    executables = tuple(p.relative_to(tests_dir).as_posix() for p in tree if p.is_file() and p.stat().st_mode & 0o111)
    empty = tuple(p.relative_to(tests_dir).as_posix() for p in tree if p.is_dir() and not any(p.iterdir()))
    checker = Checker(
        kind="tests",
        name="tests",
        files=tests,
        executables=executables,
        dirs=empty,
        command="bash /tests/test.sh",
        timeout_s=config.verifier.timeout_sec,
        env=config.verifier.env,
    )
    sizes = {"memory_mb": env_config.memory_mb, "disk_mb": env_config.storage_mb}
    limits = EpisodeLimits(
        episode_time_s=config.agent.timeout_sec or EpisodeLimits().episode_time_s,
        **{name: value for name, value in sizes.items() if value is not None},
    )

    metadata: dict[str, Any] = dict(config.metadata)
    metadata["base_image"] = image.base
    metadata["base_maps_to"] = image.base_maps_to
    metadata["build_timeout_s"] = env_config.build_timeout_sec
    if env_config.cpus is not None:
        metadata["cpus"] = env_config.cpus
    if image.notes:
        metadata["dockerfile_notes"] = list(image.notes)
    if config.notes():
        metadata["task_toml_notes"] = config.notes()
    solution = task_dir / "solution" / "solve.sh"
    if solution.is_file():
        metadata["solution"] = str(solution)
        metadata["solution_text"] = _read_text(solution, task_dir)
        if config.solution.env:
            metadata["solution_env"] = dict(config.solution.env)

    task = Task(
        id=task_id,
        source=str(task_dir),
        turns=(ScriptedTurn(messages=({"role": "user", "content": instruction},)),),
        tools=TOOLS,
        workdir=image.workdir,
        env={**image.env, **env_config.env},
        files=image.files,
        checkers=(checker,),
        limits=limits,
        metadata=metadata,
    )
    if not image.commands:
        return task
    if not build:
        return task.model_copy(update={"metadata": {**metadata, "build_commands": list(image.commands)}})
    return with_built_state(task, image)


def state_key(task: Task, image: Build) -> str:
    """The cache key of a built state: the Dockerfile's steps (which carry the context's copied bytes), the files and
    environment they start from, and how states are built."""
    what = {
        "format": CACHE_FORMAT,
        "workdir": image.workdir,
        "env": image.env,
        "files": image.files,
        "commands": image.commands,
        "limits": task.limits.model_dump(include={"disk_mb", "memory_mb"}),
    }
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()


def with_built_state(task: Task, image: Build) -> Task:
    """The task with its RUN steps' state (built once in a jail, then read from the cache). The files go into the
    state with everything else: written again after it, they would undo what a RUN step changed in them."""
    path = cache_dir() / f"{state_key(task, image)}.tar"
    if path.is_file():
        state = path.read_bytes()
    else:
        from groupscore.environments.replay import build_state

        try:
            state = build_state(task, list(image.commands), float(task.metadata.get("build_timeout_s", 300.0)))
        except RuntimeError as exc:
            raise SourceError(f"task {task.id}: its Dockerfile's steps did not build: {exc}") from exc
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.part")
        partial.write_bytes(state)
        partial.replace(path)  # whole or absent: another process may read the cache at the same time
    return task.model_copy(update={"state": state, "files": {}})
