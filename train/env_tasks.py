"""An environment taskset: tasks of an environment source (`taskset.train: env:SOURCE`) as the trainer's tasks, their
held-out split, their prompts rendered with their tools, and their reference episodes as cold-start solutions.

A task's tools are read on the host where the task says them (built-in tools, class tools from source or with
schemas given); otherwise one session of the task is opened to ask. A task's reference episode, when its metadata
has one (`reference`: the calls of each turn, `outputs`: their results, `answer`: the last message), is its worked
solution: the conversation after the prompt, rendered by the chat template.
"""

from __future__ import annotations

import json
import random
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from groupscore.environments import Task as EnvTask
from groupscore.environments import load_source
from groupscore.environments.task import BUILTIN_TOOLS
from groupscore.environments.tools import BUILTIN_SCHEMAS, class_tool_schemas, schemas_from_source
from groupscore.schema.sessions import ToolCall
from groupscore.train.config import DatasetSource, TasksetConfig
from groupscore.train.task import TaskRow
from groupscore.train.toolcalls import render, suffix_after_turn

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


def is_env_taskset(cfg: TasksetConfig) -> bool:
    return cfg.train.env is not None


def load_env_taskset(cfg: TasksetConfig, seed: int) -> tuple[list[TaskRow], list[TaskRow]]:
    """(train tasks, held-out tasks) of the environment source(s)."""
    train = _tasks(cfg.train, "taskset.train")
    if cfg.eval is not None:
        if cfg.eval.env is None:
            raise ValueError("taskset.eval: an environment taskset is held out from an environment source (env:...)")
        return train, _tasks(cfg.eval, "taskset.eval")
    if not isinstance(cfg.eval_split, float):
        raise ValueError("taskset.eval_split: an environment source has no named splits; give a fraction (0.2)")
    order = list(range(len(train)))
    random.Random(seed).shuffle(order)
    held = set(order[: max(1, round(len(train) * cfg.eval_split))])
    if len(held) >= len(train):
        raise ValueError(f"taskset.eval_split: {len(train)} tasks leave none to train on after the split")
    return [t for i, t in enumerate(train) if i not in held], [t for i, t in enumerate(train) if i in held]


def _tasks(source: DatasetSource, field: str) -> list[TaskRow]:
    from groupscore.environments import SourceError

    try:
        env_tasks = load_source(source.env or "")
    except SourceError as exc:
        raise ValueError(f"{field}.env: {exc}") from None
    if not env_tasks:
        raise ValueError(f"{field}.env: {source.env} has no tasks")
    return [TaskRow(t.id, _user_text(t), reference_text(t), {}, columns={"source": t.source}, env=t) for t in env_tasks]


def task_dirs(tasks: list[TaskRow]) -> list[str]:
    """The folders of the task files a taskset comes from (what a service must be allowed to open)."""
    from pathlib import Path

    files = {Path(t.env.source).resolve() for t in tasks if t.env is not None and t.env.source}
    return sorted({str(f.parent if f.is_file() else f) for f in files if f.exists()})


def _user_text(task: EnvTask) -> str:
    return "\n".join(str(m.get("content", "")) for m in task.turns[0].messages if m.get("role") == "user")


def reference_text(task: EnvTask) -> str | None:
    """The reference episode as plain text (the tiny model's tokenizer learns from it), or None."""
    messages = reference_messages(task)
    if not messages:
        return None
    return "".join(json.dumps(m.get("tool_calls") or m.get("content"), ensure_ascii=False) for m in messages)


