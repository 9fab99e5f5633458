"""The code verifier: extract the program, run the plan in the sandbox, judge every unit on the host, build the verdict.

Expected values never enter the jail (call and converted-assert units bring plain values out; stdio units bring
stdout out). Hidden tests contribute counts only: no input, expected value, assert text or message of theirs reaches
the verdict. A public unit's failure message cannot carry anything the program saw of a hidden test: the Python runner
runs public units before hidden ones, each in a fresh worker; the other languages' runners get public and hidden units
in separate jobs (runner_plans.runner_groups).

A public failure's reason quotes what the program produced (stdout, stderr, an exception, a returned value, an in-jail
check's message, a compiler message) only as a short excerpt: ASCII-escaped on one line, at most MAX_ECHO_CHARS
characters a piece (MAX_COMPILE_ECHO_CHARS for a compiler message), two pieces at most. Whatever a program could
observe of a concurrent run (of another item's hidden test, say) leaves through a reason at that rate only.
"""

from __future__ import annotations

import reprlib
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from groupscore.sandbox import RunResult, compile_limits_for, default_workers, launch_summary
from groupscore.sandbox.languages import SPECS
from groupscore.schema.verdict import Status, Verdict
from groupscore.verifiers.code import sandbox_jobs
from groupscore.verifiers.code.assertions import ConvertedAssert, PlanError, evaluate_assert
from groupscore.verifiers.code.compare import json_values_equal, stdout_matches
from groupscore.verifiers.code.extract import ProgramExtraction, extract_program
from groupscore.verifiers.code.item import CodeItem
from groupscore.verifiers.code.jail_runner import (
    NotPlainData,
    parse_answer,
    parse_json_data,
)
from groupscore.verifiers.code.plan import CallUnit, ExpectedValue, Plan, StdioUnit, build_plan
from groupscore.verifiers.code.runner_plans import json_runner_plan, runner_groups, runner_plan

RUNNER_SOURCE = (Path(__file__).parent / "jail_runner.py").read_text()
MAX_MESSAGE_CHARS = 300
MAX_ECHO_CHARS = 64  # of program-produced text, per quoted piece
MAX_COMPILE_ECHO_CHARS = 200  # of a compiler's message about the program
# One item's call tests; units not reached by then fail as timed out. Below the service's default deadline (300 s), so
# that a started item always ends before it (see time_budget_s).
MAX_RUNNER_WALL_S = 240.0
# Per sandboxed run beyond its wall limit, at worst: jail start, and after a kill the drain (2 s) and slot check (5 s).
JOB_OVERHEAD_S = 8.0


@dataclass(frozen=True)
class UnitOutcome:
    passed: bool
    timed_out: bool = False
    why: str = ""  # shown for public units only


def score_code(item: CodeItem) -> Verdict:
    program = extract_program(item.completion, ProgramExtraction(item.language, item.block, item.prompt))
    try:
        plan = build_plan(item)
    except PlanError as exc:
        return Verdict.error(item.id, f"bad test: {exc}")
    if program is None:
        return _verdict(
            item,
            plan,
            None,
            [UnitOutcome(False, why="no program")] * plan.total,
            status=Status.no_answer,
            reason=f"no {item.language} program found in the completion",
        )
    try:
        outcomes, launches = run_plan(item, plan, program)
    except sandbox_jobs.CompileFailed as exc:
        verdict = _verdict(
            item,
            plan,
            program,
            [UnitOutcome(False)] * plan.total,
            status=Status.error,
            reason=f"compile error: {_echo(exc.message, MAX_COMPILE_ECHO_CHARS)}",
        )
        verdict.details["compile_error"] = True
        return verdict
    except sandbox_jobs.RunRefused as exc:  # the completion itself cannot be run: its fault, a 0 to learn from
        return Verdict.error(item.id, str(exc)[:MAX_MESSAGE_CHARS])
    except sandbox_jobs.JailFailed as exc:  # nothing was scored: infra_error, never a silent 0 for the program
        return Verdict.infra_error(item.id, str(exc), "sandbox")
    verdict = _verdict(item, plan, program, outcomes)
    verdict.details.update(launches)  # which launcher ran the item's jails, and why any fell back to nsjail
    return verdict


