"""`groupscore env run|list`: try an environment task from the command line, or list a source's tasks.

    groupscore env list demo
    groupscore env run demo:count-errors --trajectory calls.json     # JSON: turns, each a list of {"name", "arguments"}
    groupscore env run demo:count-errors                             # tool calls typed one per line on stdin
    groupscore env run demo:count-errors --full --save episode.json  # whole outputs; the episode kept, replayable

`run` prints the opening turn, one line per observation (`[turn 1] shell -> ...`; `--full`: the whole output under
it), each user turn as it is served, and, as its last line, the verdict as one JSON object. A call is typed as JSON
or as `TOOL key=value ...` (a value is read as JSON where it is JSON: `amount=450` a number, else text, shell-quoted:
`command="ls -la"`). `--save FILE` writes the episode (its calls per turn, what each gave back, the verdict), which
`--trajectory FILE` plays again. Its exit status is the verdict's: 0 solved (status `correct`),
1 judged and not solved, 3 `infra_error` (nothing judged the episode), and 2 when the input was refused. It drives
the same `Sessions` the service does (a jail per session, the checkers after the episode), so a trajectory scores
here as it would through /v1/sessions.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from groupscore.environments import Sessions
    from groupscore.schema.sessions import Message

PREVIEW_LINES = 3  # of an observation's content, on its one line
PREVIEW_CHARS = 240


class BadInput(ValueError):
    """A trajectory or a typed line that is not what `run` takes: one line naming where."""


def add_env_commands(sub: Any) -> None:
    """Register `env run` and `env list` on the `groupscore` command's subparsers."""
    env = sub.add_parser("env", help="try an environment task, or list a source's tasks").add_subparsers(
        dest="env_command", required=True
    )
    p = env.add_parser(
        "run",
        help="run one task's episode: a trajectory from a file, or tool calls typed on stdin; print the verdict",
        description="Open a session of SOURCE:TASK_ID, run the tool calls, score it. With --trajectory, FILE is JSON: "
        'a list of turns, each a list of tool calls {"name", "arguments"} (or an episode --save wrote). Without '
        'it, stdin gives one call per line, as JSON {"name", "arguments"} or as TOOL key=value ... (values JSON '
        'where they parse, else text); a blank line or {"end_turn": "message"} ends the turn. The last line '
        "printed is the verdict as one JSON object. Exit status: 0 solved, 1 judged and not solved, 2 input refused, "
        "3 infra_error (nothing judged the episode).",
    )
    p.add_argument("task", metavar="SOURCE:TASK_ID", help="e.g. demo:count-errors, harbor:TASK, bfcl:multi_turn_base_0")
    p.add_argument("--trajectory", metavar="FILE", default=None, help="JSON list of turns of calls; - reads stdin")
    p.add_argument(
        "--oracle",
        action="store_true",
        help="play the task's own solution (Harbor's solve.sh, a state checker's reference, its metadata's), as "
        "Harbor's oracle agent does: a task it does not solve is a broken task",
    )
    p.add_argument("--final-message", metavar="TEXT", default=None, help="the model's last message (for its checker)")
    p.add_argument("--seed", type=int, default=0, help="the session's seed (default 0)")
    p.add_argument("--full", action="store_true", help="print each tool output whole (default: a one-line preview)")
    p.add_argument("--save", metavar="FILE", type=Path, default=None, help="write the episode and its verdict as JSON")
    p.set_defaults(func=run_command)
    p = env.add_parser("list", help="list a source's tasks: id, turns, tools, checkers, what it asks")
    p.add_argument("source", help="bfcl, harbor, demo, or a path to a task file or Harbor task directory")
    p.add_argument("--json", action="store_true", help="one JSON object a task (its address included)")
    p.set_defaults(func=list_command)
    from groupscore.env_show import add_show_command

    add_show_command(env)


# -- list ----------------------------------------------------------------------------------------------------------