def reference_messages(task: EnvTask) -> list[dict[str, Any]]:
    """The reference episode as chat messages after the prompt: each turn's calls and their results, the answer."""
    meta = task.metadata
    calls, outputs = meta.get("reference") or [], meta.get("outputs") or []
    if not calls and "answer" not in meta:
        return []
    messages: list[dict[str, Any]] = []
    for turn, results in zip(calls, outputs, strict=False):
        tool_calls = [{"type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}} for c in turn]
        messages.append({"role": "assistant", "content": "", "tool_calls": tool_calls})
        messages += [{"role": "tool", "name": c["name"], "content": str(r)} for c, r in zip(turn, results)]
    if "answer" in meta:
        messages.append({"role": "assistant", "content": str(meta["answer"])})
    return messages


def host_tools(task: EnvTask) -> list[dict[str, Any]] | None:
    """The task's tools (OpenAI function format) as a session will offer them, read on the host; None when only a
    session can say (a class imported in the jail without schemas given)."""
    tools = [BUILTIN_SCHEMAS[t] for t in task.tools if t in BUILTIN_TOOLS]
    held_back = {name for turn in task.turns for name in turn.add_tools}
    for spec in task.classes:
        if spec.tool_schemas:
            names = [s.get("function", s)["name"] for s in spec.tool_schemas]
        elif spec.source is not None:
            spec = spec.model_copy(update={"tool_schemas": schemas_from_source(spec.source, spec.class_name)})
            names = sorted(s["function"]["name"] for s in spec.tool_schemas)
        else:
            return None
        offered = [n for n in names if (spec.methods is None or n in spec.methods) and n not in held_back]
        tools += list(class_tool_schemas((spec,), offered).values())
    return tools


def session_tools(task: EnvTask) -> list[dict[str, Any]]:
    """The tools one opened session of the task offers (for tasks whose tools the host cannot read)."""
    from groupscore.environments import Sessions

    sessions = Sessions(max_sessions=1)
    opening = sessions.reset(task)
    try:
        return opening.tools
    finally:
        sessions.close(opening.session_id)


def render_env_tasks(tasks: list[TaskRow], tokenizer: PreTrainedTokenizerBase, fmt: str) -> list[TaskRow]:
    """Each task's prompt rendered with its tools in the model's format, and its reference episode (if any) rendered
    as the text after the prompt: the cold start's worked solution, in exactly the tokens rollouts produce."""
    out = []
    for task in tasks:
        env = task.env
        assert env is not None
        tools = host_tools(env)
        if tools is None:
            tools = session_tools(env)
        messages = [dict(m) for m in env.turns[0].messages]
        prompt = render(tokenizer, messages, tools, fmt)
        solution, parts = None, None
        reference = reference_messages(env)
        if reference:
            whole = render(tokenizer, messages + reference, tools, fmt, generation_prompt=False)
            if whole.startswith(prompt):
                solution = whole[len(prompt) :]
                parts = solution_parts(tokenizer, fmt, messages, reference, tools, prompt)
                parts = parts if parts is not None and "".join(t for t, _ in parts) == solution else None
        out.append(replace(task, prompt=prompt, solution=solution, solution_parts=parts))
    return out


def solution_parts(
    tokenizer: PreTrainedTokenizerBase,
    fmt: str,
    messages: list[dict[str, Any]],
    reference: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    prompt: str,
) -> tuple[tuple[str, bool], ...] | None:
    """The reference episode after `prompt` as (text, trained) parts: each model turn up to its end-of-turn token is
    trained; the tool results after it, up to and with the next assistant header, are not, and must be the very text
    a rollout masks (`suffix_after_turn`). None where either does not hold (then the whole text is trained)."""
    eos = tokenizer.eos_token if isinstance(tokenizer.eos_token, str) else ""
    parts: list[tuple[str, bool]] = []
    done, i = prompt, 0
    while i < len(reference):
        whole = render(tokenizer, messages + reference[: i + 1], tools, fmt, generation_prompt=False)
        if not whole.startswith(done):
            return None
        turn = whole[len(done) :]
        end = turn.find(eos) + len(eos) if eos and eos in turn else len(turn)  # a rollout stops at the first
        parts.append((turn[:end], True))
        i += 1
        j = i
        while j < len(reference) and reference[j]["role"] == "tool":
            j += 1
        after = render(tokenizer, messages + reference[:j], tools, fmt, generation_prompt=j < len(reference))
        if not after.startswith(whole):
            return None
        masked = turn[end:] + after[len(whole) :]
        if j > i and masked != suffix_after_turn(tokenizer, fmt, [str(m["content"]) for m in reference[i:j]]):
            return None
        parts.append((masked, False))
        done, i = after, j
    return tuple((text, trained) for text, trained in parts if text)


def check_reference_episodes(tasks: list[TaskRow], limit: int = 16) -> tuple[int, list[str]]:
    """Replay up to `limit` tasks' reference episodes in sessions (in parallel): each call's result must be the one
    recorded and the verdict 1. (How many were replayed, the failures.)"""
    from concurrent.futures import ThreadPoolExecutor

    from groupscore.environments import Sessions

    chosen = [t.env for t in tasks if t.env is not None and reference_messages(t.env)][:limit]
    sessions = Sessions(max_sessions=max(1, len(chosen)))

    def replay(task: EnvTask) -> str | None:
        opening = sessions.reset(task)
        try:
            for turn, outputs in zip(task.metadata.get("reference") or [], task.metadata.get("outputs") or []):
                for call, expected in zip(turn, outputs, strict=False):
                    got = sessions.step(opening.session_id, ToolCall.model_validate(call)).content
                    if got != str(expected):
                        return f"{task.id}: {call['name']} gave {got[:80]!r}, the reference says {str(expected)[:80]!r}"
            verdict = sessions.score(opening.session_id, final_message=task.metadata.get("answer"))
            if verdict.reward < 1.0:
                why = f"{verdict.status.value}: {verdict.reason}"
                return f"{task.id}: the reference episode scores {verdict.reward} ({why})"
            return None
        finally:
            sessions.close(opening.session_id)

    with ThreadPoolExecutor(8) as pool:
        failures = [f for f in pool.map(replay, chosen) if f is not None]
    return len(chosen), failures
