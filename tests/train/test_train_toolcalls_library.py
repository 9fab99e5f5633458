"""Tool calls read by the library (transformers' `parse_response`, with TRL's response templates) wherever a template
has one, our parser otherwise (train/toolcalls.py): where each is taken, and how far the two agree.

The agreement is measured on every turn text the suite has (test_train_toolcalls.py's, the calc tasksets' reference
episodes as TRL's Qwen/Llama templates and our fixture templates write them) and on honest and malformed turns built
here. Each disagreement is pinned with its reason (the table in train/README.md's tool-call section): a change in
either parser, or in TRL's templates, shows up here."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from groupscore.environments import load_source
from groupscore.train.demo import TASKSETS
from groupscore.train.env_tasks import reference_messages
from groupscore.train.tiny_model import TOOL_MARKERS, TOOL_TEMPLATE, build_tokenizer
from groupscore.train.toolcalls import ParsedTurn, detect_format, parse_turn, response_template

trl_templates = pytest.importorskip("trl.chat_template_utils")

DATA = Path(__file__).with_name("data")
EOS = {"qwen": "<|im_end|>", "llama": "<|eot_id|>"}
FMT = {"qwen": "hermes", "llama": "llama3"}
MUL = '{"name": "mul", "arguments": {"a": 37, "b": 45}}'
LMUL = '{"name": "mul", "parameters": {"a": 37, "b": 45}}'


def tokenizer_with(template: str, eos: str):
    tokenizer = build_tokenizer(["mul 37 45 1665 <tool_call> q r"], 64)
    tokenizer.add_tokens(TOOL_MARKERS)
    tokenizer.chat_template = template
    tokenizer.add_special_tokens({"eos_token": eos})
    return tokenizer


@pytest.fixture(scope="module")
def library():
    """A tokenizer each family as its model ships it: the chat template TRL keeps a response template for."""
    qwen = tokenizer_with(trl_templates.qwen2_5_chat_template, EOS["qwen"])
    llama = tokenizer_with(trl_templates.llama3_1_chat_template, EOS["llama"])
    assert response_template(qwen) is not None and response_template(llama) is not None
    return {"qwen": qwen, "llama": llama}


def outcome(turn: ParsedTurn) -> str:
    """What an episode does with the turn: ends on a problem, runs the calls, or takes the answer."""
    if turn.problem is not None:
        return "problem"
    if not turn.calls:
        return f"answer {turn.content!r}"
    calls = ", ".join(f"{c['name']}{json.dumps(c['arguments'], sort_keys=True)}" for c in turn.calls)
    return f"calls {calls}" + (f" text {turn.content!r}" if turn.content else "")


# (family, what the turn is, the turn as the episode runner gives it (its end-of-turn token stripped),
#  ours, the library's, why they differ ("" where they agree))
CASES = [
    # Qwen2.5/Qwen3 (`hermes`; TRL's qwen3 response template): from test_train_toolcalls.py
    (
        "qwen",
        "two blocks (suite)",
        f'<tool_call>\n{MUL}\n</tool_call>\n<tool_call>{{"name": "add", "arguments": {{}}}}</tool_call>',
        'calls mul{"a": 37, "b": 45}, add{}',
        'calls mul{"a": 37, "b": 45}, add{}',
        "",
    ),
    ("qwen", "an answer (suite)", "  \\boxed{1665} ", "answer '\\\\boxed{1665}'", "answer '\\\\boxed{1665}'", ""),
    (
        "qwen",
        "JSON cut short (suite)",
        '<tool_call>{"name": "mul", "arguments": {"a": 37,</tool_call>',
        "problem",
        "problem",
        "",
    ),
    ("qwen", "no name (suite)", '<tool_call>{"arguments": {}}</tool_call>', "problem", "problem", ""),
    (
        "qwen",
        "SmolLM2's list in a block (suite)",
        f"<tool_call>[{MUL}]</tool_call>",
        'calls mul{"a": 37, "b": 45}',
        "problem",
        "the library takes a block as one call object (the template writes one call a block); ours also reads a list",
    ),
    # Qwen: honest turns built here
    (
        "qwen",
        "the template's own layout",
        f"<tool_call>\n{MUL}\n</tool_call>",
        'calls mul{"a": 37, "b": 45}',
        'calls mul{"a": 37, "b": 45}',
        "",
    ),
    ("qwen", "no arguments key", '<tool_call>{"name": "add"}</tool_call>', "calls add{}", "calls add{}", ""),
    (
        "qwen",
        "nested arguments",
        '<tool_call>{"name": "f", "arguments": {"x": {"y": [1, "two"]}}}</tool_call>',
        'calls f{"x": {"y": [1, "two"]}}',
        'calls f{"x": {"y": [1, "two"]}}',
        "",
    ),
    (
        "qwen",
        "text, then a call",
        f"I will multiply.\n<tool_call>{MUL}</tool_call>",
        'calls mul{"a": 37, "b": 45} text \'I will multiply.\'',
        'calls mul{"a": 37, "b": 45} text \'I will multiply.\'',
        "",
    ),
    (
        "qwen",
        "text on both sides of a call",
        f"First.\n<tool_call>{MUL}</tool_call>\nThen.",
        'calls mul{"a": 37, "b": 45} text \'First.\\n\\nThen.\'',
        'calls mul{"a": 37, "b": 45} text \'Then.\'',
        "the library keeps the last stretch of text (content is one field, overwritten); the calls agree",
    ),
    (
        "qwen",
        "a <think> block, then an answer",
        "<think>37*45 is 1665</think>\n\n\\boxed{1665}",
        "answer '<think>37*45 is 1665</think>\\n\\n\\\\boxed{1665}'",
        "answer '\\\\boxed{1665}'",
        "the library keeps Qwen3's reasoning out of the answer (its reasoning_content); ours leaves it in",
    ),
    (
        "qwen",
        "a <think> block, then a call",
        f"<think>multiply</think>\n<tool_call>{MUL}</tool_call>",
        'calls mul{"a": 37, "b": 45} text \'<think>multiply</think>\'',
        'calls mul{"a": 37, "b": 45}',
        "the same: the reasoning is not the turn's text; the calls agree",
    ),
    # Qwen: malformed turns built here
    (
        "qwen",
        "a block never closed",
        f"<tool_call>{MUL}",
        'calls mul{"a": 37, "b": 45}',
        "problem",
        "the library reads up to </tool_call>: the end-of-turn token lands in the block; ours reads to the end",
    ),
    ("qwen", "cut off by the token budget", '<tool_call>{"name": "mul", "argu', "problem", "problem", ""),
    (
        "qwen",
        "arguments as a JSON string",
        '<tool_call>{"name": "mul", "arguments": "{\\"a\\": 37}"}</tool_call>',
        "problem",
        "problem",
        "",
    ),
    (
        "qwen",
        "a name that is not a string",
        '<tool_call>{"name": 5, "arguments": {}}</tool_call>',
        "problem",
        "problem",
        "",
    ),
    ("qwen", "text after the JSON in a block", f"<tool_call>{MUL} thanks</tool_call>", "problem", "problem", ""),
    (
        "qwen",
        "an argument holding </tool_call>",
        '<tool_call>{"name": "echo", "arguments": {"s": "</tool_call>"}}</tool_call>',
        "problem",
        "problem",
        "",
    ),
    (
        "qwen",
        "a stray closing tag",
        "Done </tool_call>",
        "answer 'Done </tool_call>'",
        "answer 'Done </tool_call>'",
        "",
    ),
    # Llama 3.1/3.2 (`llama3`; TRL's llama3 response template): from test_train_toolcalls.py
    (
        "llama",
        "after <|python_tag|> (suite)",
        f"<|python_tag|>{LMUL}",
        'calls mul{"a": 37, "b": 45}',
        'calls mul{"a": 37, "b": 45} text \'<|python_tag|>\'',
        "the library leaves the tag in the text (a real Llama tokenizer decodes it away: it is special); the calls agree",
    ),
    (
        "llama",
        "two calls joined by ; (suite)",
        f'{LMUL}; {{"name": "add", "parameters": {{}}}}',
        'calls mul{"a": 37, "b": 45}, add{}',
        "problem",
        "the library reads one call a turn, as Llama 3.1's template writes (it refuses to render two); ours splits on ;",
    ),
    (
        "llama",
        "an answer (suite)",
        "The answer is 1665.",
        "answer 'The answer is 1665.'",
        "answer 'The answer is 1665.'",
        "",
    ),
    # Llama: honest turns built here
    ("llama", "the template's own layout", LMUL, 'calls mul{"a": 37, "b": 45}', 'calls mul{"a": 37, "b": 45}', ""),
    ("llama", "compact JSON", '{"name":"mul","parameters":{"a":37}}', 'calls mul{"a": 37}', 'calls mul{"a": 37}', ""),
    ("llama", "a newline first", f"\n{LMUL}", 'calls mul{"a": 37, "b": 45}', 'calls mul{"a": 37, "b": 45}', ""),
    (
        "llama",
        "arguments, not parameters",
        MUL,
        'calls mul{"a": 37, "b": 45}',
        f"answer {MUL!r}",
        'the library reads only the template\'s "parameters" (anything else is the answer); ours takes "arguments" too',
    ),
    (
        "llama",
        "parameters before name",
        '{"parameters": {"a": 1}, "name": "mul"}',
        'calls mul{"a": 1}',
        'answer \'{"parameters": {"a": 1}, "name": "mul"}\'',
        'the library reads "name" first, as the template writes; ours reads the keys in any order',
    ),
    (
        "llama",
        "a space inside the brace",
        '{ "name": "mul", "parameters": {"a": 1}}',
        'calls mul{"a": 1}',
        'answer \'{ "name": "mul", "parameters": {"a": 1}}\'',
        'the library matches the template\'s `{"name"` exactly; ours parses any JSON',
    ),
    (
        "llama",
        "text, then a call",
        f"Let me multiply. {LMUL}",
        f"answer 'Let me multiply. {LMUL}'",
        'calls mul{"a": 37, "b": 45} text \'Let me multiply.\'',
        "the library finds a call after text; ours reads a call only when the turn is the JSON",
    ),
    # Llama: malformed turns built here
    ("llama", "JSON cut short", '{"name": "mul", "parameters": {"a": 37,', "problem", "problem", ""),
    (
        "llama",
        "no name",
        '{"parameters": {}}',
        "problem",
        "answer '{\"parameters\": {}}'",
        'the library\'s call starts at `{"name"`, so a nameless object is text (the episode takes it as the answer)',
    ),
    ("llama", "text after the JSON", f"{LMUL} Done", "problem", "problem", ""),
    ("llama", "parameters not an object", '{"name": "mul", "parameters": [1, 2]}', "problem", "problem", ""),
    (
        "llama",
        "cut off before its parameters",
        '{"name": "mul", "param',
        "problem",
        'answer \'{"name": "mul", "param\'',
        'the library\'s call starts at `"parameters":`, so it is text; the budget ended the episode either way',
    ),
    ("llama", "cut off in its parameters", '{"name": "mul", "parameters": {"a": 3', "problem", "problem", ""),
]


@pytest.mark.parametrize(
    ("family", "what", "text", "ours", "theirs", "why"), CASES, ids=[f"{c[0]}: {c[1]}" for c in CASES]
)
def test_the_library_and_our_parser_agree_or_the_difference_is_pinned(library, family, what, text, ours, theirs, why):
    mine = outcome(parse_turn(text, FMT[family]))
    libs = outcome(parse_turn(text, FMT[family], library[family]))
    assert (mine, libs) == (ours, theirs)
    assert (mine == libs) == (why == ""), "a case is a disagreement exactly when it gives a reason"


def test_the_table_counts():
    differ = [c for c in CASES if c[5]]
    assert (len(CASES), len(differ)) == (35, 13)


def reference_turns(template: str, eos: str) -> list[str]:
    """Every assistant turn of the calc tasksets' reference episodes as the template writes it, cut where the
    model's turn ends (its end-of-turn token), as the episode runner decodes it."""
    tokenizer = tokenizer_with(template, eos)
    turns = []
    for name in ("train.yaml", "heldout.yaml"):
        for task in load_source(str(TASKSETS / "calc" / name)):
            messages = list(task.turns[0].messages)
            for message in reference_messages(task):
                if message["role"] == "assistant":
                    before = tokenizer.apply_chat_template(messages, tokenize=False)
                    header = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
                    header = header[len(before) :]
                    turn = tokenizer.apply_chat_template([*messages, message], tokenize=False)[len(before) :]
                    # llama3_style.jinja writes a call turn's header without its blank line: cut either
                    turn = turn.removeprefix(header) if turn.startswith(header) else turn.removeprefix(header.rstrip())
                    turns.append(turn.split(eos)[0])
                messages.append(message)
    return turns


