"""Tool calls in the chat template's own format: which format a model writes (read from its template), reading the
calls out of a turn the model generated, and the tokens of the tool results that go back to it.

Formats: `hermes` (Qwen2.5 and Hermes: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, one block a
call), `llama3` (Llama 3.1/3.2: the turn is a JSON object `{"name": ..., "parameters": {...}}`, after an optional
`<|python_tag|>`; several joined by `;`), `smollm2` (SmolLM2's function-calling format: `<tool_call>[{"name": ...,
"arguments": {...}}, ...]</tool_call>`; its chat template renders no tools, so the tool list goes into the system
prompt, as SmolLM2 was tuned on). A template with none of them is refused in one line before any weights load.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

FORMATS = ("hermes", "llama3", "smollm2")
_BLOCK = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
SMOLLM2_SYSTEM = (
    "You are an expert in composing functions. You are given a question and a set of possible functions. Based on "
    "the question, you will need to make one or more function/tool calls to achieve the purpose.\n\nYou have access "
    "to the following tools:\n<tools>{tools}</tools>\n\nThe output MUST strictly adhere to the following format, "
    'and NO other text MUST be included.\n<tool_call>[\n{{"name": "func_name1", "arguments": {{"argument1": '
    '"value1"}}}}\n]</tool_call>'
)


class NoToolSupport(ValueError):
    """The model's chat template has no tool-call format groupscore reads: one line, before any work."""


@dataclass(frozen=True)
class ParsedTurn:
    """A turn the model generated: its text without the calls, and the calls ({"name", "arguments"}) in order.
    `problem`: the turn tried to call a tool and the call could not be read (the episode ends on it)."""

    content: str
    calls: list[dict[str, Any]]
    problem: str | None = None


def detect_format(tokenizer: PreTrainedTokenizerBase, setting: str = "auto") -> str:
    """The tool-call format of the model's chat template (or `setting` when it names one)."""
    template = tokenizer.chat_template
    name = getattr(tokenizer, "name_or_path", "the model")
    if not isinstance(template, str) or not template:
        raise NoToolSupport(
            f"{name} has no chat template, so it has no tool-call format: an environment taskset needs an instruct "
            "model whose template renders tools (Qwen2.5, Llama 3.1+, SmolLM2), or env.tool_format with a template"
        )
    if setting != "auto":
        found = setting
    elif "<tool_call>" in template and "tool_calls" in template:
        found = "hermes"
    elif "<|python_tag|>" in template or ("ipython" in template and "parameters" in template):
        found = "llama3"
    elif "SmolLM" in template:
        found = "smollm2"
    else:
        raise NoToolSupport(
            f"the chat template of {name} has no tool support groupscore reads (Qwen2.5's <tool_call> JSON, Llama 3's "
            "JSON calls, SmolLM2's <tool_call> list): set env.tool_format to the format the model was tuned on "
            "(hermes, llama3, smollm2), or use a model whose template renders tools"
        )
    try:
        render(tokenizer, [{"role": "user", "content": "q"}, {"role": "tool", "content": "r"}], [], found, False)
    except Exception as exc:  # noqa: BLE001 - a template raises what its author chose (jinja, TemplateError, ...)
        raise NoToolSupport(f"the chat template of {name} cannot render a tool result ({exc})") from None
    return found


def render(
    tokenizer: PreTrainedTokenizerBase,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    fmt: str,
    generation_prompt: bool = True,
) -> str:
    """The conversation as the model reads it, with its tools (in the system prompt for SmolLM2)."""
    if fmt == "smollm2" and tools:
        listed = SMOLLM2_SYSTEM.format(tools=json.dumps([t.get("function", t) for t in tools]))
        if messages and messages[0]["role"] == "system":
            messages = [{"role": "system", "content": messages[0]["content"] + "\n\n" + listed}, *messages[1:]]
        else:
            messages = [{"role": "system", "content": listed}, *messages]
        tools = []
    offered: Any = tools or None  # transformers types the list as dicts or callables
    text = tokenizer.apply_chat_template(
        messages, tools=offered, tokenize=False, add_generation_prompt=generation_prompt
    )
    if not isinstance(text, str):
        raise TypeError(f"apply_chat_template(tokenize=False) returned {type(text).__name__}, not text")
    return text