def list_command(args: argparse.Namespace) -> int:
    """Every task of the source; a file with bad tasks lists the good ones, then names each bad one (status 2)."""
    from groupscore.environments.catalog import list_source, summary

    try:
        tasks, problems = list_source(args.source)
    except (KeyError, ImportError, OSError, ValueError) as exc:  # SourceError is a ValueError
        return _refuse("env list", f"source: {_message(exc)}")
    for task in tasks:
        shown = summary(task)
        if args.json:
            print(json.dumps(shown.model_dump(mode="json"), ensure_ascii=False))
        else:
            tools, checkers = ",".join(shown.tools), ",".join(shown.checkers)
            print(f"{task.id}\tturns={shown.turns}\ttools={tools}\tcheckers={checkers}\t{shown.description}")
    for problem in problems:
        print(f"groupscore env list: {problem}", file=sys.stderr)
    return 2 if problems else 0


def run_command(args: argparse.Namespace) -> int:
    from groupscore.environments import Sessions, SourceError, load_task

    try:
        task = load_task(args.task)
    except (SourceError, KeyError, ImportError) as exc:
        return _refuse("env run", f"SOURCE:TASK_ID: {_message(exc)}")
    trajectory = None
    final_message, seed = args.final_message, args.seed
    if args.oracle:
        from groupscore.environments.replay import oracle

        if args.trajectory is not None:
            return _refuse("env run", "--oracle plays the task's own solution: give it or --trajectory, not both")
        try:
            solution = oracle(task)
        except SourceError as exc:
            return _refuse("env run", f"--oracle: {exc}")
        if solution is None:
            return _refuse("env run", f"--oracle: {args.task} has no solution of its own (solve.sh, a reference)")
        trajectory = [[call.model_dump(mode="json") for call in turn] for turn in solution[0]] or [[]]
        final_message = final_message if final_message is not None else solution[1]
    if args.trajectory is not None:
        try:
            trajectory, saved = read_trajectory(args.trajectory)
        except BadInput as exc:
            return _refuse("env run", f"--trajectory: {exc}")
        if final_message is None and isinstance(saved.get("final_message"), str):  # a saved episode plays as it ran
            final_message = saved["final_message"]
    if args.save is not None and (args.save.is_dir() or not args.save.absolute().parent.is_dir()):
        return _refuse("env run", f"--save: {args.save}: give a file in a folder that exists")
    sessions = Sessions(max_sessions=1)
    opening = sessions.reset(task, seed=seed)
    session_id = opening.session_id
    episode = Episode(args.full)
    try:
        for message in opening.messages:
            _print_message(1, message)
        if trajectory is None:
            print("tools: " + ", ".join(_signature(tool) for tool in opening.tools), flush=True)
            status = _typed(sessions, session_id, sys.stdin, episode)
            if status:
                return status
        else:
            _replayed(sessions, session_id, trajectory, episode)
        final_message = final_message if final_message is not None else episode.final_message
        verdict = sessions.score(session_id, final_message)
    finally:
        sessions.close_all()
    print(verdict.model_dump_json(), flush=True)
    if args.save is not None:
        record = {"task": args.task, "seed": seed, "trajectory": episode.calls, "observations": episode.results}
        record |= {"final_message": final_message, "verdict": verdict.model_dump(mode="json")}
        try:
            args.save.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        except OSError as exc:
            return _refuse("env run", f"--save: {args.save}: {exc.strerror or exc}")
    return verdict_status(verdict)


@dataclass
class Episode:
    """What `run` shows of each call (`full`: the whole output) and keeps for --save: the calls and results by turn."""

    full: bool = False
    calls: list[list[dict[str, Any]]] = field(default_factory=lambda: [[]])
    results: list[list[dict[str, Any]]] = field(default_factory=lambda: [[]])
    final_message: str | None = None  # the last message a turn ended with

    def next_turn(self) -> None:
        self.calls.append([])
        self.results.append([])


# `env run`'s exit status, from the verdict, so that a script can tell them apart (2: the input was refused).
EXIT_CORRECT, EXIT_NOT_SOLVED, EXIT_REFUSED, EXIT_INFRA_ERROR = 0, 1, 2, 3