THINK = re.compile(r"^<think>.*?</think>\s*", re.DOTALL)


@pytest.mark.parametrize(
    ("family", "template", "reasoning"),
    [
        ("qwen", trl_templates.qwen2_5_chat_template, 0),
        ("qwen", trl_templates.qwen3_chat_template, 1000),
        ("qwen", (DATA / "qwen25_style.jinja").read_text(encoding="utf-8"), 0),
        ("qwen", TOOL_TEMPLATE, 0),
        ("llama", trl_templates.llama3_1_chat_template, 0),
        ("llama", (DATA / "llama3_style.jinja").read_text(encoding="utf-8"), 0),
    ],
    ids=["qwen2.5", "qwen3", "qwen25_style fixture", "tiny model", "llama3.1", "llama3_style fixture"],
)
def test_on_every_reference_turn_the_two_agree(library, family, template, reasoning):
    """The calls agree on all 1,000 turns (500 calls, 500 answers) of each; the text differs only where Qwen3's
    template writes an empty <think></think> before the turn (the library keeps it out of the text)."""
    eos = "</s>" if template == TOOL_TEMPLATE else EOS[family]
    turns = reference_turns(template, eos)
    assert len(turns) == 1000
    differ = 0
    for text in turns:
        mine, theirs = parse_turn(text, FMT[family]), parse_turn(text, FMT[family], library[family])
        assert (mine.calls, mine.problem) == (theirs.calls, theirs.problem) and theirs.problem is None
        differ += mine.content != theirs.content
        assert THINK.sub("", mine.content) == theirs.content
    assert sum(bool(parse_turn(t, FMT[family]).calls) for t in turns) == 500 and differ == reasoning


