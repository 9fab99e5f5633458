"""`groupscore check TARGET --cases cases.jsonl`: run the checks, print the table, write the JSON report."""

from __future__ import annotations

import sys
from pathlib import Path

from groupscore.testing.cases import CasesError, load_cases
from groupscore.testing.checks import CheckConfig, CheckRun
from groupscore.testing.targets import TargetError, resolve_target


def check_command(target: str, cases: Path, report: Path | None = Path("check-report.json"),
                  config: CheckConfig | None = None) -> int:
    """0: every check passed; 1: a check failed; 2: the checker could not do its job (bad cases, target not loadable,
    a checker fault). Exit 2 always comes with a message starting `groupscore check: error:`."""
    try:
        loaded_cases = load_cases(cases)
        resolved = resolve_target(target)
        result = CheckRun(resolved, loaded_cases, config or CheckConfig()).run()
    except CasesError as exc:
        print(f"groupscore check: error: bad cases: {exc}", file=sys.stderr)
        return 2
    except TargetError as exc:
        print(f"groupscore check: error: cannot load target {target!r}: {exc}", file=sys.stderr)
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
        print("groupscore check: error: the checker itself failed on the ERROR rows above; "
              "their verdicts are missing, not failed", file=sys.stderr)
    elif result.exit_code == 1:
        print(f"groupscore check: {len(result.failures)} check(s) failed", file=sys.stderr)
    return result.exit_code
