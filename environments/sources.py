"""Task sources, by name or path, and groupscore's own task format.

A task is addressed as SOURCE:TASK_ID. SOURCE is one of:
- `bfcl`: BFCL v4 multi-turn (the bfcl-eval package; bfcl.py), e.g. `bfcl:multi_turn_base_0`;
- `harbor`: the Harbor-layout shell tasks bundled here (data/harbor/), e.g. `harbor:csv-column-sum`;
- `demo`: the small tasks bundled in groupscore's own format (data/demo.yaml);
- a path: a Harbor task directory (task.toml inside) or a directory of them (harbor.py), or a file of tasks in
  groupscore's own format, JSONL (one task per line) or YAML (a list of tasks).

The own format is `Task` (task.py) with two conveniences: `prompt` (a string, the one user turn; `system` adds a
system message) and `turns` given as strings (one user message each).

An address is checked before any of it touches a path: a string of at most MAX_TASK_ADDRESS characters, with no
control character (NUL included) and no lone surrogate (schema/sessions.py, the service's own rule); a bad one, or
a path the system cannot look up (too long a name), is a SourceError of one line like any other.
"""

from __future__ import annotations

import difflib
import functools
import json
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from groupscore.environments.errors import SourceError
from groupscore.environments.task import Task
from groupscore.schema.sessions import MAX_TASK_ADDRESS, task_address_problem, text_problem

DATA = Path(__file__).with_name("data")
BUNDLED = {"harbor": DATA / "harbor", "demo": DATA / "demo.yaml"}


def split_address(address: str) -> tuple[str, str]:
    problem = task_address_problem(address)
    if problem is not None:
        raise SourceError(problem)
    source, _, task_id = address.rpartition(":")
    return source, task_id


def load_task(address: str) -> Task:
    source, task_id = split_address(address)
    one = _one_harbor_task(source, task_id)
    if one is not None:
        return one
    try:
        tasks = load_source(source)
    except BadTasks as exc:  # other tasks of the file are bad: this one may still be good
        if task_id in exc.bad_ids:
            raise SourceError(" | ".join(exc.bad_ids[task_id])) from None
        found = next((task for task in exc.good if task.id == task_id), None)
        if found is None:
            raise SourceError(f"{source} has no task {task_id!r} (and {len(exc.problems)} bad ones)") from None
        return found
    for task in tasks:
        if task.id == task_id:
            return task
    known = ", ".join(t.id for t in tasks[:8]) + (", ..." if len(tasks) > 8 else "")
    raise SourceError(f"{source} has no task {task_id!r} (it has {len(tasks)}: {known})")


@functools.lru_cache(maxsize=256)
def _one_harbor_task(source: str, task_id: str) -> Task | None:
    """The task `task_id` of a folder of Harbor tasks, loaded alone (only its own state is built, never every task of
    the folder), or None when `source` is no such folder. A task id is a folder's name, never a path."""
    if source.partition("/")[0] == "bfcl" or "/" in task_id or task_id in (".", ".."):
        return None
    path = BUNDLED.get(source) or Path(source)
    try:
        if not (path.is_dir() and (path / task_id / "task.toml").is_file()):
            return None
    except OSError:
        return None  # load_source says why
    from groupscore.environments.harbor import load_harbor_task

    return load_harbor_task(path / task_id).model_copy(update={"source": source})


@functools.lru_cache(maxsize=32)
def load_source(source: str) -> list[Task]:
    """Every task of a source (cached per process)."""
    problem = text_problem(source, MAX_TASK_ADDRESS) if isinstance(source, str) else "not a string"
    if problem is not None:
        raise SourceError(f"task source: {problem}")
    if source == "bfcl" or source.startswith("bfcl/"):
        from groupscore.environments.bfcl import load_bfcl

        try:
            return load_bfcl(source.partition("/")[2] or None)
        except KeyError as exc:
            raise SourceError(f"{source}: no such BFCL category or task ({exc})") from exc
    path = BUNDLED.get(source) or Path(source)
    try:
        exists = path.exists()
    except OSError as exc:  # a name too long, or a folder on the way that cannot be read
        raise SourceError(f"{source}: not a usable path ({exc.strerror or type(exc).__name__})") from None
    if not exists:
        raise SourceError(f"{source}: no such source (bfcl, harbor, demo, or a path to a task file or directory)")
    if path.is_dir():
        from groupscore.environments.harbor import load_harbor

        tasks = load_harbor(path)
    else:
        try:
            tasks = load_own(path)
        except BadTasks as exc:
            exc.good = _addressed(exc.good, source)
            raise
    return _addressed(tasks, source)


def _addressed(tasks: list[Task], source: str) -> list[Task]:
    # Each task knows its address as this source names it: `harbor:NAME` for a bundled task (which a service on
    # another host resolves), the path as given for the user's own.
    return [t if t.source == source else t.model_copy(update={"source": source}) for t in tasks]