# -- the library's path is taken where it should be ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "eos"),
    [
        ("qwen2_5_chat_template", "<|im_end|>"),
        ("qwen3_chat_template", "<|im_end|>"),
        ("qwen3_instruct_2507_chat_template", "<|im_end|>"),
        ("qwen3_5_nothink_chat_template", "<|im_end|>"),
        ("qwen3_6_chat_template", "<|im_end|>"),
        ("llama3_1_chat_template", "<|eot_id|>"),
        ("llama3_2_chat_template", "<|eot_id|>"),
    ],
)
def test_the_templates_trl_knows_and_we_detect_are_read_by_the_library(name, eos):
    tokenizer = tokenizer_with(getattr(trl_templates, name), eos)
    assert detect_format(tokenizer) in ("hermes", "llama3")
    assert "tool_calls" in (response_template(tokenizer) or {}).get("fields", {})
    assert tokenizer.response_template is None  # read on a stand-in: the caller's tokenizer is left as it was


@pytest.mark.parametrize(
    ("template", "eos"),
    [
        ((DATA / "smollm2.jinja").read_text(encoding="utf-8"), "<|im_end|>"),
        ((DATA / "qwen25_style.jinja").read_text(encoding="utf-8"), "<|im_end|>"),
        ((DATA / "llama3_style.jinja").read_text(encoding="utf-8"), "<|eot_id|>"),
        (TOOL_TEMPLATE, "</s>"),
    ],
    ids=["smollm2", "qwen25_style fixture", "llama3_style fixture", "tiny model"],
)
def test_templates_without_a_response_template_fall_back_to_ours(template, eos):
    tokenizer = tokenizer_with(template, eos)
    assert response_template(tokenizer) is None
    assert parse_turn(f"<tool_call>{MUL}", "hermes", tokenizer).calls == [
        {"name": "mul", "arguments": {"a": 37, "b": 45}}
    ]


