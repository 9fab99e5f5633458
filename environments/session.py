"""One session: a task's episode in a jail of its own, from `open` through its steps and turns to `finish`.

The session keeps what a checker reads afterwards (`Record`): every call with its result, per turn, the class tools'
state at the end of each turn (for tasks whose checker compares state), the model's last message, and the packed
final state. Its jail is gone after `finish` (every process of it killed first), so nothing the agent started
outlives the episode.

Whose fault an ending is decides the verdict. A jail that cannot start, or a session the server reaps or loses, is
`lost` (infra_error: nothing was judged, trainers mask it). A jail that ends during one of the agent's own steps
(its memory, its processes) is the agent's doing: the episode is over and is scored, with no state left, as 0; a
policy cannot turn a failing episode into a masked one by killing its session.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from enum import StrEnum
from typing import TYPE_CHECKING, Any, cast

from groupscore.environments.checkers import ReferenceFn, score_record
from groupscore.environments.jails import ask, open_session_jail, state_roots
from groupscore.environments.record import Record, seed_env
from groupscore.environments.task import BUILTIN_TOOLS, Task
from groupscore.environments.tools import (
    BUILTIN_SCHEMAS,
    check_builtin_call,
    check_schema_call,
    class_tool_schemas,
    schemas_from_source,
)
from groupscore.sandbox import SandboxUnavailable
from groupscore.sandbox.session_launcher import SessionJail, SessionLost
from groupscore.schema.sessions import Observation, Opening, ToolCall
from groupscore.schema.sessions import Turn as TurnOut
from groupscore.schema.verdict import Verdict

if TYPE_CHECKING:
    from groupscore.environments.agent.protocol import Call, Database, Finish, Init, Reply, Request

GRACE_S = 5.0  # the host waits this long past a step's own limit before it counts the agent as gone


class Phase(StrEnum):
    """Where a session is: NEW (made, no jail yet) -> OPEN (`start`: its jail answers) -> FINISHED (`finish`: every
    process killed, the state packed, the jail closing) -> scored (`conclude`, once: `verdict`). LOST, from any phase
    but FINISHED, is the server's failure (its jail did not start, died under the server, was reaped): the verdict is
    infra_error. While OPEN the episode may be over (`ended`: its budget, its time, its jail ending during one of its
    own steps): steps are refused, and it still finishes and is scored."""

    NEW = "new"
    OPEN = "open"
    FINISHED = "finished"
    LOST = "lost"


class Session:
    """A task's episode. Methods are called by one caller at a time (Sessions holds `lock` around them)."""

    def __init__(self, task: Task, seed: int = 0, client: str | None = None):
        self.id = uuid.uuid4().hex
        self.task, self.seed, self.client = task, seed, client
        self.lock = threading.Lock()
        self.opened = self.touched = time.monotonic()
        self.steps = 0
        self.turn = 0
        self.calls = 0  # steps and turn ends taken; numbered calls are checked against it (Sessions' `_once`)
        self.last_request = ""  # the last call's digest, and its answer (None while it runs, or if it failed)
        self.last_answer: Observation | TurnOut | None = None
        self.record = Record(seed=seed)
        self.jail: SessionJail | None = None
        self.phase = Phase.NEW
        self.lost: str | None = None  # why it is LOST
        self.ended: str | None = None  # why the episode is over (budget, time, the jail ended during a step)
        self.verdict: Verdict | None = None  # set once, by `conclude`
        self._closer: threading.Thread | None = None
        self.methods: list[str] = []
        self._tools = [t for t in task.tools]
        self._class_schemas: dict[str, dict[str, Any]] = {}
        self._checked: set[str] = set()  # class tools whose calls are checked against their schema first

    # -- opening ---------------------------------------------------------------------------------------------------

    def start(self) -> Session:
        """NEW -> OPEN: start the jail and give it the task's state (LOST if that fails: the session still opens,
        its steps say so, its verdict is infra_error)."""
        assert self.phase is Phase.NEW, f"start() on a {self.phase} session"
        self.phase = Phase.OPEN
        self._start()
        return self

    def _start(self) -> None:
        task = self.task
        try:
            self.jail = open_session_jail(task)
            reply = ask(self.jail, self._init_message(), timeout=60)
        except (SessionLost, SandboxUnavailable, OSError, ValueError) as exc:
            self._lose(f"the session could not start: {exc}")
            return
        if not reply.get("ok"):
            self._lose(f"the session could not start: {reply.get('error')}")
            return
        self.methods = list(reply.get("methods", []))
        held_back = {name for turn in task.turns for name in turn.add_tools}
        schemas: dict[str, dict[str, Any]] = {}
        for spec in task.classes:
            # the author's own class, its schemas read from its signatures: a call that fits none of them would only
            # be a TypeError inside the class (schemas a task gives, BFCL's among them, are the task's own word)
            read = spec.source is not None and not spec.tool_schemas
            if read:
                spec = spec.model_copy(update={"tool_schemas": schemas_from_source(spec.source, spec.class_name)})
            offered = class_tool_schemas((spec,), [m for m in self.methods if _offered(spec, m)])
            schemas.update(offered)
            if read:
                self._checked.update(offered)
        self._class_schemas = schemas
        self._tools += [m for m in self.methods if m in schemas and m not in held_back]
        unknown = sorted(held_back - set(BUILTIN_TOOLS) - set(schemas))
        if unknown:  # the task's own mistake, found in the jail: said, and the session is not played
            self._lose(f"the task adds tools it does not have: {', '.join(unknown)}")
            return
        for name in task.turns[0].add_tools:
            if name not in self._tools:
                self._tools.append(name)

    def _init_message(self) -> Init:
        task = self.task
        classes = [c.model_dump(exclude={"tool_schemas", "state_exclude", "python_env"}) for c in task.classes]
        database: Database | None = {"path": task.database.path, "sql": task.database.sql} if task.database else None
        return {
            "op": "init",
            "workdir": task.workdir,
            "env": {**seed_env(self.seed), **task.env},
            "roots": list(state_roots(task)),
            "files": dict(task.files),
            "tar": base64.b64encode(task.state).decode() if task.state else None,
            "database": database,
            "classes": classes,
            "timeout": 30,
            "tool_cpu_s": task.limits.cpu_s,
        }

    def opening(self) -> Opening:
        return Opening(
            session_id=self.id,
            task_id=self.task.id,
            messages=list(self.task.turns[0].messages),
            tools=self.tool_schemas(),
            turns=len(self.task.turns),
        )

    def tool_schemas(self) -> list[dict[str, Any]]:
        return [BUILTIN_SCHEMAS[t] if t in BUILTIN_TOOLS else self._class_schemas[t] for t in self._tools]

    # -- steps and turns -------------------------------------------------------------------------------------------

    def step(self, call: ToolCall) -> Observation:
        self.touched = time.monotonic()
        if self.lost:
            return self._obs(f"the session is unavailable: {self.lost}", error=True)
        if self.ended or self.phase is not Phase.OPEN:
            return self._obs(f"the episode is over: {self.ended or 'scored'}", error=True)
        self.steps += 1
        limits = self.task.limits
        left = limits.episode_time_s - (time.monotonic() - self.opened)
        if left <= 0:
            self.ended = f"the episode's {limits.episode_time_s:g} s are spent"
            return self._obs(self.ended, error=True)
        content, is_error, text = self._run(call, min(limits.step_time_s, left))
        entry = {"name": call.name, "arguments": _recorded(call.arguments), "output": content}
        if text is not None:
            entry["text"] = text
        self.record.calls[-1].append(entry)
        if self.steps >= limits.max_steps and not self.ended:
            self.ended = f"the step budget ({limits.max_steps}) is spent"
        return self._obs(content, error=is_error)

    def _obs(self, content: str, *, error: bool) -> Observation:
        done = bool(self.ended) or self.phase is not Phase.OPEN
        # A lone surrogate (a tool's error text can hold one) is no UTF-8: no JSON encoder or tokenizer takes it.
        content = content.encode("utf-8", "replace").decode("utf-8")
        return Observation(content=content, is_error=error, done=done, steps=self.steps)

    def _run(self, call: ToolCall, timeout: float) -> tuple[str, bool, str | None]:
        """The tool's result as the model sees it, whether it is an error, and the task encoder's text of it."""
        name, args = call.name, call.arguments
        if name not in self._tools:
            return f"unknown tool {name!r}; the tools are: {', '.join(self._tools)}", True, None
        step = {"timeout": timeout, "max_output": self.task.limits.max_output_bytes}
        if name in BUILTIN_TOOLS:
            problem = check_builtin_call(name, args)
            if problem:
                return problem, True, None
            # the arguments are the tool's schema's, checked above: each names a field of its request
            message = cast("Request", {"op": name, **({"path": "."} if name == "list_files" else {}), **args, **step})
        else:
            problem = check_schema_call(name, args, self._class_schemas[name]) if name in self._checked else None
            if problem:
                return problem, True, None
            message = cast("Call", {"op": "call", "name": name, "arguments": args, **step})
        assert self.jail is not None
        try:
            reply = ask(self.jail, message, timeout=timeout + GRACE_S)
        except SessionLost as exc:
            if self._jail_failed_under_us(exc):
                return f"the session is unavailable: {self.lost}", True, None
            self.ended = f"the session's jail ended during step {self.steps}: {exc}"
            return self.ended, True, None
        content, is_error = _render(name, reply, timeout)
        return content, is_error, reply.get("text")

    def next_turn(self, message: str | None = None) -> TurnOut:
        """The model ended its turn (with `message`); the next user turn, or done."""
        self.touched = time.monotonic()
        if message is not None:
            self.record.final_message = message
        if self.turn >= len(self.task.turns):  # no turn is left: nothing more to record (a state per turn at most)
            return TurnOut(done=True, turn=self.turn)
        if self.needs_states() and self.jail is not None and not self.lost:
            self.record.states.append(self._class_state())
        self.turn += 1
        if self.turn >= len(self.task.turns) or self.lost or self.ended:
            return TurnOut(done=True, turn=self.turn)
        self.record.calls.append([])
        turn = self.task.turns[self.turn]
        changed = [t for t in turn.add_tools if t not in self._tools]
        self._tools += changed
        return TurnOut(messages=list(turn.messages), tools=self.tool_schemas() if changed else None, turn=self.turn)

    def needs_states(self) -> bool:
        return any(c.kind == "state" for c in self.task.checkers)

    def _class_state(self) -> Any:
        assert self.jail is not None
        try:
            return ask(self.jail, {"op": "state", "timeout": 30}, timeout=40).get("state")
        except SessionLost as exc:
            if not self._jail_failed_under_us(exc):
                self.ended = f"the session's jail ended: {exc}"
            return None

    # -- the end ---------------------------------------------------------------------------------------------------

    def finish(self, final_message: str | None = None) -> None:
        """End the episode: the last turn's state, every process killed, the state packed, the jail closed."""
        if final_message is not None:
            self.record.final_message = final_message
        if self.phase is not Phase.OPEN:  # finished already, lost (nothing to pack), or never started
            return
        self.phase = Phase.FINISHED
        if self.jail is None:
            return
        if self.needs_states() and len(self.record.states) <= self.turn:
            self.record.states.append(self._class_state())
        if self.jail is not None:
            cap = (self.task.limits.disk_mb * 2) << 20
            try:
                finish: Finish = {"op": "finish", "roots": list(state_roots(self.task)), "max_bytes": cap}
                reply = ask(self.jail, finish, 60)
                tar = reply.get("tar")
                self.record.snapshot = base64.b64decode(tar) if tar else None
                self.record.snapshot_error = reply.get("error")
                self.record.not_carried = list(reply.get("not_carried") or [])
            except SessionLost as exc:
                if self._jail_failed_under_us(exc):
                    return
                self.record.snapshot_error = f"the session's jail ended before its state was packed: {exc}"
        self._close_jail(background=True)

    def _jail_failed_under_us(self, exc: SessionLost) -> bool:
        """Close the jail that failed a request, and say whether the server (or host) lost it: the session is then
        `lost` (infra_error). It is the agent's doing when its agent stopped answering in time, or when the kernel's
        OOM killer acted in its cgroup (the tools' processes are its first choice, the agent its last), or when it sent
        more than the host reads of one reply (it cuts what its tools produce: only its state can). Anything else
        ends a jail from outside: its agent is the pid namespace's init, unkillable from inside, and unreachable
        by ptrace or through /proc."""
        jail = self.jail
        self._close_jail()
        if exc.agents_doing or jail is None or jail.oom_killed:
            return False
        self._lose(f"the session's jail ended under the server: {exc}")
        return True

    def _lose(self, reason: str) -> None:
        self.phase, self.lost = Phase.LOST, reason
        self._close_jail()

    def lose(self, reason: str) -> None:
        """The server gives the session up (reaped, shut down): its verdict is infra_error."""
        if self.phase is not Phase.FINISHED:
            self._lose(reason)

    def conclude(self, final_message: str | None, reference: ReferenceFn) -> Verdict:
        """Finish the episode (if it is not) and score it: the one way every caller gets a session's verdict (the
        same on every call). infra_error when the session is LOST, before or while its state was packed."""
        if self.verdict is None:
            self.finish(final_message)
            if self.lost:
                self.verdict = Verdict.infra_error(self.task.id, self.lost, "sandbox", session_id=self.id)
            else:
                verdict = score_record(self.task, self.record, reference)
                self.settle()  # its jail is gone before its verdict is out
                verdict.details.update(session_id=self.id, steps=self.steps, ended=self.ended)
                self.verdict = verdict
        return self.verdict

    def _close_jail(self, background: bool = False) -> None:
        jail, self.jail = self.jail, None
        if jail is None:
            return
        if background:  # after `finish` nothing runs in it but the agent: its teardown overlaps the checkers
            self._closer = threading.Thread(target=jail.close, name="groupscore-session-close", daemon=True)
            self._closer.start()
        else:
            jail.close()

    def settle(self) -> None:
        """Wait until the session's jail is gone (a close begun in the background)."""
        if self._closer is not None:
            self._closer.join()

    def close(self) -> None:
        self._close_jail()
        self.settle()


