"""The test plan of one code item: every test (public first, then hidden) as one scored unit.

A unit is either a stdio run (one sandbox run, stdout compared on the host) or a batch of calls answered by the jail
runner and judged on the host: a call test's expected value, converted assertions, and (weaker mode) residual code
that only the runner sees. Each unit scores 1 or 0; reward = passed units / all units.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from groupscore.verifiers.code.assertions import (
    Call,
    ConvertedAssert,
    PlanError,
    convert_assert_code,
    convert_humaneval,
)
from groupscore.verifiers.code.item import AssertTest, CallTest, CodeItem, HumanEvalTest, StdioTest

# Languages whose programs take call tests: Python (jail_runner.py), and JavaScript (TypeScript once compiled) and Java
# through their own runners (runners/), which answer with each returned value as JSON; every expected value is compared
# on the host.
CALL_LANGUAGES = ("python", "javascript", "typescript", "java")


@dataclass(frozen=True)
class ExpectedValue:
    """A call test's check: the call's result equals `expected` as JSON data (tuples read as lists)."""

    call_index: int
    expected: Any
    float_tol: float | None = None


@dataclass
class CallUnit:
    index: int  # position in public + hidden order
    hidden: bool
    label: str  # public tests only: how to name it in a failure message
    time_limit_s: float
    calls: list[Call] = field(default_factory=list)
    checks: list[ExpectedValue | ConvertedAssert] = field(default_factory=list)
    residual: dict[str, Any] | None = None  # code only the jail's runner sees (weaker mode), with its names' sources


@dataclass
class StdioUnit:
    index: int
    hidden: bool
    label: str
    time_limit_s: float
    test: StdioTest


@dataclass
class Plan:
    call_units: list[CallUnit]
    stdio_units: list[StdioUnit]

    @property
    def total(self) -> int:
        return len(self.call_units) + len(self.stdio_units)

    @property
    def weaker_mode(self) -> bool:
        return any(u.residual is not None for u in self.call_units)


def _where(hidden: bool, position: int) -> str:
    return f"{'hidden_tests' if hidden else 'tests'}[{position}]"


def build_plan(item: CodeItem) -> Plan:
    """Raises PlanError naming the bad test; a hidden test is named by its position only.

    The plan depends on the item alone, never on the program: what the program defines cannot change which
    assertions the host evaluates, nor what a test's names mean (see names.NameSources)."""
    call_units: list[CallUnit] = []
    stdio_units: list[StdioUnit] = []
    tests = [(False, i, t) for i, t in enumerate(item.tests)] + [(True, i, t) for i, t in enumerate(item.hidden_tests)]
    if not tests:
        raise PlanError("the item has no tests")
    if item.python_env is not None and item.language != "python":
        raise PlanError(f"python_env applies to python items, not {item.language}")
    for index, (hidden, position, test) in enumerate(tests):
        limit = test.time_limit_s or item.time_limit_s
        if isinstance(test, StdioTest):
            stdio_units.append(StdioUnit(index, hidden, f"stdio test {position}", limit, test))
            continue
        if item.language != "python" and not (isinstance(test, CallTest) and item.language in CALL_LANGUAGES):
            takes = "stdio and call tests" if item.language in CALL_LANGUAGES else "stdio tests"
            raise PlanError(
                f"{_where(hidden, position)}: {test.type} tests need language python; {item.language} programs take "
                f"{takes}"
            )
        try:
            call_units.append(_call_unit(test, index, hidden, position, limit, item.prompt))
        except PlanError as exc:
            # The message of a hidden test's problem could quote it; name the position only.
            raise PlanError(
                f"{_where(hidden, position)}: " + ("the test is malformed" if hidden else str(exc))
            ) from None
    return Plan(call_units, stdio_units)


def _call_unit(
    test: CallTest | AssertTest | HumanEvalTest,
    index: int,
    hidden: bool,
    position: int,
    limit: float,
    prompt: str | None,
) -> CallUnit:
    if isinstance(test, CallTest):
        call = Call(test.fn, tuple(test.args), dict(test.kwargs))
        return CallUnit(
            index,
            hidden,
            f"call test {position} ({test.fn})",
            limit,
            [call],
            [ExpectedValue(0, test.expected, test.float_tol)],
        )
    if isinstance(test, AssertTest):
        conversion, residual = convert_assert_code(test.code, prompt)
        label = f"assert test {position}"
    else:
        conversion, residual = convert_humaneval(test.test, test.entry_point, prompt)
        label = f"check test {position} ({test.entry_point})"
    return CallUnit(index, hidden, label, limit, conversion.calls, list(conversion.asserts), residual)
