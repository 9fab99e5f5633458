"""The pytest-friendly face of the checks: plain functions that return a Report or raise AssertionError."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from groupscore.testing.calls import ThreadCaller, make_caller
from groupscore.testing.cases import Case, as_cases
from groupscore.testing.check_base import CheckConfig, value_problem
from groupscore.testing.checks import CheckRun
from groupscore.testing.report import Report
from groupscore.testing.targets import Target, as_target

TargetLike = Target | str | Callable[..., Any]
CasesLike = Iterable[Case | dict[str, Any]] | Path | str


def _config(config: CheckConfig | None, overrides: dict[str, Any]) -> CheckConfig:
    known = {f.name for f in fields(CheckConfig)}
    unknown = set(overrides) - known
    if unknown:
        raise TypeError(f"unknown check option(s) {sorted(unknown)}; known: {', '.join(sorted(known))}")
    if "reward_range" in overrides:
        overrides["reward_range"] = tuple(overrides["reward_range"])
    return replace(config or CheckConfig(), **overrides)


def check_reward_fn(
    target: TargetLike, cases: CasesLike, *, config: CheckConfig | None = None, **options: Any
) -> Report:
    """Run every check (or `checks=(...)` groups) on a reward and return the Report; never raises for a bad reward.

    `target`: a TRL reward function, a verl `compute_score`, a verifier kind (`"math"`), `"module:function"`,
    a service URL, or a Target. `cases`: a JSONL path or dicts/Case objects with prompt, completion and
    reference fields. Options are CheckConfig fields (timeout_s, repeats, reward_range, checks, ...).
    """
    return CheckRun(as_target(target), as_cases(cases), _config(config, options)).run()


def assert_passes_checks(target: TargetLike, cases: CasesLike, **options: Any) -> Report:
    """check_reward_fn, then AssertionError listing every failed row."""
    report = check_reward_fn(target, cases, **options)
    report.assert_ok()
    return report


def assert_deterministic(target: TargetLike, cases: CasesLike, **options: Any) -> Report:
    """Same rewards on repeats, whatever the batch around them, across threads and across processes."""
    return assert_passes_checks(target, cases, checks=("determinism",), **options)


def assert_not_hackable(target: TargetLike, cases: CasesLike, **options: Any) -> Report:
    """No hacking probe scores above the honest wrong answer of its case."""
    return assert_passes_checks(target, cases, checks=("probes",), **options)


def assert_survives_edge_inputs(target: TargetLike, cases: CasesLike, **options: Any) -> Report:
    """No exception, hang or unusable reward on the named edge inputs and on hypothesis-drawn ones."""
    return assert_passes_checks(target, cases, checks=("edge_inputs", "fuzz"), **options)


def assert_handles(
    target: TargetLike,
    completion: str,
    *,
    prompt: Any = "",
    timeout_s: float = 10.0,
    reward_range: tuple[float, float] = (0.0, 1.0),
    allow_none: bool = True,
    isolation: str = "thread",
    **fields_: Any,
) -> float | None:
    """Score one completion under a wall-clock bound; AssertionError on an exception, a hang or an unusable reward.

    Meant for hypothesis tests (`@given(strategies.completions())`); extra keywords are the case's reference fields.
    Runs in a thread by default (cheap per example); `isolation="process"` also survives hangs that hold the GIL.
    Returns the reward.
    """
    case = Case(prompt=prompt, completion=completion, fields=fields_, label="completion")
    resolved = as_target(target)
    resolved.validate([case])
    caller = ThreadCaller(resolved) if isolation == "thread" else make_caller(resolved, isolation)
    with caller:
        outcome = caller.call([case], timeout_s)
    shown = f"{completion[:80]!r}{'...' if len(completion) > 80 else ''} ({len(completion)} chars)"
    if outcome.hang:
        raise AssertionError(f"{resolved.description} gave no answer within {timeout_s:g} s on {shown}")
    if not outcome.ok or not outcome.values:
        raise AssertionError(f"{resolved.description} failed on {shown}: {outcome.error}")
    value = outcome.values[0]
    allowed = allow_none and resolved.allows_none
    lo, hi = reward_range  # a list is taken too
    problem = value_problem(value, CheckConfig(reward_range=(lo, hi), allow_none=allowed))
    if problem:
        raise AssertionError(f"{resolved.description} {problem} on {shown}")
    return value.number
