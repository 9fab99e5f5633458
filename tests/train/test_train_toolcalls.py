"""Tool calls read in each chat template's own format, the format found from the template, and the tool results'
text taken from the template (train/toolcalls.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from groupscore.train.tiny_model import TOOL_MARKERS, TOOL_TEMPLATE, build_tokenizer
from groupscore.train.toolcalls import NoToolSupport, detect_format, parse_turn, render, suffix_after_turn

DATA = Path(__file__).with_name("data")
CALL = {"name": "mul", "arguments": {"a": 37, "b": 45}}


def tokenizer_with(template: str | None, eos: str = "</s>"):
    tokenizer = build_tokenizer(["mul 37 45 1665 <tool_call> q r"], 64)
    tokenizer.add_tokens(TOOL_MARKERS)
    tokenizer.chat_template = template
    tokenizer.add_special_tokens({"eos_token": eos})
    return tokenizer


def template(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def test_qwen_and_hermes_calls_are_read_one_block_a_call():
    text = '<tool_call>\n{"name": "mul", "arguments": {"a": 37, "b": 45}}\n</tool_call>\n<tool_call>{"name": "add", "arguments": {}}</tool_call>'
    turn = parse_turn(text, "hermes")
    assert turn.calls == [CALL, {"name": "add", "arguments": {}}] and turn.problem is None and turn.content == ""


def test_smollm2_calls_are_a_json_list_in_one_block():
    turn = parse_turn('<tool_call>[{"name": "mul", "arguments": {"a": 37, "b": 45}}]</tool_call>', "smollm2")
    assert turn.calls == [CALL]


def test_llama3_calls_are_the_turn_as_json_with_parameters():
    assert parse_turn('<|python_tag|>{"name": "mul", "parameters": {"a": 37, "b": 45}}', "llama3").calls == [CALL]
    two = parse_turn('{"name": "mul", "parameters": {"a": 37, "b": 45}}; {"name": "add", "parameters": {}}', "llama3")
    assert [c["name"] for c in two.calls] == ["mul", "add"]
    assert parse_turn("The answer is 1665.", "llama3").calls == []


@pytest.mark.parametrize("fmt", ["hermes", "smollm2"])
def test_a_turn_without_a_call_is_the_answer_and_a_broken_call_says_why(fmt):
    answer = parse_turn("  \\boxed{1665} ", fmt)
    assert answer.calls == [] and answer.content == "\\boxed{1665}" and answer.problem is None
    broken = parse_turn('<tool_call>{"name": "mul", "arguments": {"a": 37,</tool_call>', fmt)
    assert broken.calls == [] and "not JSON" in (broken.problem or "")
    nameless = parse_turn('<tool_call>{"arguments": {}}</tool_call>', fmt)
    assert "name" in (nameless.problem or "")


@pytest.mark.parametrize(
    ("name", "eos", "fmt"),
    [
        ("qwen25_style.jinja", "<|im_end|>", "hermes"),
        ("llama3_style.jinja", "<|eot_id|>", "llama3"),
        ("smollm2.jinja", "<|im_end|>", "smollm2"),
    ],
)
def test_the_format_is_read_from_the_template(name, eos, fmt):
    assert detect_format(tokenizer_with(template(name), eos)) == fmt


def test_the_tiny_models_tool_template_is_qwens_format():
    assert detect_format(tokenizer_with(TOOL_TEMPLATE)) == "hermes"


@pytest.mark.parametrize(
    "text", [None, "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>{% endfor %}"]
)
def test_a_template_without_tool_support_is_one_clear_line(text):
    with pytest.raises(NoToolSupport) as caught:
        detect_format(tokenizer_with(text))
    assert "\n" not in str(caught.value) and "tool" in str(caught.value)


def test_a_named_format_overrides_the_template():
    plain = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>{% endfor %}"
    assert detect_format(tokenizer_with(plain), "hermes") == "hermes"


def test_tool_results_come_back_as_the_templates_own_text_after_the_end_of_turn_token():
    qwen = tokenizer_with(template("qwen25_style.jinja"), "<|im_end|>")
    suffix = suffix_after_turn(qwen, "hermes", ["1665"])
    assert suffix == "\n<|im_start|>user\n<tool_response>\n1665\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    llama = tokenizer_with(template("llama3_style.jinja"), "<|eot_id|>")
    assert suffix_after_turn(llama, "llama3", ["1665"]).startswith("<|start_header_id|>ipython<|end_header_id|>")


def test_smollm2_gets_its_tools_in_the_system_prompt():
    smol = tokenizer_with(template("smollm2.jinja"), "<|im_end|>")
    tool = {"type": "function", "function": {"name": "mul", "description": "Multiply.", "parameters": {}}}
    text = render(smol, [{"role": "user", "content": "37*45="}], [tool], "smollm2")
    assert "<tools>" in text and '"name": "mul"' in text and text.endswith("<|im_start|>assistant\n")
