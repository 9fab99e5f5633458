"""The taskset: tasks of a prompt, a worked solution and a verifier item; and groupscore's own JSONL rows of
{id, prompt, solution, item}, where `item` is a registry item minus its completion."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import ValidationError

from groupscore.verifiers.registry import describe_error, parse_item


class Message(NamedTuple):
    """One turn of a conversational prompt."""

    role: str
    content: str


@dataclass(frozen=True)
class Task:
    id: str
    prompt: str  # the text the model sees (rendered with the chat template once the model is known)
    solution: str | None  # a worked solution: SFT target and the dry run's reference completion
    item: dict[str, Any]  # verifier fields (answer, tests, hidden_tests...): never shown to the model
    messages: tuple[Message, ...] | None = None  # a conversational prompt, before rendering
    columns: dict[str, Any] = field(default_factory=dict)  # the row's other columns, for user reward functions


def raise_problems(problems: list[str], where: str) -> None:
    if problems:
        raise ValueError(
            f"invalid taskset {where}:\n  "
            + "\n  ".join(problems[:20])
            + (f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else "")
        )


def own_row_task(row: Any, label: str, seen: set[str]) -> Task | str:
    """One of groupscore's own rows as a task, or the problem with it."""
    if not isinstance(row, dict):
        return f"{label}: expected an object"
    missing = [k for k in ("id", "prompt", "item") if k not in row]
    if missing:
        hint = " (rows of another shape: map their columns with taskset.columns)" if "prompt" in missing else ""
        return f"{label}: missing {', '.join(missing)}{hint}"
    task_id = str(row["id"])
    if task_id in seen:
        return f"{label}: duplicate id {task_id!r}"
    seen.add(task_id)
    item = row["item"]
    if isinstance(item, str):  # parquet / CSV copies carry the item as JSON text
        try:
            item = json.loads(item)
        except json.JSONDecodeError:
            return f"{label}: item is text but not JSON"
    if not isinstance(item, dict) or "completion" in item:
        return f"{label}: item must be an object without a completion"
    item = {k: v for k, v in item.items() if v is not None}  # arrow fills absent struct fields with nulls
    try:
        parse_item({**item, "completion": ""})  # the same schema the service will apply
    except ValidationError as exc:
        return f"{label}: item: {describe_error(exc)}"
    prompt = row["prompt"]
    try:
        messages = parse_messages(prompt)
    except ValueError as exc:
        return f"{label}: prompt: {exc}"
    other = {k: v for k, v in row.items() if k not in ("prompt", "item")}
    text = messages[-1].content if messages else str(prompt)
    return Task(task_id, text, row.get("solution"), item, messages=messages, columns=other)


def parse_messages(value: Any) -> tuple[Message, ...] | None:
    """A conversational prompt (a list of {role, content} messages, as TRL takes them), or None for plain text."""
    if not isinstance(value, list):
        return None
    out = []
    for message in value:
        if not (isinstance(message, dict) and isinstance(message.get("role"), str) and "content" in message):
            raise ValueError("a conversational prompt is a list of {role, content} messages")
        out.append(Message(role=message["role"], content=str(message["content"])))
    if not out or out[-1].role != "user":
        raise ValueError("a conversational prompt ends with the user's turn")
    return tuple(out)


def own_rows_tasks(rows: list[Any], where: str) -> list[Task]:
    tasks: list[Task] = []
    problems: list[str] = []
    seen: set[str] = set()
    for index, row in enumerate(rows):
        made = own_row_task(row, f"{where}: row {index}", seen)
        if isinstance(made, str):
            problems.append(made)
        else:
            tasks.append(made)
    raise_problems(problems, where)
    return tasks


def load_tasks(path: Path) -> list[Task]:
    """Read and check every row of a JSONL file of groupscore's own rows; all problems at once, with line numbers."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"taskset file not found: {path}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(
            f"taskset: {path} is not UTF-8 text; a parquet, CSV or save_to_disk source needs its suffix or folder"
        ) from None
    tasks: list[Task] = []
    problems: list[str] = []
    seen: set[str] = set()
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(f"{path}:{lineno}: not JSON ({exc.msg})")
            continue
        made = own_row_task(row, f"{path}:{lineno}", seen)
        if isinstance(made, str):
            problems.append(made)
        else:
            tasks.append(made)
    if problems:
        raise ValueError(
            "invalid taskset:\n  "
            + "\n  ".join(problems[:20])
            + (f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else "")
        )
    if not tasks:
        raise ValueError(f"taskset is empty: {path}")
    return tasks
