"""The outcome of a check run: one row per check, a readable table, a JSON document and an exit code."""

from __future__ import annotations

import json
import shutil
import textwrap
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any


class CheckStatus(StrEnum):
    PASS = "PASS"
    FAIL = "FAIL"  # the reward under test misbehaved
    ERROR = "ERROR"  # the check itself could not run: a fault of the checker, not of the reward
    SKIP = "SKIP"  # does not apply (no probe of this kind for these cases, no way to start a second process)


@dataclass
class CheckResult:
    name: str
    status: CheckStatus
    detail: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class Report:
    target: str
    cases: int
    config: dict[str, Any]
    results: list[CheckResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def count(self, status: CheckStatus) -> int:
        return sum(r.status is status for r in self.results)

    @property
    def failures(self) -> list[CheckResult]:
        return [r for r in self.results if r.status is CheckStatus.FAIL]

    @property
    def errors(self) -> list[CheckResult]:
        return [r for r in self.results if r.status is CheckStatus.ERROR]

    @property
    def ok(self) -> bool:
        return not self.failures and not self.errors

    @property
    def exit_code(self) -> int:
        """0 all passed; 1 a check failed; 2 the checker itself failed (its verdict cannot be trusted)."""
        if self.errors:
            return 2
        return 1 if self.failures else 0

    def result(self, name: str) -> CheckResult:
        for r in self.results:
            if r.name == name:
                return r
        raise KeyError(f"no check named {name!r}; have: {', '.join(r.name for r in self.results)}")

    def summary(self) -> str:
        counts = ", ".join(f"{self.count(s)} {s.value}" for s in CheckStatus if self.count(s))
        return f"{len(self.results)} checks on {self.target} with {self.cases} cases: {counts}"

    def table(self, width: int | None = None) -> str:
        width = width or max(100, min(160, shutil.get_terminal_size((120, 20)).columns))
        name_w = max([len("CHECK")] + [len(r.name) for r in self.results])
        detail_w = max(30, width - name_w - 10)
        lines = [f"{'CHECK':<{name_w}}  STATUS  DETAIL", f"{'-' * name_w}  ------  {'-' * min(detail_w, 60)}"]
        for r in self.results:
            wrapped = textwrap.wrap(r.detail, detail_w, max_lines=5, placeholder=" ...") or [""]
            lines.append(f"{r.name:<{name_w}}  {r.status.value:<6}  {wrapped[0]}")
            lines += [f"{'':<{name_w}}  {'':<6}  {more}" for more in wrapped[1:]]
        lines += [f"note: {n}" for n in self.notes]
        lines.append(self.summary())
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "cases": self.cases,
            "config": self.config,
            "exit_code": self.exit_code,
            "summary": {s.value: self.count(s) for s in CheckStatus},
            "notes": self.notes,
            "checks": [dict(asdict(r), status=r.status.value) for r in self.results],
        }

    def write_json(self, path: Path | str) -> None:
        Path(path).write_text(
            json.dumps(self.to_dict(), indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8"
        )

    def assert_ok(self) -> None:
        """Raise AssertionError with the failing rows when any check failed or errored (for pytest)."""
        if not self.ok:
            bad = [r for r in self.results if r.status in (CheckStatus.FAIL, CheckStatus.ERROR)]
            rows = "\n".join(f"  {r.name}: {r.status.value}: {r.detail}" for r in bad)
            raise AssertionError(f"reward checks failed for {self.target}:\n{rows}")