# What a task in groupscore's own format may hold: Task's fields, and `prompt` and `system` (read into its turns)
TASK_KEYS = frozenset(Task.model_fields) | {"prompt", "system"}


class BadTasks(SourceError):
    """Some tasks of a file cannot be loaded: each one's problem (one line each, every one named), and the tasks that
    can (`env list` and `check env:` go on with them; everything else refuses the file)."""

    def __init__(self, problems: list[str], good: list[Task], bad_ids: dict[str, list[str]]) -> None:
        count = f"{len(problems)} problem{'s' if len(problems) > 1 else ''}"
        super().__init__(problems[0] if len(problems) == 1 else f"{count}:\n  " + "\n  ".join(problems))
        self.problems, self.good = problems, good
        self.bad_ids = bad_ids  # a bad task's id (where it has one) -> its problems; a repeated id is bad whole


def load_own(path: Path) -> list[Task]:
    """Tasks in groupscore's own format from a JSONL or YAML file. A file that is no such list of tasks (any shape,
    any depth) is a SourceError in one line that quotes none of the file (it may hold more than tasks)."""
    try:
        return _load_own(path)
    except RecursionError:
        raise SourceError(f"{path}: nested too deeply to be a task file") from None


def _load_own(path: Path) -> list[Task]:
    text = path.read_text(encoding="utf-8")
    if path.suffix in (".yaml", ".yml"):
        import yaml

        try:
            raws = yaml.safe_load(text) or []
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
            raise SourceError(f"{path}: not YAML{at} ({type(exc).__name__})") from None
        raws = raws.get("tasks", []) if isinstance(raws, dict) else raws
        if not isinstance(raws, list):
            raise SourceError(f"{path}: a YAML task file is a list of tasks (or a mapping with 'tasks': a list)")
        where = [f"{path}: task {i + 1}" for i in range(len(raws))]
    else:
        raws, where = [], []
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    raws.append(json.loads(line))
                except ValueError as exc:
                    raise SourceError(f"{path}:{n}: not JSON ({type(exc).__name__})") from None
                where.append(f"{path}:{n}")
    tasks: list[Task] = []
    problems: list[str] = []
    bad_ids: dict[str, list[str]] = {}
    for raw, at in zip(raws, where, strict=True):
        try:
            tasks.append(own_task(raw, str(path), at))
        except SourceError as exc:
            problems.append(str(exc))
            if isinstance(raw, dict) and isinstance(raw.get("id"), str | int):
                bad_ids.setdefault(str(raw["id"]), []).append(str(exc))
    counts = Counter(task.id for task in tasks)
    for task_id in (i for i, n in counts.items() if n > 1):  # which of two is meant cannot be told: neither runs
        problem = f"{path}: task id {task_id!r} appears {counts[task_id]} times"
        problems.append(problem)
        bad_ids.setdefault(task_id, []).append(problem)
    if problems:
        raise BadTasks(problems, [t for t in tasks if t.id not in bad_ids], bad_ids)
    return tasks


def own_task(raw: Any, source: str, where: str) -> Task:
    if not isinstance(raw, dict):
        raise SourceError(f"{where}: a task is an object (id, prompt or turns, tools, checkers)")
    unknown = [key for key in raw if key not in TASK_KEYS]
    if unknown:  # said before anything else: a misspelt 'prompt' would otherwise read as a task with no turns
        key = str(unknown[0])
        close = difflib.get_close_matches(key, sorted(TASK_KEYS), n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"a task's fields: {', '.join(sorted(TASK_KEYS))}"
        shown = repr(key) if len(key) <= 60 else repr(key[:57]) + "..."
        raise SourceError(f"{where}: {shown}: not a task field ({hint})")
    raw = dict(raw)
    system = raw.pop("system", None)
    if "prompt" in raw:
        if "turns" in raw:
            raise SourceError(f"{where}: give 'prompt' or 'turns', not both")
        raw["turns"] = [raw.pop("prompt")]
    turns = []
    given = raw.get("turns") or []
    if not isinstance(given, list):
        raise SourceError(f"{where}: turns: a list of turns (each a string, or an object with 'messages')")
    for i, turn in enumerate(given):
        if not isinstance(turn, str | dict):
            raise SourceError(f"{where}: turns.{i}: a turn is a string or an object with 'messages'")
        if isinstance(turn, str):
            turn = {"messages": [{"role": "user", "content": turn}]}
        if i == 0 and system:
            messages = turn.get("messages", [])
            if not isinstance(messages, list):
                raise SourceError(f"{where}: turns.0.messages: a list of messages")
            turn = {**turn, "messages": [{"role": "system", "content": system}, *messages]}
        turns.append(turn)
    raw["turns"] = turns
    raw.setdefault("source", source)
    try:
        return Task.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        field = ".".join(str(p) for p in first["loc"]) or "<task>"
        raise SourceError(f"{where}: {field}: {first['msg']}") from exc
