"""`groupscore env show FILE [--line N]`: an episode as a transcript to read, turn by turn: a file `env run --save`
wrote, or a line of `groupscore eval`'s rollouts.jsonl or of a training run's groups.jsonl (every sample of the group,
each with its reward)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

INDENT = "    "


def add_show_command(env: Any) -> None:
    p = env.add_parser(
        "show",
        help="print a saved episode, or a line of rollouts.jsonl or groups.jsonl, as a transcript",
        description="FILE is what `env run --save` wrote, or a JSONL file of `groupscore eval` (rollouts.jsonl) or "
        "of a training run (groups.jsonl): --line N picks its line (default 1).",
    )
    p.add_argument("file", type=Path, help="an episode `env run --save` wrote, or a rollouts.jsonl or groups.jsonl")
    p.add_argument("--line", type=int, default=1, help="the line of a JSONL file (from 1)")
    p.set_defaults(func=show_command)


def show_command(args: argparse.Namespace) -> int:
    from groupscore.env import BadInput, _refuse

    try:
        record = read_record(args.file, args.line)
        lines = transcript(record)
    except BadInput as exc:
        return _refuse("env show", str(exc))
    except (AttributeError, TypeError, KeyError, IndexError, RecursionError) as exc:  # a field of another shape
        return _refuse("env show", f"{args.file}: not the shape env show reads ({type(exc).__name__}: {exc})")
    print("\n".join(lines))
    return 0


def read_record(path: Path, line: int) -> dict[str, Any]:
    from groupscore.env import BadInput

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        if line != 1:
            raise ValueError("a line of a JSONL file")
        whole = json.loads(text)
    except ValueError:
        rows = [row for row in text.splitlines() if row.strip()]
        if not 1 <= line <= len(rows):
            raise BadInput(f"{path}: --line {line}: the file has {len(rows)} lines") from None
        try:
            whole = json.loads(rows[line - 1])
        except ValueError as exc:
            raise BadInput(f"{path}:{line}: not JSON ({exc})") from None
    if not isinstance(whole, dict):
        raise BadInput(f"{path}: not an episode, a rollout or a group (a JSON object)")
    return whole


def transcript(record: dict[str, Any]) -> list[str]:
    """The record as lines to read; BadInput when it is none of the shapes this shows."""
    from groupscore.env import BadInput

    if "observations" in record and "trajectory" in record:  # env run --save
        return _saved(record)
    if "rollout" in record:  # eval's rollouts.jsonl
        head = f"task {record.get('task_id')}, rollout {record.get('rollout')}: {_outcome(record)}"
        return [head, *_prompt(record.get("prompt")), *_sample(record.get("trajectory", record.get("completion")))]
    samples = record.get("trajectories", record.get("completions"))
    if isinstance(samples, list):  # groups.jsonl
        rewards = record.get("rewards") or [None] * len(samples)
        out = [f"step {record.get('step')}, group {record.get('group')}: task {record.get('task_id')}"]
        out += _prompt(record.get("prompt"))
        for index, (sample, reward) in enumerate(zip(samples, rewards, strict=False)):
            out += ["", f"--- sample {index + 1}: reward {reward}", *_sample(sample)]
        return out
    raise BadInput("not an episode `env run --save` wrote, nor a line of rollouts.jsonl or groups.jsonl")


def _saved(record: dict[str, Any]) -> list[str]:
    out = [f"task {record.get('task')} (seed {record.get('seed')})"]
    results = record.get("observations") or []
    for turn, calls in enumerate(record.get("trajectory") or [], 1):
        for index, call in enumerate(calls if isinstance(calls, list) else []):
            got = results[turn - 1][index] if turn - 1 < len(results) and index < len(results[turn - 1]) else {}
            out += _call(turn, call, got.get("content", ""), bool(got.get("is_error")))
    if record.get("final_message") is not None:
        out.append(f"final message: {record['final_message']}")
    verdict = record.get("verdict") or {}
    out.append(f"verdict: {verdict.get('status')}, reward {verdict.get('reward')}")
    return out


def _call(turn: int, call: Any, content: Any, error: bool) -> list[str]:
    call = call if isinstance(call, dict) else {}
    arguments = json.dumps(call.get("arguments", {}), ensure_ascii=False)
    body = [INDENT + line for line in str(content).splitlines()] or [INDENT + "(no output)"]
    return [f"[turn {turn}] {call.get('name')}({arguments}){' (error)' if error else ''}", *body]


def _prompt(prompt: Any) -> list[str]:
    return ["prompt:", *(INDENT + line for line in str(prompt or "").splitlines())]


def _outcome(record: dict[str, Any]) -> str:
    return f"{record.get('status')}, reward {record.get('reward')}"


def _sample(sample: Any) -> list[str]:
    """A completion's text, or an episode's messages (its calls, the tools' results, the answers)."""
    if not isinstance(sample, dict):
        return [INDENT + line for line in str(sample or "").splitlines()] or [INDENT + "(empty)"]
    out = []
    for message in sample.get("messages") or []:
        role = message.get("role", "?")
        for call in message.get("tool_calls") or []:
            function = call.get("function", call) if isinstance(call, dict) else {}
            out.append(f"{role} calls {function.get('name')}({_arguments(function.get('arguments'))})")
        content = message.get("content")
        if content:
            out.append(f"{role}:" if role != "tool" else "tool result:")
            out += [INDENT + line for line in str(content).splitlines()]
    ended = sample.get("ended")
    if ended:
        out.append(f"(ended: {ended}; {sample.get('status')}, reward {sample.get('reward')})")
    return out


def _arguments(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