RECORDED_ARGUMENTS = 64 << 10  # bytes of a call's arguments (as JSON) the record keeps; the rest is a size


def _recorded(arguments: dict[str, Any]) -> dict[str, Any]:
    """A call's arguments as the record keeps them: whole up to RECORDED_ARGUMENTS, else only their size (a client's
    megabytes would otherwise stay on the host for the session's life, a step at a time)."""
    size = len(json.dumps(arguments, ensure_ascii=False, default=str))
    return arguments if size <= RECORDED_ARGUMENTS else {"<arguments cut>": size}


def _offered(spec: Any, method: str) -> bool:
    """A method the class offers as a tool: those it names, else every public one but its setup."""
    return method in spec.methods if spec.methods is not None else method != spec.setup


def _render(tool: str, reply: Reply, timeout: float) -> tuple[str, bool]:
    if not reply.get("ok"):
        return f"the tool failed: {reply.get('error')}", True
    output = str(reply.get("output") or "")
    if reply.get("timed_out"):
        note = " (the interpreter was restarted: its variables are gone)" if reply.get("lost") else ""
        return f"{output}\n[timed out after {timeout:g} s{note}]".lstrip("\n"), True
    if tool == "shell":
        code = reply.get("exit_code")
        return (output + (f"\n[exit code {code}]" if code else "")), bool(code)
    if reply.get("error"):
        return (output + f"\n{reply['error']}").lstrip("\n"), True
    if "result" in reply:
        result = reply["result"]
        text = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)
        return (output + text) if output else text, False
    return output, False
