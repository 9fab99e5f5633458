"""Dataset rows to tasks through a column mapping: the prompt (text or messages), the verifier item built from the
answer or test columns, a worked solution, and the row's other columns (user reward functions receive them)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from groupscore.schema.boxes import boxed_contents
from groupscore.train.config import ColumnMap, TasksetConfig
from groupscore.train.task import TaskRow, parse_messages, raise_problems
from groupscore.verifiers.registry import KINDS, describe_error, parse_item

_GSM8K_MARK = "####"
_FENCE = re.compile(r"```")


def check_columns(columns: ColumnMap, available: Sequence[str], where: str) -> None:
    """Every mapped column exists: else one line naming the field, the missing column and the ones there are."""
    for field_name, column in columns.model_dump().items():
        if column is not None and column not in available:
            raise ValueError(
                f"taskset.columns.{field_name}: column {column!r} is not in {where} (its columns: "
                f"{', '.join(available)}); set taskset.columns.{field_name} to one of them"
            )


def extract_answer(value: Any, answer_format: str) -> str | None:
    """The reference answer written in the column's form (GSM8K's `#### 72`, a `\\boxed{}`), or None if absent."""
    if value is None:
        return None
    text = str(value).strip()
    if answer_format == "gsm8k":
        if _GSM8K_MARK not in text:
            return None
        text = text.rsplit(_GSM8K_MARK, 1)[1].strip().replace(",", "")  # "#### 1,200" is 1200
    elif answer_format == "boxed":
        boxes = boxed_contents(text)
        if not boxes:
            return None
        text = boxes[-1][1].strip()
    return text or None


def code_tests(value: Any, entry_point: str | None) -> list[dict[str, Any]]:
    """A tests column as code test objects: HumanEval test code (`def check(candidate)`), MBPP assert lines (a list,
    or lines of text), test objects as they are, or any of these as a JSON string."""
    if value is None or value == "":
        return []
    if isinstance(value, str) and value.lstrip().startswith("["):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            pass
    if isinstance(value, str):
        if "def check(" in value:
            if not entry_point:
                raise ValueError("HumanEval test code needs taskset.columns.entry_point (the function check() calls)")
            return [{"type": "humaneval", "test": value, "entry_point": entry_point}]
        lines = [line.strip() for line in value.splitlines() if line.strip().startswith("assert")]
        if not lines:
            raise ValueError("the tests text holds neither HumanEval's check(candidate) nor assert lines")
        return [{"type": "assert", "code": line} for line in lines]
    if isinstance(value, list):
        return [t if isinstance(t, dict) else {"type": "assert", "code": str(t)} for t in value]
    raise ValueError(f"cannot read tests of type {type(value).__name__}")


def _solution(value: Any, kind: str, language: str) -> str | None:
    if value is None or not str(value).strip():
        return None
    text = str(value)
    if kind == "code" and not _FENCE.search(text):  # datasets keep bare code; the verifier reads a fenced block
        return f"```{language}\n{text.rstrip()}\n```"
    return text


def _item(row: dict[str, Any], cfg: TasksetConfig, columns: ColumnMap) -> dict[str, Any]:
    item: dict[str, Any] = {"verifier": cfg.verifier, **cfg.item}
    if cfg.verifier == "code":
        entry = str(row[columns.entry_point]) if columns.entry_point else None
        if columns.tests:
            item["tests"] = code_tests(row[columns.tests], entry)
        if columns.hidden_tests:
            item["hidden_tests"] = code_tests(row[columns.hidden_tests], entry)
        if columns.item_prompt:
            item["prompt"] = str(row[columns.item_prompt])
    if columns.answer:
        answer = extract_answer(row[columns.answer], cfg.answer_format)
        if answer is None:
            raise ValueError(
                f"column {columns.answer!r} has no answer in the {cfg.answer_format} form (taskset.answer_format)"
            )
        item["answer"] = answer
    return item


def tasks_from_rows(rows: list[dict[str, Any]], cfg: TasksetConfig, where: str, id_prefix: str) -> list[TaskRow]:
    """Tasks from mapped rows; every bad row is reported (with its number) before any model loads."""
    columns = cfg.columns
    if columns is None:
        raise ValueError("taskset.columns is needed to read rows of other shapes")
    if cfg.verifier not in KINDS:
        raise ValueError(f"taskset.verifier: unknown kind {cfg.verifier!r} (known: {', '.join(KINDS)})")
    if rows:
        check_columns(columns, list(rows[0]), where)
    language = str(cfg.item.get("language", "python"))
    tasks, problems, seen = [], [], set()
    for index, row in enumerate(rows):
        label = f"{where}: row {index}"
        try:
            task_id = str(row[columns.id]) if columns.id else f"{id_prefix}-{index}"
            if task_id in seen:
                raise ValueError(f"duplicate id {task_id!r} (taskset.columns.id)")
            seen.add(task_id)
            prompt = row[columns.prompt]
            messages = parse_messages(prompt)
            item = _item(row, cfg, columns)
            parse_item({**item, "completion": ""})  # the schema the service will apply
        except ValidationError as exc:
            problems.append(f"{label}: item: {describe_error(exc)}")
            continue
        except ValueError as exc:
            problems.append(f"{label}: {exc}")
            continue
        solution = _solution(row[columns.solution], cfg.verifier, language) if columns.solution else None
        text = messages[-1].content if messages else str(prompt)
        extra = {k: v for k, v in row.items() if k != columns.prompt}  # TRL hands reward functions all but the prompt
        tasks.append(TaskRow(task_id, text, solution, item, messages=messages, columns=extra))
    raise_problems(problems, where)
    return tasks
