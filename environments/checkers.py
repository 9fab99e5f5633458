"""Scoring a finished session from the state it left: each of the task's checkers, then their weighted mean.

Hidden tests and SQL row checks run in a fresh jail (environments/jails.py) over a copy of the final state: the
state first, then the checker's files at /tests, then its command, so nothing the agent did can read or change
them, and no process of the agent is alive (`Session.finish` killed them all). State checks compare the class
tools' state with the state the task's reference trajectory leaves (replay.reference_record); a final-message check
scores the model's last message with a built-in verifier.

Whose fault a failure is decides the status, as for sessions: a checker jail that cannot start is infra_error; a
checker that times out, crashes or writes no reward (the agent's code can do that to it) scores 0.
"""

from __future__ import annotations

import base64
import functools
import io
import json
import math
import tarfile
from collections import Counter
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from groupscore.environments.jails import CHECK_ENV, ask, checker_cpu_s, open_checker_jail, state_roots
from groupscore.environments.record import Record, seed_env
from groupscore.environments.task import Checker, Task
from groupscore.sandbox import SandboxUnavailable
from groupscore.sandbox.session_launcher import SessionLost
from groupscore.schema.verdict import Status, Verdict

if TYPE_CHECKING:
    from groupscore.environments.agent.protocol import Check, Reply

VERSION = "env@1"


class CheckerUnavailable(Exception):
    """A checker could not run for the server's reasons (its jail did not start): nothing was judged."""


Outcome = tuple[float, dict[str, Any]]  # a checker's score in [0, 1], and its evidence
ReferenceFn = Callable[[Task], Record]


def score_record(task: Task, record: Record, reference: ReferenceFn) -> Verdict:
    """The session's verdict: each checker's score and evidence, combined by weight."""
    components: dict[str, float] = {}
    evidence: dict[str, Any] = {}
    try:
        for i, checker in enumerate(task.checkers):
            label = checker.label if checker.label not in components else f"{checker.label}_{i}"
            score, details = _run_checker(task, checker, record, reference)
            components[label], evidence[label] = score, details
    except CheckerUnavailable as exc:
        return Verdict.infra_error(task.id, f"a checker could not run: {exc}", "sandbox")
    total = sum(c.weight for c in task.checkers)
    reward = sum(c.weight * components[label] for c, label in zip(task.checkers, components, strict=True)) / total
    reward = min(1.0, max(0.0, reward))
    status = Status.correct if reward >= 1.0 else Status.partial if reward > 0 else Status.incorrect
    return Verdict(
        id=task.id,
        reward=reward,
        status=status,
        components=components if len(components) > 1 else None,
        details={"checkers": evidence},
        verifier_version=VERSION,
    )


def _run_checker(task: Task, checker: Checker, record: Record, reference: ReferenceFn) -> Outcome:
    if checker.kind == "final_message":
        return _final_message(checker, record)
    if checker.kind == "state":
        return _state(task, checker, record, reference)
    if record.snapshot is None:
        return 0.0, {"reason": record.snapshot_error or "the session left no state to check"}
    if checker.kind == "sql":
        return _sql(task, checker, record)
    return _tests(task, checker, record)


def _tar(checker: Checker, root: str) -> bytes:
    """The checker's files as a tar under `root`, every folder on their way (and the empty ones it names) included:
    a test's tree is placed whole, executables as such."""
    buf = io.BytesIO()
    top = root.strip("/")
    folders = {str(parent) for name in checker.files for parent in PurePosixPath(name).parents} | set(checker.dirs)
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for folder in sorted(folders - {"."}):
            info = tarfile.TarInfo(f"{top}/{folder}")
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        for name, text in sorted(checker.files.items()):
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{name}")
            executable = name in checker.executables or name.endswith(".sh")
            info.size, info.mode = len(data), 0o755 if executable else 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _in_checker_jail(
    task: Task,
    checker: Checker,
    record: Record,
    *,
    command: str = "",
    sql: tuple[str, str, list[str] | None] | None = None,
) -> Reply:
    """Run the check in a fresh jail: the tests' `command`, or `sql` (the database's path and the query)."""
    try:
        jail = open_checker_jail(task, checker.timeout_s)
    except (SessionLost, SandboxUnavailable, OSError) as exc:
        raise CheckerUnavailable(str(exc)) from exc
    try:
        assert record.snapshot is not None
        request: Check = {
            "op": "check",
            "workdir": task.workdir,
            "env": {**seed_env(record.seed), **task.env, **checker.env, **CHECK_ENV},
            "roots": list(state_roots(task)),
            "tar": base64.b64encode(record.snapshot).decode(),
            "tests": base64.b64encode(_tar(checker, "/tests")).decode(),
            "timeout": checker.timeout_s,
            "tool_cpu_s": checker_cpu_s(checker.timeout_s),
            "max_output": 8192,
        }
        if sql is not None:
            request["db_path"], request["query"], request["views"] = sql  # views None: any view may answer
        else:
            request["command"] = command
        try:
            return ask(jail, request, timeout=checker.timeout_s + 30)
        except SessionLost as exc:
            jail.close()
            if not (exc.agents_doing or jail.oom_killed):  # as for sessions: only these are the state's doing
                raise CheckerUnavailable(f"the checker's jail ended under the server: {exc}") from exc
            return {"ok": False, "error": f"the checker's jail ended: {exc}"}
    finally:
        jail.close()


