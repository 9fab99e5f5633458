"""What the call runners read on stdin: a job's call units (inputs and residual code, never an expected value), as
marshal data for the Python runner (jail_runner.py) and as JSON for the JavaScript and Java runners (runners/).

Which units share a runner job is `runner_groups`' choice: a program that runs in its runner's own process can read
everything that process was given, so units whose failure a reason may quote never share it with hidden ones.
"""

from __future__ import annotations

import json
import marshal

from groupscore.verifiers.code.item import CodeItem
from groupscore.verifiers.code.jail_runner import MARSHAL_VERSION, encode_value
from groupscore.verifiers.code.plan import CallUnit


def runner_groups(language: str, units: list[CallUnit]) -> list[list[CallUnit]]:
    """The call units of each runner job, public units first.

    Python: one job; its runner calls each unit in a fresh worker, after the units before it, so what a public unit's
    message quotes was written before the program met any hidden input. JavaScript, TypeScript and Java run the program
    in the runner's process, which holds the whole plan (a program can reread stdin at offset 0, or take a heap
    snapshot): public and hidden units go to separate jobs, so the process whose errors and returned values a reason
    quotes never had a hidden input.
    """
    if language == "python":
        return [units] if units else []
    public = [u for u in units if not u.hidden]
    hidden = [u for u in units if u.hidden]
    return [group for group in (public, hidden) if group]


def runner_plan(item: CodeItem, units: list[CallUnit], marker: str) -> bytes:
    """What the jail's runner reads on stdin: call inputs and residual code, never an expected value.

    Strings, numbers, lists and dicts in marshal format (version 4, which the jail's interpreter reads whatever its
    version; loading it costs the runner microseconds, where parsing a literal cost a compile); call arguments go
    through the codec, so tuples and sets arrive as they were.
    """
    records = [
        {
            "calls": [
                {"fn": c.fn, "args": encode_value(list(c.args)), "kwargs": encode_value(dict(c.kwargs))}
                for c in unit.calls
            ],
            "residual": unit.residual,
            "time_limit_s": float(unit.time_limit_s),
        }
        for unit in units
    ]
    return marshal.dumps(
        {
            "marker": marker,
            "import_limit_s": float(item.time_limit_s),
            "stop_on_failure": item.stop_on_first_failure,
            "units": records,
        },
        MARSHAL_VERSION,
    )


def json_runner_plan(item: CodeItem, units: list[CallUnit], marker: str) -> bytes:
    """The JavaScript and Java runners' plan: call tests' functions and JSON arguments, never an expected value."""
    records = [
        {
            "calls": [{"fn": c.fn, "args": list(c.args)} for c in unit.calls],
            "time_limit_s": float(unit.time_limit_s),
        }
        for unit in units
    ]
    body = {
        "marker": marker,
        "import_limit_s": float(item.time_limit_s),
        "stop_on_failure": item.stop_on_first_failure,
        "units": records,
    }
    return json.dumps(body, ensure_ascii=True).encode()
