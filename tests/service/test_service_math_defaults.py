"""A service-wide default for the math item's conventions (GROUPSCORE_MATH_DEFAULTS): applied where an item leaves the
option out, never over an item's own value; a bad default stops the service at start-up in one line naming the fix."""

from __future__ import annotations

import httpx
import pytest

from groupscore.service.embedded import start_embedded
from groupscore.service.settings import Settings

PERCENT = {"verifier": "math", "completion": "The discount is $\\boxed{25\\%}$.", "answer": "0.25"}


def test_a_server_default_applies_where_the_item_leaves_the_option_out_and_never_over_the_items_own():
    with start_embedded(workers=1, env={"GROUPSCORE_MATH_DEFAULTS": '{"percent": "fraction"}'}) as url:
        items = [
            PERCENT,
            {**PERCENT, "percent": "number"},
            {"verifier": "format", "completion": "<a>x</a>", "tags": ["a"]},
        ]
        results = httpx.post(f"{url}/v1/score", json={"items": items}, timeout=120).json()["results"]
    assert [r["reward"] for r in results[:2]] == [1.0, 0.0]
    assert results[2]["reward"] == 1.0, results[2]  # other kinds get no math options (an extra field would be refused)


def test_without_a_server_default_the_items_default_holds():
    assert Settings(math_defaults="").math_default_options() == {}
    assert Settings(math_defaults='{"profile": "math_verify"}').math_default_options() == {"profile": "math_verify"}


@pytest.mark.parametrize(
    "value,words",
    [
        ("{not json", "not JSON"),
        ('["percent"]', "must be a JSON object"),
        ('{"answer": "1"}', "answer cannot have a server default"),
        ('{"percent": "half"}', "percent"),
    ],
)
def test_a_bad_server_default_is_one_line_naming_the_field_and_the_fix(value, words):
    with pytest.raises(ValueError) as error:
        Settings(math_defaults=value)
    message = str(error.value)
    assert words in message and "\n" not in message and "math_defaults" in message