def assistant_message(turn: ParsedTurn) -> dict[str, Any]:
    """The model's turn as a chat message (what the next turn's suffix is rendered after, and what logs show)."""
    message: dict[str, Any] = {"role": "assistant", "content": turn.content}
    if turn.calls:
        message["tool_calls"] = [{"type": "function", "function": call} for call in turn.calls]
    return message


def suffix_after_turn(
    tokenizer: PreTrainedTokenizerBase, fmt: str, results: list[str], user: list[dict[str, Any]] | None = None
) -> str:
    """The text between the end of the model's turn and its next turn: the tool results as the template renders
    them (or the next user turn), then the assistant's header. Found as the difference of two renderings of a
    stand-in conversation, as TRL does, so it is the template's own text whatever the template."""
    call = {"type": "function", "function": {"name": "f", "arguments": {}}}
    head: list[dict[str, Any]] = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
    ]
    if fmt == "smollm2":  # its template renders content only
        head[1] = {"role": "assistant", "content": "x"}
    before = render(tokenizer, head, [], fmt, generation_prompt=False)
    tail: list[dict[str, Any]] = [{"role": "tool", "content": r} for r in results] if user is None else user
    after = render(tokenizer, head + tail, [], fmt, generation_prompt=True)
    if not after.startswith(before):
        raise NoToolSupport("the chat template renders an earlier turn differently once a tool result follows it")
    # the model's turn ends at its end-of-turn token: what the template puts after that token belongs to the suffix
    eos = tokenizer.eos_token if isinstance(tokenizer.eos_token, str) else ""
    end = before.rfind(eos) + len(eos) if eos and eos in before else len(before)
    return after[end:]


def parse_turn(text: str, fmt: str) -> ParsedTurn:
    """The calls in a generated turn, read in `fmt`; a turn without any is the model's answer."""
    if fmt == "llama3":
        return _parse_llama3(text)
    calls: list[dict[str, Any]] = []
    blocks = _BLOCK.findall(text)
    if not blocks:
        return ParsedTurn(text.strip(), [])
    content = _BLOCK.sub("", text).strip()
    for block in blocks:
        try:
            value = json.loads(block)
        except json.JSONDecodeError as exc:
            return ParsedTurn(content, calls, f"a tool call that is not JSON ({exc.msg})")
        for call in value if isinstance(value, list) else [value]:
            problem = _check(call, "arguments")
            if problem:
                return ParsedTurn(content, calls, problem)
            calls.append({"name": call["name"], "arguments": call.get("arguments") or {}})
    return ParsedTurn(content, calls)


def _parse_llama3(text: str) -> ParsedTurn:
    body = text.replace("<|python_tag|>", "").strip()
    if not body.startswith("{"):
        return ParsedTurn(text.strip(), [])
    calls: list[dict[str, Any]] = []
    for part in body.split(";") if not _is_json(body) else [body]:
        try:
            call = json.loads(part)
        except json.JSONDecodeError as exc:
            return ParsedTurn("", calls, f"a tool call that is not JSON ({exc.msg})")
        problem = _check(call, "parameters")
        if problem:
            return ParsedTurn("", calls, problem)
        calls.append({"name": call["name"], "arguments": call.get("parameters", call.get("arguments")) or {}})
    return ParsedTurn("", calls)


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _check(call: Any, key: str) -> str | None:
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        return 'a tool call without a "name"'
    arguments = call.get(key, call.get("arguments", {}))
    if arguments is not None and not isinstance(arguments, dict):
        return f'a tool call whose "{key}" is not a JSON object'
    return None