def _tests(task: Task, checker: Checker, record: Record) -> Outcome:
    reply = _in_checker_jail(task, checker, record, command=checker.command)
    evidence: dict[str, Any] = {"output": str(reply.get("output", ""))[-2000:], "exit_code": reply.get("exit_code")}
    not_carried = [*record.not_carried, *reply.get("not_carried", [])]
    if not_carried:  # what the test did not see of the state (docs/environments.md, "What a checker sees")
        evidence["not_carried"] = not_carried[:20]
    if not reply.get("ok"):
        return 0.0, {**evidence, "reason": reply.get("error")}
    if reply.get("timed_out"):
        return 0.0, {**evidence, "reason": f"the tests ran past {checker.timeout_s:g} s"}
    reward = _reward_file(reply)
    if isinstance(reward, str):
        return 0.0, {**evidence, "reason": reward}
    return reward, evidence


def _reward_file(reply: Reply) -> float | str:
    """The reward test.sh wrote (reward.txt: a number; reward.json: {"reward": x}), or why there is none."""
    if "reward_txt" in reply:
        raw: Any = reply["reward_txt"].strip()
    elif "reward_json" in reply:
        try:
            raw = json.loads(reply["reward_json"]).get("reward")
        except (ValueError, AttributeError):
            return "reward.json is not an object with a 'reward'"
    else:
        return "the tests wrote no reward (/logs/verifier/reward.txt or reward.json)"
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return f"the reward written is not a number: {str(raw)[:80]!r}"
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        return f"the reward written is outside [0, 1]: {value}"
    return value


def _sql(task: Task, checker: Checker, record: Record) -> Outcome:
    assert task.database is not None and checker.query is not None
    sql = (task.database.path, checker.query, None if checker.agent_views else _task_views(task.database.sql))
    reply = _in_checker_jail(task, checker.model_copy(update={"files": {}}), record, sql=sql)

    if not reply.get("ok") or reply.get("error"):
        return 0.0, {"reason": reply.get("error") or "the query failed"}
    got = [tuple(_norm(v) for v in row) for row in reply.get("rows", [])]
    want = [tuple(_norm(v) for v in row) for row in checker.rows]
    same = got == want if checker.ordered else Counter(got) == Counter(want)
    return (1.0 if same else 0.0), {"rows": [list(r) for r in got[:20]], "expected": len(want)}


@functools.lru_cache(maxsize=256)
def _task_views(sql: str) -> list[str]:
    """The views the task's own database defines (its SQL is the task's, run here in memory): a checker's query may
    read through these, and through no view the agent made (a view named like a table would answer for it)."""
    import sqlite3

    con = sqlite3.connect(":memory:")
    try:
        con.executescript(sql)
        return [name for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'view'")]
    except sqlite3.Error:
        return []
    finally:
        con.close()


def _norm(v: Any) -> Any:
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def _state(task: Task, checker: Checker, record: Record, reference: ReferenceFn) -> Outcome:
    want = reference(task)
    if checker.compare == "bfcl":
        from groupscore.environments.bfcl_check import check_bfcl

        return check_bfcl(task, record, want)
    excluded = {name for c in task.classes for name in c.state_exclude}
    got_state, want_state = _strip(record.states[-1:], excluded), _strip(want.states[-1:], excluded)
    if not want_state or want_state[0] is None:
        raise CheckerUnavailable("the reference trajectory left no state")
    same = _same(got_state, want_state)
    return (1.0 if same else 0.0), {
        "differs": [] if same else _diff(got_state[0] if got_state else None, want_state[0])
    }


def _same(a: Any, b: Any) -> bool:
    """Equal as states: as Python's ==, but a bool is never a number (True == 1 in Python, not in a state)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    numbers = (int, float)
    if type(a) in numbers and type(b) in numbers:
        return bool(a == b)  # 100 and 100.0: the same amount, however the call spelt it
    return type(a) is type(b) and bool(a == b)


def _strip(states: list[Any], excluded: set[str]) -> list[Any]:
    out = []
    for state in states:
        if isinstance(state, dict):
            state = {
                cls: {k: v for k, v in attrs.items() if k not in excluded} if isinstance(attrs, dict) else attrs
                for cls, attrs in state.items()
            }
        out.append(state)
    return out


def _diff(got: Any, want: Any) -> list[str]:
    """Each attribute the episode left otherwise than the reference did, with both values (cut): the author reads
    why a verdict is 0 (the model never sees a verdict's details)."""
    if not isinstance(got, dict) or not isinstance(want, dict):
        return ["the state is missing"]
    out = []
    for cls, attrs in want.items():
        mine = got.get(cls) or {}
        for key in attrs if isinstance(attrs, dict) else []:
            if key not in mine or not _same(mine[key], attrs[key]):
                left = _shown(mine[key]) if key in mine else "nothing"
                out.append(f"{cls}.{key}: expected {_shown(attrs[key])}, got {left}")
    return out[:20]


def _shown(value: Any, width: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def _final_message(checker: Checker, record: Record) -> Outcome:
    from groupscore.verifiers.scoring import score_raw

    if record.final_message is None:
        return 0.0, {"reason": "the model gave no final message"}
    verdict = score_raw({**checker.item, "completion": record.final_message}, checker.reward)
    if verdict.status == Status.infra_error:
        raise CheckerUnavailable(verdict.reason)
    return verdict.reward, {"status": str(verdict.status), "reason": verdict.reason, "components": verdict.components}
