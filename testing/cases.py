"""Check cases: a prompt, a sample completion and the reference fields, read from JSONL."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

# Keys a case line may not use as reference fields: TRL strips these before passing columns to a reward function.
_RESERVED = ("prompt", "completion", "completion_ids")


class CasesError(ValueError):
    """The cases file (or a case given through the API) is malformed; the message names the line and field."""


@dataclass(frozen=True)
class Case:
    """One case. `fields` holds every other key of the line (e.g. `answer`, `tests`), passed on as dataset columns."""

    prompt: Any  # a string, or a list of chat messages (TRL's conversational format)
    completion: Any  # a string, or a list of chat messages
    fields: dict[str, Any] = field(default_factory=dict)
    label: str = ""  # where the case came from, for messages ("cases.jsonl:3")

    @property
    def conversational(self) -> bool:
        return isinstance(self.completion, list)

    @property
    def prompt_text(self) -> str:
        return _message_text(self.prompt)

    @property
    def completion_text(self) -> str:
        return _message_text(self.completion)

    def with_completion(self, text: str) -> Case:
        """The same case with another completion, kept in the case's own format (plain or conversational)."""
        completion: Any = [{"role": "assistant", "content": text}] if self.conversational else text
        return replace(self, completion=completion)


def _message_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    # Conversational: the text of the last message is what a reward function reads.
    return str(value[-1].get("content", "")) if value else ""


def case_from_dict(raw: Any, label: str) -> Case:
    if not isinstance(raw, dict):
        raise CasesError(f"{label}: a case must be a JSON object, got {type(raw).__name__}")
    for key in ("prompt", "completion"):
        if key not in raw:
            raise CasesError(
                f"{label}: missing field {key!r} (each case holds prompt, completion and reference fields)"
            )
        value = raw[key]
        if not isinstance(value, str) and not _is_messages(value):
            raise CasesError(f"{label}: field {key!r} must be a string or a list of {{role, content}} messages")
    if "completion_ids" in raw:
        raise CasesError(f"{label}: 'completion_ids' is filled in by the checker, remove it from the case")
    fields = {k: v for k, v in raw.items() if k not in _RESERVED}
    return Case(prompt=raw["prompt"], completion=raw["completion"], fields=fields, label=label)


def _is_messages(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(
            isinstance(m, dict) and isinstance(m.get("content"), str) and isinstance(m.get("role"), str) for m in value
        )
    )


def load_cases(path: Path | str) -> list[Case]:
    """Read a JSONL cases file; blank lines and lines starting with `#` are skipped. Raises CasesError."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CasesError(f"cases file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CasesError(f"cannot read cases file {path}: {exc}") from None
    cases = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        label = f"{path.name}:{number}"
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CasesError(f"{label}: invalid JSON ({exc.msg} at column {exc.colno})") from None
        cases.append(case_from_dict(raw, label))
    if not cases:
        raise CasesError(f"{path}: no cases (expected one JSON object per line)")
    return cases


def as_cases(cases: Iterable[Case | dict[str, Any]] | Path | str) -> list[Case]:
    """Cases given to the Python API: a path, or an iterable of Case objects or dicts."""
    if isinstance(cases, (str, Path)):
        return load_cases(cases)
    out = [c if isinstance(c, Case) else case_from_dict(c, f"case {i}") for i, c in enumerate(cases)]
    if not out:
        raise CasesError("no cases given")
    return out