def verdict_status(verdict: Any) -> int:
    """0: solved (status correct); 1: judged and not solved (incorrect, partial, ...); 3: infra_error, nothing
    judged the episode (a trainer masks it)."""
    from groupscore.schema.verdict import Status

    if verdict.status is Status.infra_error:
        return EXIT_INFRA_ERROR
    return EXIT_CORRECT if verdict.status is Status.correct else EXIT_NOT_SOLVED


def read_trajectory(where: str) -> tuple[list[list[dict[str, Any]]], dict[str, Any]]:
    """The turns of a trajectory file (`-`: stdin), each call checked as the sessions take it; and, for an episode
    `run --save` wrote, the rest of what it saved (its final message)."""
    from pydantic import ValidationError

    from groupscore.schema.sessions import ToolCall

    text = sys.stdin.read() if where == "-" else _read_file(where)
    try:
        turns = json.loads(text)
    except ValueError as exc:
        raise BadInput(f"{where} is not JSON: {exc}") from None
    saved: dict[str, Any] = {}
    if isinstance(turns, dict) and "trajectory" in turns:  # an episode `run --save` wrote
        saved, turns = turns, turns["trajectory"]
    if not isinstance(turns, list) or not all(isinstance(turn, list) for turn in turns):
        raise BadInput(f'{where}: give a list of turns, each a list of tool calls {{"name", "arguments"}}')
    for t, turn in enumerate(turns, 1):
        for c, call in enumerate(turn, 1):
            try:
                ToolCall.model_validate(call)
            except ValidationError as exc:
                raise BadInput(f"turn {t}, call {c}: {_first_error(exc)}") from None
    return turns, saved


def _read_file(where: str) -> str:
    try:
        return Path(where).read_text(encoding="utf-8")
    except OSError as exc:
        raise BadInput(f"{where}: {exc.strerror or exc}") from None


def _replayed(sessions: Sessions, session_id: str, trajectory: list[list[dict[str, Any]]], episode: Episode) -> None:
    """Each turn's calls, then the next user turn (as a model ending its turn gets it); the last turn ends at score."""
    from groupscore.schema.sessions import ToolCall

    for index, turn in enumerate(trajectory):
        for call in turn:
            _step(sessions, session_id, index + 1, ToolCall.model_validate(call), episode)
        if index < len(trajectory) - 1 and _next_turn(sessions, session_id, None, episode):
            return


def _typed(sessions: Sessions, session_id: str, lines: IO[str], episode: Episode) -> int:
    """Calls typed one per line until the task's turns are done or stdin ends; a bad line is refused with one line
    naming it (at a terminal the person types it again, after a prompt; from a pipe the command stops with 2)."""
    turn = 1
    for number, line in _numbered(lines, prompt=lines.isatty()):
        try:
            kind, value = parse_typed_line(line)
        except BadInput as exc:
            if not lines.isatty():
                return _refuse("env run", f"stdin line {number}: {exc}")
            print(f"line {number}: {exc}", file=sys.stderr, flush=True)
            continue
        if kind == "call":
            _step(sessions, session_id, turn, value, episode)
            continue
        if value is not None:
            episode.final_message = value
        if _next_turn(sessions, session_id, value, episode):
            break
        turn += 1
    return 0


def parse_typed_line(line: str) -> tuple[str, Any]:
    """("call", ToolCall) or ("end_turn", message or None) for one typed line."""
    from pydantic import ValidationError

    from groupscore.schema.sessions import ToolCall

    if not line.strip():
        return "end_turn", None
    if not line.lstrip().startswith("{"):
        return "call", _keyword_call(line)
    try:
        value = json.loads(line)
    except ValueError as exc:
        raise BadInput(f'not JSON ({exc}); type {{"name": TOOL, "arguments": {{...}}}} or a blank line') from None
    if isinstance(value, dict) and set(value) == {"end_turn"}:
        if value["end_turn"] is not None and not isinstance(value["end_turn"], str):
            raise BadInput("end_turn: the turn's closing message is a string")
        return "end_turn", value["end_turn"]
    try:
        return "call", ToolCall.model_validate(value)
    except ValidationError as exc:
        raise BadInput(_first_error(exc)) from None