def run_plan(item: CodeItem, plan: Plan, program: str) -> tuple[list[UnitOutcome], dict[str, Any]]:
    """Every unit's outcome, in unit order: one runner job for all call units, one job per stdio unit, in parallel;
    and how the jobs' jails were launched (sandbox.launch_summary)."""
    marker = secrets.token_hex(16)
    jobs: list[sandbox_jobs.Job] = []
    groups = runner_groups(item.language, plan.call_units)
    for units in groups:
        wall_s = _runner_wall_limit(item, [u.time_limit_s for u in units])
        if item.language == "python":
            source, plan_bytes = RUNNER_SOURCE, runner_plan(item, units, marker)
        else:  # JavaScript, TypeScript, Java: runners/, which read the plan as JSON
            source, plan_bytes = sandbox_jobs.runner_source(item.language), json_runner_plan(item, units, marker)
        jobs.append(
            sandbox_jobs.runner_job(
                source, plan_bytes, wall_time_s=wall_s, memory_mb=item.memory_mb, language=item.language
            )
        )
    jobs.extend(
        sandbox_jobs.stdio_job(
            u.test.stdin,
            time_limit_s=u.time_limit_s,
            memory_mb=item.memory_mb,
            expected_bytes=len(u.test.stdout.encode()),
        )
        for u in plan.stdio_units
    )
    results = sandbox_jobs.run_jobs(item.language, program, jobs, item.python_env)
    launches = launch_summary(results)
    outcomes: dict[int, UnitOutcome] = {}
    for units in groups:
        outcomes.update(judge_runner(units, results.pop(0), marker))
    for unit, result in zip(plan.stdio_units, results):
        outcomes[unit.index] = judge_stdio(unit, result)
    ordered = [outcomes[i] for i in range(plan.total)]
    if item.stop_on_first_failure:
        first = next((i for i, o in enumerate(ordered) if not o.passed), None)
        if first is not None:
            ordered = ordered[: first + 1] + [UnitOutcome(False, why="not counted after the first failure")] * (
                plan.total - first - 1
            )
    return ordered, launches


# -- the runner job -----------------------------------------------------------------------------------------------


def _runner_wall_limit(item: CodeItem, unit_limits: list[float]) -> float:
    # A unit that times out or crashes costs its limit plus a fresh import for the next one.
    needed = 2.0 + item.time_limit_s + sum(limit + item.time_limit_s for limit in unit_limits)
    return min(needed, MAX_RUNNER_WALL_S)


def time_budget_s(item: CodeItem) -> float:
    """The longest that scoring this item can take by its own limits: compile, the call runner, every stdio run (at
    the sandbox's parallelism), each with the harness's start and kill overhead.

    What the program may use is set by the item, never by the program; the service starts an item only when its request
    has this much time left, so a program that runs long ends with its own `timeout`, never a deadline verdict."""
    tests = [*item.tests, *item.hidden_tests]
    limit = {id(t): t.time_limit_s or item.time_limit_s for t in tests}
    call_limits = [limit[id(t)] for t in tests if t.type != "stdio"]
    walls = [limit[id(t)] + JOB_OVERHEAD_S for t in tests if t.type == "stdio"]
    # One call unit per non-stdio test (plan.build_plan); public and hidden ones in separate runner jobs but in Python
    # (runner_plans.runner_groups).
    groups = [call_limits]
    if item.language != "python":
        groups = [[limit[id(t)] for t in group if t.type != "stdio"] for group in (item.tests, item.hidden_tests)]
    walls.extend(_runner_wall_limit(item, group) + JOB_OVERHEAD_S for group in groups if group)
    if not walls:
        return 0.0
    # List scheduling on w runners ends within sum/w + the longest job, whatever the order; compiled languages compile
    # first and run their first job alone (sandbox_jobs.run_jobs).
    workers = default_workers()
    compiled = SPECS[item.language].compiled
    native = compile_limits_for(item.language).wall_time_s + JOB_OVERHEAD_S + max(walls) if compiled else 0.0
    return native + min(sum(walls), sum(walls) / workers + max(walls))


def judge_runner(units: list[CallUnit], result: RunResult, marker: str) -> dict[int, UnitOutcome]:
    records: dict[int, dict[str, Any]] = {}
    prefix = marker + " "
    for line in result.stdout.splitlines():
        if not line.startswith(prefix):
            continue
        try:  # bounded: the program can write any line it likes, e.g. 200,000 '[' after the marker
            record = parse_json_data(line[len(prefix) :], sandbox_jobs.RUNNER_OUTPUT_BYTES)
        except (ValueError, NotPlainData, MemoryError):
            continue
        if isinstance(record, dict) and isinstance(record.get("unit"), int):
            records.setdefault(record["unit"], record)
    ended_early = _run_end_reason(result)
    return {
        unit.index: (
            judge_call_unit(unit, records[position])
            if position in records
            else UnitOutcome(False, timed_out=result.status == "timeout", why=ended_early)
        )
        for position, unit in enumerate(units)
    }