QWEN35_CALL = "<tool_call>\n<function=mul>\n<parameter=a>\n37\n</parameter>\n<parameter=b>\n45\n</parameter>\n</function>\n</tool_call>"
MUL_TOOL = {
    "type": "function",
    "function": {
        "name": "mul",
        "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
    },
}


def test_qwen35s_xml_calls_only_the_library_reads():
    tokenizer = tokenizer_with(trl_templates.qwen3_5_nothink_chat_template, "<|im_end|>")
    assert detect_format(tokenizer) == "hermes"  # its template has <tool_call>: our parser would read JSON there
    assert parse_turn(QWEN35_CALL, "hermes").problem is not None
    assert parse_turn(QWEN35_CALL, "hermes", tokenizer).calls == [{"name": "mul", "arguments": {"a": "37", "b": "45"}}]
    typed = parse_turn(QWEN35_CALL, "hermes", tokenizer, tools=[MUL_TOOL])
    assert typed.calls == [{"name": "mul", "arguments": {"a": 37, "b": 45}}] and typed.problem is None


def test_a_think_template_s_prefilled_reasoning_stays_out_of_the_answer():
    """Qwen3.5's thinking template opens <think> in the generation prompt: the library reads it from the prefix."""
    tokenizer = tokenizer_with(trl_templates.qwen3_5_think_chat_template, "<|im_end|>")
    turn = parse_turn("37*45 is 1665</think>\n\n\\boxed{1665}", "hermes", tokenizer)
    assert turn.content == "\\boxed{1665}" and turn.calls == [] and turn.problem is None


