"""The taskset: JSONL rows of {id, prompt, solution, item}, where `item` is a registry item minus its completion."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from groupscore.verifiers.registry import describe_error, parse_item


@dataclass(frozen=True)
class Task:
    id: str
    prompt: str
    solution: str | None  # a worked solution: SFT target and the dry run's reference completion
    item: dict[str, Any]  # verifier fields (answer, tests, hidden_tests...): never shown to the model


def load_tasks(path: Path) -> list[Task]:
    """Read and check every row; all problems are reported at once with their line numbers."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"taskset file not found: {path}")
    tasks, problems, seen = [], [], set()
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(f"{path}:{lineno}: not JSON ({exc.msg})")
            continue
        if not isinstance(row, dict):
            problems.append(f"{path}:{lineno}: expected an object")
            continue
        missing = [k for k in ("id", "prompt", "item") if k not in row]
        if missing:
            problems.append(f"{path}:{lineno}: missing {', '.join(missing)}")
            continue
        task_id = str(row["id"])
        if task_id in seen:
            problems.append(f"{path}:{lineno}: duplicate id {task_id!r}")
        seen.add(task_id)
        item = row["item"]
        if not isinstance(item, dict) or "completion" in item:
            problems.append(f"{path}:{lineno}: item must be an object without a completion")
            continue
        try:
            parse_item({**item, "completion": ""})  # the same schema the service will apply
        except ValidationError as exc:
            problems.append(f"{path}:{lineno}: item: {describe_error(exc)}")
            continue
        tasks.append(Task(task_id, str(row["prompt"]), row.get("solution"), item))
    if problems:
        raise ValueError(
            "invalid taskset:\n  "
            + "\n  ".join(problems[:20])
            + (f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else "")
        )
    if not tasks:
        raise ValueError(f"taskset is empty: {path}")
    return tasks