def _run_end_reason(result: RunResult) -> str:
    return {
        "timeout": "the run hit its wall-clock limit",
        "memory_limit": "the run hit its memory limit",
        "output_limit": "the run hit its output limit",
    }.get(result.status, "the runner ended before this test")


def judge_call_unit(unit: CallUnit, record: dict[str, Any]) -> UnitOutcome:
    status = record.get("status")
    if status == "timeout":
        return UnitOutcome(False, timed_out=True, why=f"took longer than {unit.time_limit_s:g}s")
    if status == "import_timeout":
        return UnitOutcome(False, timed_out=True, why=_clip(str(record.get("detail"))))
    if status == "import_error":
        return UnitOutcome(False, why=f"the program failed to load: {_echo(str(record.get('detail')))}")
    if status != "done":
        return UnitOutcome(
            False,
            why={"crashed": "the program's process died", "skipped": "not run after an earlier failure"}.get(
                str(status), "no result"
            ),
        )
    answers = record.get("answers")
    if not isinstance(answers, list) or len(answers) != len(unit.calls):
        return UnitOutcome(False, why="malformed runner record")
    results: list[Any] = []
    for call, answer in zip(unit.calls, answers):
        if not (isinstance(answer, list) and len(answer) == 2 and all(isinstance(a, str) for a in answer)):
            return UnitOutcome(False, why="malformed runner record")
        kind, payload = answer
        if kind not in ("O", "J"):  # O: the Python runner's codec; J: JSON from the JavaScript or Java runner
            return UnitOutcome(False, why=f"{_call_text(call)} raised {_echo(payload)}")
        try:
            results.append(parse_answer(payload) if kind == "O" else parse_json_data(payload))
        except NotPlainData as exc:  # our own words on what the bounds refused (too large, colliding hashes, ...)
            return UnitOutcome(False, why=f"{_call_text(call)} returned {exc}")
        except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
            return UnitOutcome(False, why=f"{_call_text(call)} returned a malformed value")
    for check in unit.checks:
        if isinstance(check, ExpectedValue):
            got = results[check.call_index]
            if not json_values_equal(got, check.expected, check.float_tol):
                return UnitOutcome(
                    False,
                    why=f"{_call_text(unit.calls[check.call_index])} returned {_echo_value(got)}, "
                    f"expected {_clip(_repr(check.expected))}",
                )
        else:
            passed, problem = evaluate_assert(check, results)
            if not passed:
                return UnitOutcome(False, why=_assert_failure(check, unit, results, problem))
    residual = record.get("residual")
    if unit.residual is not None and residual != "passed":
        return UnitOutcome(False, why=f"in-jail check failed: {_echo(str(residual).removeprefix('failed: '))}")
    return UnitOutcome(True)


def _assert_failure(check: ConvertedAssert, unit: CallUnit, results: list[Any], problem: str) -> str:
    # Two quoted pieces at most: the evaluation's problem (it may quote a value) or the first returned value,
    # and one more.
    quoted = ([_echo(problem)] if problem else []) + [
        f"{_call_text(unit.calls[i])} returned {_echo_value(results[i])}" for _, i in check.placeholders
    ]
    shown = "; ".join(quoted[:2]) + ("; ..." if len(quoted) > 2 else "")
    return f"`{_clip(check.source, 200)}` failed" + (f": {shown}" if shown else "")


# -- stdio units --------------------------------------------------------------------------------------------------


def judge_stdio(unit: StdioUnit, result: RunResult) -> UnitOutcome:
    if result.status == "timeout":
        return UnitOutcome(False, timed_out=True, why=f"took longer than {unit.time_limit_s:g}s")
    if result.status != "ok":
        detail = f"exit code {result.exit_code}" if result.exit_code is not None else f"signal {result.signal}"
        status = getattr(result.status, "value", result.status)  # the word, not the enum's repr
        return UnitOutcome(False, why=f"{status} ({detail}): stderr ends {_echo(result.stderr.rstrip(), tail=True)}")
    test = unit.test
    if stdout_matches(result.stdout, test.stdout, test.compare, test.float_tol):
        return UnitOutcome(True)
    return UnitOutcome(
        False,
        why=f"stdout {_echo(result.stdout)} differs from the expected "
        f"{_clip(_repr(test.stdout), 150)} ({test.compare} comparison)",
    )


# -- the verdict --------------------------------------------------------------------------------------------------


def _units_in_order(plan: Plan) -> list[Any]:
    """Every test unit of the plan in test order (the order `outcomes` follow)."""
    return sorted([*plan.call_units, *plan.stdio_units], key=lambda u: u.index)


