"""Which tasks the run trains and evaluates on: the taskset section's sources read, mapped, split and templated."""

from __future__ import annotations

import random
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from groupscore.train.config import DatasetSource, TasksetConfig
from groupscore.train.taskset import Message, Task, load_tasks, own_rows_tasks


def _is_own_jsonl(source: DatasetSource, cfg: TasksetConfig) -> bool:
    return cfg.columns is None and source.path is not None and Path(source.path).suffix.lower() == ".jsonl"


def _read(
    source: DatasetSource, cfg: TasksetConfig, field: str, id_prefix: str, split: str | None = None
) -> list[Task]:
    if split is None and _is_own_jsonl(source, cfg) and Path(source.path or "").is_file():
        tasks = load_tasks(Path(source.path or ""))  # line numbers in its errors
        return tasks[: cfg.max_rows] if cfg.max_rows else tasks
    from groupscore.train.columns import tasks_from_rows
    from groupscore.train.datasource import as_dicts, load_rows

    rows = load_rows(source, field, split)
    where = f"{field} ({source.describe() if split is None else source.describe() + ', split ' + split})"
    dicts = as_dicts(rows, cfg.max_rows)
    if not dicts:
        raise ValueError(f"{field}: {where} has no rows")
    if cfg.columns is None:
        return own_rows_tasks(dicts, where)
    return tasks_from_rows(dicts, cfg, where, id_prefix)


# `{prompt}`, `{column}` or `{column[0]}` (an element of a list column); other braces (`\boxed{}`) stay
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)(?:\[(\d+)\])?\}")


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


def templated(task: Task, cfg: TasksetConfig) -> Task:
    """The task with taskset.prompt_template around its user text (the last user turn of a conversation)."""
    if cfg.prompt_template is None:
        return task
    text = _fill(cfg.prompt_template, task.prompt, task.columns, task.id)
    messages = task.messages
    if messages:
        messages = (*messages[:-1], Message(messages[-1].role, text))
    return replace(task, prompt=text, messages=messages)


def _sources(cfg: TasksetConfig) -> list[tuple[str, DatasetSource]]:
    return [(f"taskset.{name}", source) for name, source in (("train", cfg.train), ("eval", cfg.eval)) if source]


def all_local(cfg: TasksetConfig) -> bool:
    """Every source is a file or folder on this machine (nothing to fetch from the hub)."""
    return all(source.path is not None for _, source in _sources(cfg))


def check_local_sources(cfg: TasksetConfig) -> None:
    """The taskset's files and folders exist: checked before anything goes to the network (a hub model or dataset)."""
    from groupscore.train.datasource import check_exists

    for field, source in _sources(cfg):
        check_exists(source, field)


def load_taskset(cfg: TasksetConfig, seed: int) -> tuple[list[Task], list[Task]]:
    """(train tasks, held-out tasks); every problem with the data is raised here, before any model loads."""
    train = _read(cfg.train, cfg, "taskset.train", "train")
    if cfg.eval is not None:
        held_out = _read(cfg.eval, cfg, "taskset.eval", "eval")
    elif isinstance(cfg.eval_split, str):
        held_out = _read(cfg.train, cfg, "taskset.eval_split", cfg.eval_split, split=cfg.eval_split)
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
