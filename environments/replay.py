"""Episodes driven from a list of calls: `replay` (a trajectory, start to verdict), `oracle` (the trajectory a task
says solves it), `reference_record` (what a task's reference trajectory leaves, for state checkers; cached per task)
and `build_state` (a Harbor image's RUN steps, run once, their result packed as a task's initial state).

A trajectory is a list of turns, each a list of tool calls ({"name", "arguments"}); after a turn's calls the next user
turn is served, as a model ending its turn with a message would get it.
"""

from __future__ import annotations

import hashlib
import shlex
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pydantic import ValidationError

from groupscore.environments.errors import SourceError
from groupscore.environments.record import Record
from groupscore.environments.session import Session
from groupscore.environments.task import MAX_EPISODE_S, EpisodeLimits, Task
from groupscore.schema.sessions import Observation, ToolCall
from groupscore.schema.verdict import Verdict

Trajectory = Sequence[Sequence[ToolCall | dict[str, Any]]]


def as_calls(turn: Iterable[ToolCall | dict[str, Any]]) -> list[ToolCall]:
    return [c if isinstance(c, ToolCall) else ToolCall.model_validate(c) for c in turn]


def oracle(task: Task) -> tuple[list[list[ToolCall]], str | None] | None:
    """The episode the task says solves it, if it says (as Harbor's oracle agent plays it): its calls by turn and
    the final message. Harbor's solution/solve.sh, a state checker's reference, or the task's metadata (`solution` or
    `reference`: turns of calls; `answer` or `final_message`: the last message). SourceError: metadata that says but
    is no trajectory."""
    meta = task.metadata
    said = meta.get("answer", meta.get("final_message"))
    answer = str(said) if said is not None else None
    if meta.get("solution_text"):
        env = meta.get("solution_env") or {}
        exports = "".join(f"export {k}={shlex.quote(str(v))}\n" for k, v in sorted(env.items()))
        return [[ToolCall(name="shell", arguments={"command": exports + str(meta["solution_text"])})]], answer
    for checker in task.checkers:
        if checker.kind == "state" and checker.reference:
            return [list(turn) for turn in checker.reference], answer
    for key in ("solution", "reference"):
        given = meta.get(key)
        if isinstance(given, list) and all(isinstance(turn, list) for turn in given):
            try:
                return [[ToolCall.model_validate(c) for c in turn] for turn in given], answer
            except ValidationError as exc:
                where = ".".join(str(p) for p in exc.errors(include_url=False)[0]["loc"])
                raise SourceError(
                    f"task {task.id}: metadata.{key}: not turns of tool calls ({where or 'a call'})"
                ) from None
    return ([], answer) if answer is not None else None


def replay(
    task: Task,
    trajectory: Trajectory,
    final_message: str | None = None,
    seed: int = 0,
    observe: Callable[[int, ToolCall, Observation], None] | None = None,
) -> Verdict:
    """Run `trajectory` in a fresh session of `task` and score it. observe(turn, call, observation): each step."""
    session = Session(task, seed).start()
    try:
        _play(session, trajectory, observe)
        return session.conclude(final_message, reference_record)
    finally:
        session.close()


def run_calls(task: Task, trajectory: Trajectory) -> Session:
    """A finished session of `task` after `trajectory` (its jail closed; its record and state kept)."""
    session = Session(task).start()
    try:
        _play(session, trajectory)
        session.finish()
        if session.lost:
            raise RuntimeError(f"task {task.id}: {session.lost}")
        return session
    finally:
        session.close()


def _play(
    session: Session, trajectory: Trajectory, observe: Callable[[int, ToolCall, Observation], None] | None = None
) -> None:
    """Each turn's calls as steps, the next user turn served after every turn but the last."""
    for i, turn in enumerate(trajectory):
        for call in as_calls(turn):
            observation = session.step(call)
            if observe is not None:
                observe(i, call, observation)
        if i < len(trajectory) - 1:
            session.next_turn()


def _task_key(task: Task) -> str:
    return hashlib.sha256(task.model_dump_json(exclude={"checkers"}).encode()).hexdigest()


_REFERENCES: dict[str, Record] = {}
_REFERENCES_LOCK = threading.Lock()


def _reference(task: Task) -> Record:
    state_checkers = [c for c in task.checkers if c.kind == "state"]
    reference = state_checkers[0].reference if state_checkers else ()
    # The reference runs with no step budget of the task's: it is the task's own answer, not a policy's episode.
    roomy = task.limits.model_copy(update={"max_steps": 10_000})
    return run_calls(task.model_copy(update={"limits": roomy}), reference).record


def reference_record(task: Task) -> Record:
    """What the task's reference trajectory leaves (its calls, states by turn, final state); cached per task."""
    key = _task_key(task)
    with _REFERENCES_LOCK:
        cached = _REFERENCES.get(key)
    if cached is None:
        cached = _reference(task)
        with _REFERENCES_LOCK:
            if len(_REFERENCES) >= 4096:
                _REFERENCES.clear()
            _REFERENCES[key] = cached
    return cached


def build_state(task: Task, commands: list[str], timeout_s: float = 300.0) -> bytes:
    """Run `commands` as shell steps in a session of `task` (no network, as in any session); each must exit 0. The
    packed state they leave (a tar of the work dir and /tmp)."""
    limits = EpisodeLimits(
        max_steps=max(1, len(commands)),
        step_time_s=min(600.0, timeout_s),
        episode_time_s=min(MAX_EPISODE_S, timeout_s * max(1, len(commands))),
        disk_mb=task.limits.disk_mb,
        memory_mb=task.limits.memory_mb,
        max_output_bytes=1 << 16,
    )
    builder = task.model_copy(update={"tools": ("shell",), "classes": (), "limits": limits})
    session = Session(builder).start()
    try:
        if session.lost:
            raise RuntimeError(f"task {task.id}: {session.lost}")
        for command in commands:
            obs = session.step(ToolCall(name="shell", arguments={"command": command}))
            if obs.is_error:
                raise RuntimeError(f"task {task.id}: RUN {command[:80]!r} failed: {obs.content[-500:]}")
        session.finish()
        if session.record.snapshot is None:
            raise RuntimeError(f"task {task.id}: its built state was not packed: {session.record.snapshot_error}")
        return session.record.snapshot
    finally:
        session.close()
