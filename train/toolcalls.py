"""Tool calls in the chat template's own format: which format a model writes (read from its template), reading the
calls out of a turn the model generated, and the tokens of the tool results that go back to it.

Formats: `hermes` (Qwen2.5 and Hermes: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, one block a
call), `llama3` (Llama 3.1/3.2: the turn is a JSON object `{"name": ..., "parameters": {...}}`, after an optional
`<|python_tag|>`; several joined by `;`), `smollm2` (SmolLM2's function-calling format: `<tool_call>[{"name": ...,
"arguments": {...}}, ...]</tool_call>`; its chat template renders no tools, so the tool list goes into the system
prompt, as SmolLM2 was tuned on). A template with none of them is refused in one line before any weights load.

Which parser reads a turn (`parse_turn`): the library's, wherever the model's template has one; ours otherwise.
- The library: transformers' `tokenizer.parse_response` (transformers >= 5.13), driven by a response template: the
  tokenizer's own `response_template` (a repo's tokenizer_config ships it, or a user sets it), else the one TRL keeps
  for a chat template it knows (`trl.chat_template_utils.add_response_schema`, read on a stand-in so the caller's
  tokenizer is left as it was: Qwen2.5, Qwen3, Qwen3.5/3.6, Llama 3.1/3.2, GLM-4-MoE, Nemotron 3, gpt-oss, LFM2.5,
  Gemma 4). It is taken when a tokenizer is passed, the template has a `tool_calls` field and loads, and the format
  is not `smollm2` (there the tools are listed by us, so the model writes our format, not its template's). The turn
  is parsed as the model wrote it: the end-of-turn token the episode runner strips is put back (the template's
  closing patterns expect it, as TRL's rollouts give it), and the prefix is the template's own generation prompt.
  A turn the library cannot parse is a `problem` (the episode ends on it), never an exception.
- Ours (`hermes`, `llama3`, `smollm2` above): the fallback, kept because most templates we meet have no response
  template: SmolLM2's (its format is ours), the tiny model's, templates edited from the ones TRL knows (TRL matches
  a template by its exact text), and transformers older than 5.13 (pyproject allows 4.56+).
Where both apply, the calls agree on every reference turn; on the built turns where they do not (pinned in
tests/train/test_train_toolcalls_library.py, summed up in train/README.md) the library is mostly the stricter: Llama 3
calls only as the template writes them (one call, `{"name"` first, `"parameters"`), Qwen's blocks closed by
`</tool_call>` with one call object each. It also reads what ours cannot: Qwen3.5's XML calls, a Llama call after
text, and a `<think>` block kept out of the text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, cast

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


def parse_turn(
    text: str,
    fmt: str,
    tokenizer: PreTrainedTokenizerBase | None = None,
    tools: list[dict[str, Any]] | None = None,
) -> ParsedTurn:
    """The calls in a generated turn (`text`: decoded without its end-of-turn token); a turn without any is the
    model's answer. Read by the library when `tokenizer` has a response template (`response_template`), in `fmt`
    by our parser otherwise. `tools` (OpenAI function format) types the arguments on the library path, for templates
    that write them as text (Qwen3.5: `<parameter=a>37</parameter>` is 37 for an integer parameter)."""
    if tokenizer is not None and fmt != "smollm2":
        template = response_template(tokenizer)
        if template is not None:
            return _parse_with_library(text, tokenizer, template, tools)
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


# -- the library's parser -------------------------------------------------------------------------------------------


def response_template(tokenizer: PreTrainedTokenizerBase) -> dict[str, Any] | None:
    """The response template the library reads this tokenizer's turns with: the tokenizer's own, else TRL's for its
    chat template; None when there is none with a `tool_calls` field, it does not load, or the installed
    transformers has no template-driven `parse_response` (before 5.13): then our parser reads the turns."""
    try:
        from transformers.utils.chat_parsing.response_templates import load_response_template
    except ImportError:
        return None
    if not callable(getattr(tokenizer, "parse_response", None)):
        return None
    template = getattr(tokenizer, "response_template", None)
    if template is None and isinstance(tokenizer.chat_template, str):
        template = _trl_template(tokenizer.chat_template)
    if not isinstance(template, dict) or "tool_calls" not in (template.get("fields") or {}):
        return None
    try:
        load_response_template(template)
    except Exception:  # noqa: BLE001 - a template that does not load: our parser reads the turns instead
        return None
    return template


@lru_cache(maxsize=8)
def _trl_template(chat_template: str) -> dict[str, Any] | None:
    """TRL's response template for a chat template it knows (matched by its text), set on a stand-in."""
    try:
        from trl.chat_template_utils import add_response_schema
    except ImportError:
        return None
    stand_in = SimpleNamespace(chat_template=chat_template, response_template=None)
    try:
        add_response_schema(cast(Any, stand_in))
    except ValueError:  # a chat template TRL does not know
        return None
    found = stand_in.response_template  # None where TRL set only a legacy response_schema (transformers < 5.13)
    return found if isinstance(found, dict) else None


def _parse_with_library(
    text: str, tokenizer: PreTrainedTokenizerBase, template: dict[str, Any], tools: list[dict[str, Any]] | None
) -> ParsedTurn:
    end = tokenizer.eos_token if isinstance(tokenizer.eos_token, str) else ""
    written = text if not end or text.rstrip().endswith(end) else text + end
    try:
        options: dict[str, Any] = {"tools": tools} if tools else {}
        message = tokenizer.parse_response(written, template, prefix=_generation_prompt(tokenizer, template), **options)
    except Exception as exc:  # noqa: BLE001 - whatever the parser raises, the model wrote a call it cannot read
        reason = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
        return ParsedTurn(text.strip(), [], f"a tool call the chat template's response parser cannot read ({reason})")
    content = message.get("content") if isinstance(message, dict) else None
    content = content.strip().removesuffix(end).strip() if isinstance(content, str) else ""
    found = message.get("tool_calls") if isinstance(message, dict) else None
    if found is not None and not isinstance(found, list):
        return ParsedTurn(content, [], "the response parser read tool calls that are not a list")
    calls: list[dict[str, Any]] = []
    for item in found or []:
        function = item.get("function", item) if isinstance(item, dict) else item
        problem = _check(function, "arguments")
        if problem:
            return ParsedTurn(content, calls, problem)
        calls.append({"name": function["name"], "arguments": function.get("arguments") or {}})
    return ParsedTurn(content, calls)


def _generation_prompt(tokenizer: PreTrainedTokenizerBase, template: dict[str, Any]) -> str:
    """What the template writes of the assistant's turn before the model does (its header, a `<think>` it opens):
    the prefix the library needs. From a stand-in conversation (only what follows the last header matters), cut at
    that header; empty when the template's anchor is not found, so no prompt text can land in the turn."""
    from transformers.utils.chat_parsing.response_templates import load_response_template

    try:
        rendered = tokenizer.apply_chat_template(
            [{"role": "user", "content": "q"}], tokenize=False, add_generation_prompt=True
        )
    except Exception:  # noqa: BLE001 - a template raises what its author chose: parse without a prefix
        return ""
    if not isinstance(rendered, str):
        return ""
    anchors = list(load_response_template(template).start_anchor_re.finditer(rendered))
    return rendered[anchors[-1].start() :] if anchors else ""
