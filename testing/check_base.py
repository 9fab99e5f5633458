"""What every check family shares: the configuration (`CheckConfig`), the test of one returned reward
(`value_problem`), and the run's state with the helpers each check uses (`CheckRunBase`: add a row, guard a step, call
the target). The families (determinism_checks.py, edge_checks.py, latency_checks.py, probe_checks.py) build on it;
checks.py puts them together."""

from __future__ import annotations

import math
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from groupscore.testing.call_result import CallResult, Value
from groupscore.testing.calls import Caller
from groupscore.testing.cases import Case
from groupscore.testing.report import CheckResult, CheckStatus, Report
from groupscore.testing.targets import Target, TargetError

PASS, FAIL, ERROR, SKIP = CheckStatus.PASS, CheckStatus.FAIL, CheckStatus.ERROR, CheckStatus.SKIP
CHECK_GROUPS = ("determinism", "edge_inputs", "fuzz", "latency", "probes")


@dataclass(frozen=True)
class CheckConfig:
    timeout_s: float = 10.0  # wall-clock bound per completion; a batch gets this times its size
    repeats: int = 3  # extra scorings of the whole batch for the repeat check
    threads: int = 4  # concurrent scorings of the batch for the thread check
    processes: int = 2  # fresh worker processes, each with its own PYTHONHASHSEED, for the process check
    reward_range: tuple[float, float] = (0.0, 1.0)
    allow_none: bool = True  # TRL accepts None ("this reward does not apply"); verl does not
    edge_cases: int = 2  # how many cases the edge inputs are built around
    fuzz_examples: int = 25  # hypothesis-drawn completions per run (derandomized: the same ones every run)
    max_completion_chars: int = 8192  # the length limit the padding probes pad to
    probe_cases: int = 20  # probes are built from the first this-many cases (about 40 completions each)
    latency_budget_s: float = 5.0  # p99 per completion above this fails the latency check
    # Groups to run besides `returns` (which always runs: the others compare against its scores).
    checks: tuple[str, ...] = ("determinism", "edge_inputs", "fuzz", "latency", "probes")
    isolation: str = "auto"  # "process" (a worker process, killed on overrun), "thread", or "auto"


def value_problem(value: Value, config: CheckConfig) -> str | None:
    """Why a returned reward is unusable, or None when it is fine."""
    lo, hi = config.reward_range
    if value.kind == "none":
        return None if config.allow_none else "returned None"
    if value.kind == "item_error":
        return value.detail
    if value.kind == "infra_error":
        return None  # nothing judged the completion: not the reward's fault (the report counts them)
    if value.kind != "number" or value.number is None:
        return f"returned {value.detail}, not a number"
    if math.isnan(value.number):
        return "returned NaN"
    if not lo <= value.number <= hi:
        return f"returned {value.number!r}, outside [{lo:g}, {hi:g}]"
    return None


class CheckRunBase:
    """The state of one run of the checks on one target, and the helpers every check family uses."""

    def __init__(self, target: Target, cases: Sequence[Case], config: CheckConfig):
        if not target.allows_none:
            config = replace(config, allow_none=False)
        self.target, self.cases, self.config = target, list(cases), config
        self.report = Report(target.description, len(self.cases), asdict(config))
        self.caller: Caller | None = None
        self.singles: list[CallResult] = []
        self.batch: CallResult | None = None
        self.edge_latencies: list[tuple[float, str]] = []
        self.infra_errors: list[str] = []  # values the infrastructure failed to produce, counted for the report
        # Told the name of each step as it starts (`groupscore check` prints a progress line on large case files).
        self.progress: Callable[[str], None] | None = None

    # -- helpers -------------------------------------------------------------------------------------------------
    def add(self, name: str, status: CheckStatus, detail: str, **data: Any) -> None:
        self.report.results.append(CheckResult(name, status, detail, data))

    def guarded(self, names: Sequence[str], step: Callable[[], None]) -> None:
        """Run a step; if the checker itself breaks, its rows become ERROR rows instead of a crash."""
        if self.progress is not None:
            self.progress(names[0].split(".")[0])
        try:
            step()
        except TargetError:
            raise
        except Exception as exc:  # noqa: BLE001 - the checker's own failure becomes ERROR rows (docstring)
            frames = traceback.extract_tb(exc.__traceback__)[-1:]
            where = f" at {frames[0].filename.rsplit('/', 1)[-1]}:{frames[0].lineno}" if frames else ""
            for name in names:
                if not any(r.name == name for r in self.report.results):
                    self.add(name, ERROR, f"checker error: {type(exc).__name__}: {exc}{where}")

    def call(self, cases: Sequence[Case]) -> CallResult:
        assert self.caller is not None
        outcome = self.caller.call(cases, self.config.timeout_s * max(1, len(cases)))
        self.infra_errors += [v.detail for v in outcome.values or () if v.kind == "infra_error"]
        return outcome

    def label(self, index: int) -> str:
        return self.cases[index].label or f"case {index}"
