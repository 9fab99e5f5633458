"""What a task shows of itself before it runs (for `env list` and the service's GET /v1/tasks): its address, its
tools by name, its checkers' kinds and what it asks, read without starting anything (a class's methods from its
source with `ast`, or from the schemas the task gives)."""

from __future__ import annotations

from groupscore.environments.task import Task
from groupscore.environments.tools import schemas_from_source
from groupscore.schema.sessions import TaskSummary

DESCRIPTION_CHARS = 80


def tool_names(task: Task) -> list[str]:
    """The built-in tools, each class's methods (those it names, else its schemas', its setup method left out; a
    class known only once its jail imports it shows as `Class.*`), then tools later turns add."""
    names = list(task.tools)
    for spec in task.classes:
        try:
            schemas = spec.tool_schemas or (schemas_from_source(spec.source, spec.class_name) if spec.source else ())
        except (ValueError, SyntaxError):  # a class bound by an import: its methods are known in the jail
            schemas = ()
        functions = [s.get("function", s) for s in schemas if isinstance(s, dict)]
        given = [f.get("name") for f in functions if isinstance(f, dict)]
        named = [n for n in given if isinstance(n, str) and n and n != spec.setup]
        names += list(spec.methods) if spec.methods else named or [f"{spec.class_name}.*"]
    names += [name for turn in task.turns for name in turn.add_tools if name not in names]
    return names


def checker_kinds(task: Task) -> list[str]:
    return list(dict.fromkeys(c.kind for c in task.checkers))


def description(task: Task, width: int = DESCRIPTION_CHARS) -> str:
    """What the task asks, on one line: its first user message's text, cut."""
    first = next((m for m in task.turns[0].messages if m.get("role") == "user"), {})
    content = first.get("content")
    if isinstance(content, list):  # parts: their text
        content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    text = " ".join(str(content or "").split())
    return text if len(text) <= width else text[: width - 3] + "..."


def summary(task: Task) -> TaskSummary:
    return TaskSummary(
        id=task.id,
        address=task.address,
        turns=len(task.turns),
        tools=tool_names(task),
        checkers=checker_kinds(task),
        description=description(task),
    )


def list_source(source: str) -> tuple[list[Task], list[str]]:
    """A source's tasks and the problems of those that cannot load, read to be listed: a Harbor folder's RUN steps
    are not run (nothing starts to list a task)."""
    from pathlib import Path

    from groupscore.environments.harbor import load_harbor
    from groupscore.environments.sources import BUNDLED, BadTasks, _addressed, load_source

    path = BUNDLED.get(source) or Path(source)
    if source.partition("/")[0] != "bfcl" and path.is_dir():
        return _addressed(load_harbor(path, build=False), source), []
    try:
        return load_source(source), []
    except BadTasks as exc:
        return exc.good, exc.problems