def _keyword_call(line: str) -> Any:
    """`TOOL key=value ...` as a call: each value JSON where it parses (450, true, [1]), else the text itself."""
    import shlex

    from pydantic import ValidationError

    from groupscore.schema.sessions import ToolCall

    try:
        name, *pairs = shlex.split(line)
    except ValueError as exc:
        raise BadInput(f"cannot split the line as a shell would: {exc}") from None
    if not re.fullmatch(r"[A-Za-z_][\w.-]*", name):
        raise BadInput(
            f'{name[:40]!r} is no tool name; type TOOL key=value ..., {{"name": TOOL, "arguments": {{...}}}}'
        )
    arguments: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key:
            raise BadInput(f"{pair!r}: give each argument as key=value after the tool's name (or the call as JSON)")
        try:  # NaN and Infinity are no JSON values: text
            arguments[key] = json.loads(text, parse_constant=_no_constant)
        except ValueError:
            arguments[key] = text
    try:
        return ToolCall(name=name, arguments=arguments)
    except ValidationError as exc:
        raise BadInput(_first_error(exc)) from None


def _no_constant(name: str) -> Any:
    raise ValueError(name)


def _numbered(lines: IO[str], prompt: bool = False) -> Iterator[tuple[int, str]]:
    number = 0
    while True:
        if prompt:
            print("> ", end="", file=sys.stderr, flush=True)
        line = lines.readline()  # each line as it is typed
        if not line:
            return
        number += 1
        yield number, line.rstrip("\n")


def _step(sessions: Sessions, session_id: str, turn: int, call: Any, episode: Episode) -> None:
    observation = sessions.step(session_id, call)
    episode.calls[-1].append(call.model_dump(mode="json"))
    episode.results[-1].append(observation.model_dump(mode="json"))
    if episode.full:
        mark = " (error)" if observation.is_error else ""
        print(f"[turn {turn}] {call.name}{mark}{' [episode over]' if observation.done else ''}:", flush=True)
        print("".join(f"    {line}\n" for line in observation.content.splitlines()) or "    (no output)", end="")
        print(flush=True)
        return
    content = observation.content.strip("\n").splitlines() or ["(no output)"]
    preview = " | ".join(content[:PREVIEW_LINES])
    if len(content) > PREVIEW_LINES:
        preview += f" | (+{len(content) - PREVIEW_LINES} lines)"
    if len(preview) > PREVIEW_CHARS:
        preview = preview[:PREVIEW_CHARS] + "..."
    marks = ("error: " if observation.is_error else "") + preview + (" [episode over]" if observation.done else "")
    print(f"[turn {turn}] {call.name} -> {marks}", flush=True)


def _next_turn(sessions: Sessions, session_id: str, message: str | None, episode: Episode) -> bool:
    """End the model's turn; print the next user turn. True when the task has none left."""
    turn = sessions.next_turn(session_id, message)
    if not turn.done:
        episode.next_turn()
    for served in turn.messages:
        _print_message(turn.turn + 1, served)
    if turn.tools is not None:
        print(f"[turn {turn.turn + 1}] tools: " + ", ".join(_signature(t) for t in turn.tools), flush=True)
    return turn.done


def _print_message(turn: int, message: Message) -> None:
    content = " ".join(str(message.get("content") or "").split())
    print(f"[turn {turn}] {message.get('role', 'user')}: {content}", flush=True)


def _signature(tool: dict[str, Any]) -> str:
    function = tool.get("function", tool)
    arguments = function.get("parameters", {}).get("properties", {})
    return f"{function.get('name')}({', '.join(arguments)})"


def _first_error(exc: Any) -> str:
    first = exc.errors(include_url=False)[0]
    return f"{'.'.join(str(p) for p in first['loc']) or 'call'}: {first['msg']}"


def _message(exc: BaseException) -> str:
    return str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)


def _refuse(command: str, problem: str) -> int:
    print(f"groupscore {command}: {problem}", file=sys.stderr)
    return 2
