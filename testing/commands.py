"""`groupscore check TARGET --cases cases.jsonl`: run the checks, print the table, write the JSON report."""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from groupscore.testing.cases import CasesError, load_cases
from groupscore.testing.check_base import CHECK_GROUPS, CheckConfig
from groupscore.testing.checks import CheckRun
from groupscore.testing.targets import TargetError, resolve_target


@contextmanager
def _hypothesis_scratch_dir() -> Iterator[None]:
    """The fuzz check runs hypothesis, which keeps a `.hypothesis/` folder in the current directory; a command-line
    run should leave the user's directory as it found it, so it gets a temporary one."""
    from hypothesis import configuration

    with tempfile.TemporaryDirectory(prefix="groupscore-check-") as scratch:
        before = configuration.storage_directory(intent_to_write=False).home_directory
        configuration.set_hypothesis_home_dir(scratch)
        try:
            yield
        finally:
            configuration.set_hypothesis_home_dir(before)


def config_from_options(
    timeout_s: float | None = None,
    reward_range: str | None = None,
    checks: str | None = None,
    base: CheckConfig | None = None,
) -> CheckConfig:
    """The CheckConfig the command-line options describe; ValueError with a readable message when one is malformed."""
    config = base or CheckConfig()
    if timeout_s is not None:
        if not timeout_s > 0:
            raise ValueError(f"--timeout must be positive, got {timeout_s}")
        config = replace(config, timeout_s=timeout_s)
    if reward_range is not None:
        try:
            lo, hi = (float(x) for x in reward_range.split(","))
        except ValueError:
            raise ValueError(f"--reward-range takes LO,HI (e.g. -1,1), got {reward_range!r}") from None
        if not lo <= hi:
            raise ValueError(f"--reward-range: {lo:g} is above {hi:g}")
        config = replace(config, reward_range=(lo, hi))
    if checks is not None:
        groups = tuple(g.strip() for g in checks.split(",") if g.strip())
        unknown = [g for g in groups if g not in CHECK_GROUPS]
        if unknown:
            raise ValueError(f"--checks: unknown group(s) {', '.join(unknown)}; known: {', '.join(CHECK_GROUPS)}")
        config = replace(config, checks=groups)
    return config


# From this many cases on, each check group's start is a line on stderr: a large file takes minutes per group.
PROGRESS_MIN_CASES = 200


class _ProgressLine:
    """`groupscore check: determinism on 1200 cases (12 s so far)`, once per check group, on stderr."""

    def __init__(self, n_cases: int) -> None:
        self.n_cases, self.started, self.seen = n_cases, time.monotonic(), set[str]()

    def __call__(self, group: str) -> None:
        if group in self.seen:
            return
        self.seen.add(group)
        elapsed = time.monotonic() - self.started
        print(
            f"groupscore check: {group} on {self.n_cases} cases ({elapsed:.0f} s so far)", file=sys.stderr, flush=True
        )


def check_command(
    target: str,
    cases: Path | None,
    report: Path | None = Path("check-report.json"),
    config: CheckConfig | None = None,
    *,
    timeout_s: float | None = None,
    reward_range: str | None = None,
    checks: str | None = None,
) -> int:
    """0: every check passed; 1: a check failed; 2: the checker could not do its job (bad options or cases, target
    not loadable, a checker fault). Exit 2 always comes with a message starting `groupscore check: error:`."""
    try:
        config = config_from_options(timeout_s, reward_range, checks, config)
    except ValueError as exc:
        print(f"groupscore check: error: {exc}", file=sys.stderr)
        return 2
    if target.startswith("env:"):
        return _check_environment(target, report)
    if cases is None:
        print("groupscore check: error: --cases is required (JSONL of {prompt, completion, ...})", file=sys.stderr)
        return 2
    try:
        loaded_cases = load_cases(cases)
        if target.endswith((".yaml", ".yml")):  # a `groupscore train` config: every reward it pays, one by one
            from groupscore.testing.config_targets import check_train_config

            return check_train_config(Path(target), loaded_cases, report, config, _hypothesis_scratch_dir)
        resolved = resolve_target(target)
        resolved.validate(loaded_cases)  # before anything runs: one line, not a FAIL row per case
        run = CheckRun(resolved, loaded_cases, config)
        if len(loaded_cases) >= PROGRESS_MIN_CASES:
            run.progress = _ProgressLine(len(loaded_cases))
        with _hypothesis_scratch_dir():
            result = run.run()
    except CasesError as exc:
        print(f"groupscore check: error: bad cases: {exc}", file=sys.stderr)
        return 2
    except TargetError as exc:
        print(f"groupscore check: error: cannot load target {target!r}: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - the checker's own fault: say so, never let it pass for a failed check
        print(f"groupscore check: error: the checker failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    print(result.table())
    if report is not None:
        try:
            result.write_json(report)
        except OSError as exc:
            print(f"groupscore check: error: cannot write the report to {report}: {exc}", file=sys.stderr)
            return 2
        print(f"report written to {report}")
    if result.exit_code == 2:
        print(
            "groupscore check: error: the checker itself failed on the ERROR rows above; "
            "their verdicts are missing, not failed",
            file=sys.stderr,
        )
    elif result.exit_code == 1:
        print(f"groupscore check: {len(result.failures)} check(s) failed", file=sys.stderr)
    return result.exit_code


def _check_environment(target: str, report: Path | None) -> int:
    """`groupscore check env:SOURCE[:TASK_ID]`: the environment probes (env_checks.py); exit codes as above."""
    from groupscore.environments import SourceError
    from groupscore.testing.env_checks import check_environment

    try:
        result = check_environment(target)
    except SourceError as exc:
        print(f"groupscore check: error: cannot load target {target!r}: {exc}", file=sys.stderr)
        return 2
    print(result.table())
    if report is not None:
        result.write_json(report)
        print(f"report written to {report}")
    if result.exit_code == 1:
        print(f"groupscore check: {len(result.failures)} check(s) failed", file=sys.stderr)
    return result.exit_code
