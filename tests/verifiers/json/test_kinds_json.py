"""The JSON verifier: find the document, parse strict JSON, validate against the item's schema; never fetch, never hang."""

from __future__ import annotations

import time

import pytest
from pydantic import ValidationError

from groupscore.schema.verdict import Status
from groupscore.verifiers.registry import describe_error, parse_item, score_item

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "age": {"type": "integer", "minimum": 0},
        "email": {"type": "string"},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}


def score(completion: str, **fields):
    return score_item(parse_item({"verifier": "json", "completion": completion, **fields}))


def fenced(body: str, tag: str = "json") -> str:
    return f"Here is the record:\n```{tag}\n{body}\n```\nLet me know if you need more."


def test_valid_document_in_a_json_block():
    verdict = score(fenced('{"name": "Ada", "age": 36}'), json_schema=PERSON)
    assert (verdict.reward, verdict.status) == (1.0, Status.correct)


def test_raw_completion_without_a_block():
    assert score('  {"name": "Ada", "age": 36}\n', json_schema=PERSON).reward == 1.0


def test_last_json_block_wins_over_earlier_and_bare_blocks():
    completion = fenced('{"name": "", "age": -1}') + "\nCorrected:\n" + fenced('{"name": "Ada", "age": 36}')
    assert score(completion, json_schema=PERSON).reward == 1.0
    labelled_first = fenced('{"name": "Ada", "age": 36}') + fenced("not json", tag="")
    assert score(labelled_first, json_schema=PERSON).reward == 1.0  # a ```json block beats a bare one


def test_fenced_mode_needs_a_block():
    verdict = score('{"name": "Ada", "age": 36}', json_schema=PERSON, extract="fenced")
    assert (verdict.reward, verdict.status) == (0.0, Status.no_answer)


def test_raw_mode_ignores_blocks():
    assert score(fenced('{"name": "Ada", "age": 36}'), json_schema=PERSON, extract="raw").status == Status.unparsable


@pytest.mark.parametrize(
    "body",
    [
        '{"name": "Ada", "age": 36,}',  # trailing comma
        "{'name': 'Ada'}",  # single quotes
        '{"x": NaN}',
        '{"x": Infinity}',  # not JSON, although Python's json accepts them by default
        "[" * 50_000,  # nested beyond any recursion limit
        "1" * 5_000,  # integer longer than Python converts
    ],
)
def test_unparsable_documents(body):
    verdict = score(body)
    assert (verdict.reward, verdict.status) == (0.0, Status.unparsable)


def test_parse_only_without_schema():
    assert score("[1, 2, 3]").reward == 1.0
    assert score("   ").status == Status.no_answer


@pytest.mark.parametrize(
    "body, where",
    [
        ('{"name": "Ada"}', "'age' is a required property"),
        ('{"name": "Ada", "age": "36"}', "age: "),
        ('{"name": "Ada", "age": 36, "extra": 1}', "Additional properties"),
        ('["Ada", 36]', "is not of type 'object'"),
    ],
)
def test_schema_violations_score_zero_with_the_reason(body, where):
    verdict = score(body, json_schema=PERSON)
    assert (verdict.reward, verdict.status) == (0.0, Status.incorrect)
    assert where in verdict.reason


def test_partial_credit_counts_valid_declared_properties():
    # 3 declared properties; age invalid -> 2/3.
    assert score('{"name": "Ada", "age": -1}', json_schema=PERSON, partial_credit=True).reward == pytest.approx(2 / 3)
    # An extra key is a document-level error: 3 of 4 checks pass.
    extra = score('{"name": "Ada", "age": 1, "x": 0}', json_schema=PERSON, partial_credit=True)
    assert extra.reward == pytest.approx(3 / 4) and extra.status == Status.partial
    # Not an object at all: nothing to credit.
    assert score("[]", json_schema=PERSON, partial_credit=True).reward == 0.0


def test_internal_refs_resolve_and_remote_refs_are_never_fetched():
    schema = {"$defs": {"pos": {"type": "integer", "minimum": 1}}, "type": "array", "items": {"$ref": "#/$defs/pos"}}
    assert score("[1, 2]", json_schema=schema).reward == 1.0
    assert score("[1, 0]", json_schema=schema).reward == 0.0
    remote = score("{}", json_schema={"$ref": "https://example.invalid/schema.json"})
    assert remote.status == Status.error and "Unresolv" in remote.reason


def test_regex_schema_validates_in_a_worker():
    schema = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{2}$"}}}
    assert score('{"code": "ABC-12"}', json_schema=schema, timeout_s=60).reward == 1.0
    assert score('{"code": "abc-12"}', json_schema=schema, timeout_s=60).reward == 0.0


def test_catastrophic_schema_pattern_times_out_within_budget():
    score('{"s": "a"}', json_schema={"properties": {"s": {"pattern": "^a$"}}}, timeout_s=60)  # start a worker first
    schema = {"properties": {"s": {"type": "string", "pattern": "^(a+)+$"}}}
    start = time.perf_counter()
    verdict = score('{"s": "' + "a" * 40 + '!"}', json_schema=schema, timeout_s=1.0)
    assert (verdict.reward, verdict.status) == (0.0, Status.timeout)
    assert time.perf_counter() - start < 10.0


def test_quadratic_unique_items_check_is_bounded_too():
    score("[1]", json_schema={"uniqueItems": True}, timeout_s=60)  # start a worker first
    document = "[" + ", ".join(f'{{"k": {i}}}' for i in range(20_000)) + "]"  # pairwise comparison of objects
    start = time.perf_counter()
    verdict = score(document, json_schema={"type": "array", "uniqueItems": True}, timeout_s=1.0)
    assert (verdict.reward, verdict.status) == (0.0, Status.timeout)
    assert time.perf_counter() - start < 10.0
    assert score('[{"k": 1}, {"k": 1}]', json_schema={"uniqueItems": True}, timeout_s=60).reward == 0.0


@pytest.mark.parametrize(
    "fields, path",
    [
        ({"json_schema": {"type": "nonsense"}}, "json.json_schema"),
        ({"json_schema": {"minimum": "zero"}}, "json.json_schema"),
        ({"json_schema": [1]}, "json.json_schema"),
        ({"extract": "yaml"}, "json.extract"),
        ({"timeout_s": 0}, "json.timeout_s"),
    ],
)
def test_bad_fields_are_validation_errors_with_the_field_path(fields, path):
    with pytest.raises(ValidationError) as info:
        parse_item({"verifier": "json", "completion": "{}", **fields})
    assert describe_error(info.value).startswith(path + ":")
