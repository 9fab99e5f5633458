"""The schema's table of each kind's fields agrees with the registry's item models (it is written out because the
schema may not import the verifiers), and the column check reads it."""

from __future__ import annotations

import pytest

from groupscore.schema.columns import BASE_FIELDS, KIND_FIELDS, NEEDED_FIELDS, MissingColumn, check_columns
from groupscore.schema.reward import KIND_NAMES
from groupscore.verifiers.registry import KINDS, parse_item, score_item


def test_tables_name_every_kind_in_wire_order():
    assert tuple(KINDS) == KIND_NAMES
    assert tuple(KIND_FIELDS) == KIND_NAMES
    assert tuple(NEEDED_FIELDS) == KIND_NAMES


def test_base_fields_are_those_every_item_model_has():
    for kind in KINDS.values():
        assert set(kind.item_model.model_fields) >= BASE_FIELDS, kind.name


@pytest.mark.parametrize("name", KIND_NAMES)
def test_kind_fields_match_the_item_model(name):
    model = KINDS[name].item_model
    assert KIND_FIELDS[name] == tuple(f for f in model.model_fields if f not in BASE_FIELDS)


@pytest.mark.parametrize("name", KIND_NAMES)
def test_needed_fields_are_the_required_ones_and_real_fields(name):
    model = KINDS[name].item_model
    required = {f for f, info in model.model_fields.items() if info.is_required() and f not in BASE_FIELDS}
    singles = {group[0] for group in NEEDED_FIELDS[name] if len(group) == 1}
    assert singles == required
    for group in NEEDED_FIELDS[name]:
        assert set(group) <= set(KIND_FIELDS[name]), group
        if len(group) > 1:  # a choice of fields: none of them is required on its own
            assert not set(group) & required, group


def test_code_without_any_tests_is_an_error_verdict():
    # The one need no model field states: the table's ("tests", "hidden_tests") group stands for this behaviour.
    verdict = score_item(parse_item({"verifier": "code", "completion": "```python\nprint(1)\n```"}))
    assert verdict.status == "error"


def test_check_columns_names_the_field_and_the_fix():
    items = [{"verifier": "math", "id": 0, "completion": "4"}]
    with pytest.raises(
        MissingColumn, match=r"the math reward needs the field 'answer'.*fix: map \{'answer': 'solution'\}"
    ):
        check_columns("adapter", items, ["prompt", "solution"], "map {mapping}")
    check_columns("adapter", [{**items[0], "answer": "4"}], ["answer"], "map {mapping}")  # present: no error
    check_columns("adapter", [{"verifier": "nope", "completion": ""}], [], "{mapping}")  # unknown kind: left alone
    check_columns(
        "adapter",
        [{"verifier": "code", "completion": "", "hidden_tests": [{"stdin": "", "stdout": ""}]}],
        ["hidden_tests"],
        "{mapping}",
    )  # either list of tests will do
