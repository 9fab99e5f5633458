"""BFCL's own multi-turn checker as the oracle, and a batch replay of trajectories on BFCL's classes; both in the jail.

Both run a whole batch in one jail (sandbox.run, python_env "bfcl"), never in the host process: `oracle_verdicts`
runs data/bfcl_oracle_main.py (BFCL's multi_turn_checker), `replay_turns` runs data/bfcl_replay_main.py (each call
and each turn's state, the data bfcl_check.py scores). The tests hold bfcl_check on replay_turns' records to the
oracle's verdicts; the jail Python environment is made by `make` (see the Makefile's `bfcl` env):

    groupscore sandbox env create bfcl -- --no-deps bfcl-eval==<the host's version> mpmath
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from groupscore.environments.bfcl import PYTHON_ENV, bfcl_entry
from groupscore.environments.bfcl_check import TurnRecord
from groupscore.environments.task import Task
from groupscore.sandbox.limits import Limits
from groupscore.sandbox.runner import run

# A trajectory: its turns, each the calls {"name", "arguments"} the model made in it.
Trajectory = Sequence[Sequence[dict[str, Any]]]
# Runs in one jail: long contexts take ~5 ms a turn, plain tasks less; the wall limit is per batch.
BATCH = 400
BATCH_LIMITS = Limits(wall_time_s=300, memory_mb=3072, max_output_bytes=256 << 20)


class OracleError(RuntimeError):
    """The jail run of a batch failed (not a verdict): what it said."""


def _script(name: str) -> str:
    """A script run in the jail: this folder's data/ (test tooling), or the package's (class_state.py, which sessions
    run too)."""
    here = Path(__file__).with_name("data") / name
    if here.is_file():
        return here.read_text(encoding="utf-8")
    return (resources.files("groupscore.environments") / "data" / name).read_text(encoding="utf-8")


def _jail(files: dict[str, str | bytes]) -> Any:
    result = run(files, limits=BATCH_LIMITS, python_env=PYTHON_ENV)
    if not result.ok:
        said = (result.error or result.stderr)[-2000:]
        raise OracleError(f"the batch's jail run ended {result.status.value}: {said}")
    return result


def _calls(turns: Trajectory) -> list[list[dict[str, Any]]]:
    return [[{"name": c["name"], "arguments": dict(c["arguments"])} for c in turn] for turn in turns]


def oracle_verdicts(runs: Sequence[tuple[str, Task, Trajectory]]) -> dict[str, dict[str, Any]]:
    """{key: BFCL's verdict} ({"valid": bool, "error_type", "error_message"}) for each (key, task, trajectory)."""
    out: dict[str, dict[str, Any]] = {}
    for start in range(0, len(runs), BATCH):
        batch = runs[start : start + BATCH]
        tasks = {task.id: task for _key, task, _turns in batch}
        job = {
            "entries": {tid: bfcl_entry(t) for tid, t in tasks.items()},
            "ground_truth": {tid: t.metadata["ground_truth"] for tid, t in tasks.items()},
            "runs": [{"key": key, "task": task.id, "turns": _calls(turns)} for key, task, turns in batch],
        }
        result = _jail({"main.py": _script("bfcl_oracle_main.py"), "oracle_in.json": json.dumps(job)})
        for line in result.stdout.splitlines():
            verdict = json.loads(line)
            out[verdict.pop("key")] = verdict
    return out


def replay_turns(runs: Sequence[tuple[str, Task, Trajectory]]) -> dict[str, list[TurnRecord]]:
    """{key: per-turn records} of each trajectory run on its task's classes in the jail, as bfcl_check takes them."""
    out: dict[str, list[TurnRecord]] = {}
    for start in range(0, len(runs), BATCH):
        batch = runs[start : start + BATCH]
        tasks = {task.id: task for _key, task, _turns in batch}
        job = {
            "tasks": {tid: {"classes": [c.model_dump() for c in t.classes]} for tid, t in tasks.items()},
            "runs": [{"key": key, "task": task.id, "turns": _calls(turns)} for key, task, turns in batch],
        }
        files: dict[str, str | bytes] = {
            "main.py": _script("bfcl_replay_main.py"),
            "class_state.py": _script("class_state.py"),
            "replay_in.json": json.dumps(job),
        }
        replayed = json.loads(_jail(files).stdout)
        values = replayed["values"]
        for item in replayed["runs"]:
            if "error" in item:
                raise OracleError(f"replaying {item['key']} failed in the jail: {item['error']}")
            out[item["key"]] = [
                {
                    "calls": turn["calls"],
                    "state": {c: {a: values[d] for a, d in attrs.items()} for c, attrs in turn["state"].items()},
                }
                for turn in item["turns"]
            ]
    return out
