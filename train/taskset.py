"""The taskset: each source's rows (data.py) made tasks, groupscore's own rows here and rows of other shapes through
the column mapping (columns.py); the held-out split; the prompt template around each prompt.

groupscore's own rows are {id, prompt, solution, item}, where `item` is a registry item minus its completion. Every
problem with the data is raised here, all of a source's bad rows at once, before any model loads.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from groupscore.train.columns import tasks_from_rows
from groupscore.train.config import TasksetConfig
from groupscore.train.data import Rows, Unreadable, read_jsonl, read_rows
from groupscore.train.task import Message, TaskRow, parse_messages, raise_problems
from groupscore.verifiers.registry import describe_error, parse_item


def load_taskset(cfg: TasksetConfig, seed: int) -> tuple[list[TaskRow], list[TaskRow]]:
    """(train tasks, held-out tasks), their prompts templated; each source is read and checked in turn."""
    if cfg.train.env is not None:
        from groupscore.train.env_tasks import load_env_taskset

        return load_env_taskset(cfg, seed)
    train = tasks(read_rows(cfg.train, cfg, "taskset.train"), cfg, "train")
    if cfg.eval is not None:
        held_out = tasks(read_rows(cfg.eval, cfg, "taskset.eval"), cfg, "eval")
    elif isinstance(cfg.eval_split, str):
        split = cfg.eval_split
        held_out = tasks(read_rows(cfg.train, cfg, "taskset.eval_split", split=split), cfg, split)
    else:
        fraction = float(cfg.eval_split or 0)
        order = list(range(len(train)))
        random.Random(seed).shuffle(order)
        n_eval = max(1, round(len(train) * fraction))
        if n_eval >= len(train):
            raise ValueError(f"taskset.eval_split: {len(train)} train rows leave none to train on after the split")
        held = set(order[:n_eval])
        held_out = [t for i, t in enumerate(train) if i in held]
        train = [t for i, t in enumerate(train) if i not in held]
    return [templated(t, cfg) for t in train], [templated(t, cfg) for t in held_out]


def tasks(rows: Rows, cfg: TasksetConfig, id_prefix: str) -> list[TaskRow]:
    """One source's tasks: mapped through taskset.columns (ids default to `id_prefix-N`), or groupscore's own rows."""
    if cfg.columns is not None:
        return tasks_from_rows(rows.rows, cfg, rows.where, id_prefix)
    return own_tasks(rows)


def own_tasks(rows: Rows) -> list[TaskRow]:
    """groupscore's own rows as tasks; every bad row (and unreadable line) reported at once."""
    made: list[TaskRow] = []
    problems: list[str] = []
    seen: set[str] = set()
    for row, label in zip(rows.rows, rows.labels):
        task = f"{label}: {row.problem}" if isinstance(row, Unreadable) else own_row_task(row, label, seen)
        if isinstance(task, str):
            problems.append(task)
        else:
            made.append(task)
    raise_problems(problems, rows.where)
    return made[: rows.keep]


def load_tasks(path: Path) -> list[TaskRow]:
    """A JSONL file of groupscore's own rows as tasks; all problems at once, with line numbers."""
    return own_tasks(read_jsonl(Path(path)))


def own_row_task(row: Any, label: str, seen: set[str]) -> TaskRow | str:
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
    return TaskRow(task_id, text, row.get("solution"), item, messages=messages, columns=other)


# `{prompt}`, `{column}` or `{column[0]}` (an element of a list column); other braces (`\boxed{}`) stay
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)(?:\[(\d+)\])?\}")


def templated(task: TaskRow, cfg: TasksetConfig) -> TaskRow:
    """The task with taskset.prompt_template around its user text (the last user turn of a conversation)."""
    if cfg.prompt_template is None:
        return task
    text = _fill(cfg.prompt_template, task.prompt, task.columns, task.id)
    messages = task.messages
    if messages:
        messages = (*messages[:-1], Message(messages[-1].role, text))
    return replace(task, prompt=text, messages=messages)


def _fill(template: str, prompt: str, columns: dict[str, Any], task_id: str) -> str:
    def value(match: re.Match[str]) -> str:
        name, index = match.group(1), match.group(2)
        if name == "prompt" and index is None:
            return prompt
        if name not in columns:
            return match.group(0)
        found = columns[name]
        if index is not None:
            if not isinstance(found, list) or int(index) >= len(found):
                raise ValueError(f"taskset.prompt_template: {match.group(0)} is out of range for task {task_id}")
            found = found[int(index)]
        return str(found)

    return _PLACEHOLDER.sub(value, template)