def test_a_tokenizers_own_response_template_is_used(monkeypatch):
    """A tokenizer that ships a response template (as a Qwen3 user's would, or Gemma 4's repos do) is read with it,
    even under a chat template TRL does not know."""
    tokenizer = tokenizer_with((DATA / "qwen25_style.jinja").read_text(encoding="utf-8"), "<|im_end|>")
    tokenizer.response_template = trl_templates.qwen3_template
    seen = []
    parse = tokenizer.parse_response
    monkeypatch.setattr(tokenizer, "parse_response", lambda *a, **k: seen.append(a[0]) or parse(*a, **k))
    turn = parse_turn(f"<think>x</think>{MUL.join(['<tool_call>', '</tool_call>'])}", "hermes", tokenizer)
    assert turn.calls == [{"name": "mul", "arguments": {"a": 37, "b": 45}}] and turn.content == ""
    assert seen == [f"<think>x</think><tool_call>{MUL}</tool_call><|im_end|>"]  # the end-of-turn token put back


def test_a_response_template_without_tool_calls_or_that_does_not_load_is_not_used():
    tokenizer = tokenizer_with((DATA / "qwen25_style.jinja").read_text(encoding="utf-8"), "<|im_end|>")
    tokenizer.response_template = trl_templates.deepseek_r1_distill_template  # reasoning and content, no calls
    assert response_template(tokenizer) is None
    tokenizer.response_template = {"fields": {"tool_calls": {"open": "<tool_call>", "content": "no-such-parser"}}}
    assert response_template(tokenizer) is None
    assert parse_turn(f"<tool_call>{MUL}</tool_call>", "hermes", tokenizer).calls[0]["name"] == "mul"


def test_smollm2s_format_is_ours_even_with_a_response_template(monkeypatch):
    tokenizer = tokenizer_with(trl_templates.qwen2_5_chat_template, "<|im_end|>")
    monkeypatch.setattr(tokenizer, "parse_response", lambda *a, **k: pytest.fail("the library read a SmolLM2 turn"))
    assert parse_turn(f"<tool_call>[{MUL}]</tool_call>", "smollm2", tokenizer).calls[0]["name"] == "mul"


@pytest.mark.parametrize(
    "error", [ValueError("json parser could not parse\nContent: x"), KeyError("x"), RuntimeError()]
)
def test_whatever_the_library_raises_is_a_problem_not_an_exception(monkeypatch, error):
    tokenizer = tokenizer_with(trl_templates.qwen2_5_chat_template, "<|im_end|>")

    def broken(*args, **kwargs):
        raise error

    monkeypatch.setattr(tokenizer, "parse_response", broken)
    turn = parse_turn(f"<tool_call>{MUL}</tool_call>", "hermes", tokenizer)
    assert turn.calls == [] and "response parser cannot read" in (turn.problem or "") and "\n" not in turn.problem
