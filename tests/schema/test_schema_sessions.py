"""The session requests' wire schema bounds every field itself (schema/sessions.py): names hold no control character
or lone surrogate, lengths and the nesting of a call's arguments are bounded, the model's own text is taken as it is,
each refusal is one line naming no more than the rule, and the bounds show in the JSON schema (hence in OpenAPI)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from groupscore.schema.sessions import (
    MAX_ARGUMENT_DEPTH,
    MAX_ARGUMENT_VALUES,
    MAX_MESSAGE,
    MAX_TASK_ADDRESS,
    OpenSessions,
    ScoreSessionRequest,
    StepRequest,
    ToolCall,
    arguments_problem,
    task_address_problem,
)


def nested(depth: int) -> dict:
    """Arguments `depth` containers deep, the arguments object counted."""
    value: object = "leaf"
    for _ in range(depth - 1):
        value = [value]
    return {"a": value}


def refusal(model, data) -> tuple[tuple, str]:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(data)
    [error] = caught.value.errors()
    assert "\n" not in error["msg"]
    return error["loc"], error["msg"]


@pytest.mark.parametrize(
    ("address", "words"),
    [
        ("demo\x00:count-errors", "NUL character (U+0000) at character 4"),
        ("demo:count-errors\n", "control character (U+000A)"),
        ("demo:\x85x", "control character (U+0085)"),
        ("\ud800:x", "lone surrogate (U+D800) at character 0"),
        ("a" * (MAX_TASK_ADDRESS + 1), f"at most {MAX_TASK_ADDRESS} characters"),
        ("nowhere", "SOURCE:TASK_ID"),
        ("demo:", "SOURCE:TASK_ID"),
        (":x", "SOURCE:TASK_ID"),
    ],
)
def test_a_bad_task_address_is_refused_in_one_line(address, words):
    problem = task_address_problem(address)
    assert problem is not None and words in problem and "\n" not in problem
    assert refusal(OpenSessions, {"task": address}) == (("task",), problem)


def test_good_addresses_pass_and_a_long_address_is_not_echoed():
    for address in ("demo:count-errors", "bfcl/multi_turn_base:multi_turn_base_0", "/data/t.jsonl:t1", "a:b:c"):
        assert task_address_problem(address) is None
        assert OpenSessions(task=address).task == address
    assert len(task_address_problem("x" * 10_000_000) or "") < 100
    assert task_address_problem(None) is not None


@pytest.mark.parametrize(
    ("data", "loc", "words"),
    [
        ({"task": "demo:x", "client": "\udc80"}, ("client",), "lone surrogate"),
        ({"task": "demo:x", "client": "a\x00"}, ("client",), "NUL character"),
        ({"task": "demo:x", "client": ""}, ("client",), "at least 1 character"),
        ({"task": "demo:x", "client": "c" * 257}, ("client",), "at most 256 characters"),
        ({"task": "demo:x", "seed": 2**64}, ("seed",), "less than or equal to"),
        ({"task": "demo:x", "count": 0}, ("count",), "greater than or equal to 1"),
    ],
)
def test_an_open_requests_other_fields_are_bounded(data, loc, words):
    got_loc, msg = refusal(OpenSessions, data)
    assert got_loc == loc and words in msg


@pytest.mark.parametrize(
    ("name", "words"),
    [("\ud800", "lone surrogate"), ("shell\n", "control character"), ("", "at least 1 character"), ("n" * 201, "201")],
)
def test_a_tool_name_is_a_name(name, words):
    loc, msg = refusal(StepRequest, {"call": {"name": name}})
    assert loc == ("call", "name") and words in msg


def test_arguments_are_bounded_in_depth_and_values_but_their_text_is_the_tools_to_judge():
    assert ToolCall(name="f", arguments=nested(MAX_ARGUMENT_DEPTH)).arguments == nested(MAX_ARGUMENT_DEPTH)
    assert refusal(ToolCall, {"name": "f", "arguments": nested(MAX_ARGUMENT_DEPTH + 1)}) == (
        ("arguments",),
        f"nested more than {MAX_ARGUMENT_DEPTH} levels deep",
    )
    assert "values" in refusal(ToolCall, {"name": "f", "arguments": {"a": [0] * MAX_ARGUMENT_VALUES}})[1]
    assert arguments_problem(nested(100_000)) is not None  # the walk itself does not recurse
    odd = {"command": "echo \ud800 \x00", "\udc80": {"x": ["\x1b"]}}
    assert ToolCall(name="shell", arguments=odd).arguments == odd
    assert refusal(ToolCall, {"name": "f", "arguments": []})[0] == ("arguments",)


def test_the_models_own_text_is_taken_as_written_up_to_its_bound():
    for text in ("", "I wrote it.", "a\x00b \ud800 \x1b[0m", "x" * MAX_MESSAGE):
        assert StepRequest(message=text).message == text
        assert ScoreSessionRequest(final_message=text).final_message == text
    loc, msg = refusal(ScoreSessionRequest, {"final_message": "x" * (MAX_MESSAGE + 1)})
    assert loc == ("final_message",) and f"at most {MAX_MESSAGE} characters" in msg
    assert refusal(StepRequest, {"message": 5})[0] == ("message",)


def test_the_bounds_show_in_the_json_schema():
    task = OpenSessions.model_json_schema()["properties"]["task"]
    assert task["maxLength"] == MAX_TASK_ADDRESS and ":" in task["pattern"]
    client = OpenSessions.model_json_schema()["properties"]["client"]["anyOf"][0]
    assert client["maxLength"] == 256 and client["pattern"].startswith("^[^\\u0000")
    seed = OpenSessions.model_json_schema()["properties"]["seed"]
    assert seed["maximum"] == 2**63 - 1 and seed["minimum"] == -(2**63)
    call = ToolCall.model_json_schema()["properties"]
    assert call["name"]["maxLength"] == 200 and str(MAX_ARGUMENT_DEPTH) in call["arguments"]["description"]
    assert (
        ScoreSessionRequest.model_json_schema()["properties"]["final_message"]["anyOf"][0]["maxLength"] == MAX_MESSAGE
    )