def _counts(plan: Plan, units: list[Any], outcomes: list[UnitOutcome]) -> dict[str, Any]:
    public = [o for u, o in zip(units, outcomes) if not u.hidden]
    hidden = [o for u, o in zip(units, outcomes) if u.hidden]
    return {
        "public_passed": sum(o.passed for o in public),
        "public_total": len(public),
        "hidden_passed": sum(o.passed for o in hidden),
        "hidden_total": len(hidden),
        "weaker_mode": plan.weaker_mode,
    }


def _verdict(
    item: CodeItem,
    plan: Plan,
    program: str | None,
    outcomes: list[UnitOutcome],
    *,
    status: Status | None = None,
    reason: str | None = None,
) -> Verdict:
    passed = sum(o.passed for o in outcomes)
    units = _units_in_order(plan)
    counts = _counts(plan, units, outcomes)
    reward = _reward(passed, plan.total, counts)
    if status is None:
        if passed == plan.total:
            status = Status.correct
        elif reward > 0:
            status = Status.partial
        else:
            status = Status.timeout if any(o.timed_out for o in outcomes) else Status.incorrect
    if reason is None:
        reason = (
            f"{passed}/{plan.total} tests passed (public {counts['public_passed']}/{counts['public_total']}, "
            f"hidden {counts['hidden_passed']}/{counts['hidden_total']})"
        )
        first_public_failure = next(((u, o) for u, o in zip(units, outcomes) if not o.passed and not u.hidden), None)
        if first_public_failure is not None:
            unit, outcome = first_public_failure
            reason += f"; first public failure, {unit.label}: {outcome.why}"
        if plan.weaker_mode:
            reason += "; some assertions ran inside the jail (weaker mode)"
    return Verdict(
        id=item.id,
        reward=reward,
        status=status,
        extracted=program,
        reason=reason,
        details=counts | {"language": item.language},
    )


def _reward(passed: int, total: int, counts: dict[str, Any]) -> float:
    """The pass rate; when an item has hidden tests, the pass rate of the hidden tests alone.

    Public tests are in the prompt, so a program can pass them by hardcoding their answers: they are reported (in
    `details` and the reason) but earn nothing once hidden tests exist, so hardcoding them never pays.
    """
    if counts["hidden_total"]:
        return counts["hidden_passed"] / counts["hidden_total"]
    return passed / total


def _call_text(call: Any) -> str:
    args = [_repr(a) for a in call.args] + [f"{k}={_repr(v)}" for k, v in call.kwargs.items()]
    return _clip(f"{call.fn}({', '.join(args)})", 160)


def _repr(value: Any) -> str:
    try:
        return repr(value)
    except (ValueError, RecursionError):  # e.g. an int too long to print
        return f"<{type(value).__name__}>"


def _echo(text: str, limit: int = MAX_ECHO_CHARS, tail: bool = False) -> str:
    """A quoted excerpt of program-produced text: its first (or last) `limit` characters, ASCII-escaped so that no
    newline, control or non-ASCII character reaches the reason, with the full length when cut."""
    part = text[-limit:] if tail else text[:limit]
    escaped = ascii(part)[1:-1]
    cut = len(part) < len(text) or len(escaped) > limit
    escaped = (
        (escaped[-limit:] if tail else escaped[:limit]) if len(escaped) > limit else escaped
    )  # escapes lengthen it
    if not cut:
        return f"'{escaped}'"
    return f"'...{escaped}' ({len(text)} chars)" if tail else f"'{escaped}...' ({len(text)} chars)"


class _ShortRepr(reprlib.Repr):
    """repr() with bounded work on any plain value: long strings, bytes, containers and nesting are cut while built."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel, self.maxstring, self.maxlong, self.maxother = 3, MAX_ECHO_CHARS, MAX_ECHO_CHARS, MAX_ECHO_CHARS
        self.maxlist = self.maxtuple = self.maxset = self.maxfrozenset = self.maxdict = 8

    repr_bytes = reprlib.Repr.repr_str  # slices before repr(), like a str

    def repr_int(self, x: int, level: int) -> str:
        return super().repr_int(x, level) if x.bit_length() <= 4 * MAX_ECHO_CHARS else f"<int of {x.bit_length()} bits>"


_SHORT_REPR = _ShortRepr()


def _echo_value(value: Any) -> str:
    """A value the program returned, as a bounded excerpt of its repr (escaped like _echo)."""
    try:
        text = _SHORT_REPR.repr(value)
    except (ValueError, RecursionError):
        text = f"<{type(value).__name__}>"
    quoted = ascii(text)[1:-1]
    return quoted if len(quoted) <= MAX_ECHO_CHARS else quoted[:MAX_ECHO_CHARS] + "..."


def _clip(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
