"""The service's JSON codec (orjson with a standard-library fallback) and the per-batch metric tallies."""

from __future__ import annotations

import json

import pytest

from groupscore.schema import codec
from groupscore.service.metrics import ServiceMetrics


def test_codec_round_trips_a_verdict_payload():
    payload = {
        "results": [
            {
                "id": 0,
                "reward": 1.0,
                "status": "correct",
                "extracted": "\\frac{1}{2}",
                "reason": "ü",
                "components": None,
                "details": {"method": "numeric"},
            }
        ]
    }
    assert codec.loads(codec.dumps(payload)) == payload
    assert json.loads(codec.dumps(payload)) == payload


def test_codec_writes_what_orjson_refuses_through_the_standard_library():
    assert json.loads(codec.dumps({"big": 2**70})) == {"big": 2**70}
    assert json.loads(codec.dumps({1: "int key"})) == {"1": "int key"}
    assert json.loads(codec.dumps({"s": "\ud800"})) == {"s": "\ud800"}


def test_codec_reads_every_body_the_standard_library_reads():
    assert codec.loads(b'{"n": 123456789012345678901234567890, "s": "\\ud800"}') == {
        "n": 123456789012345678901234567890,
        "s": "\ud800",
    }
    with pytest.raises(json.JSONDecodeError):  # FastAPI turns this into a 422
        codec.loads(b'{"items": [')


def test_nan_is_written_as_null_not_as_invalid_json():
    assert codec.dumps({"x": float("nan")}) == b'{"x":null}'


def test_count_verdicts_tallies_per_kind_and_status():
    metrics = ServiceMetrics()
    raws = [{"verifier": "math"}] * 3 + [{"verifier": "code"}, "not an item", {"verifier": "no-such-kind"}]
    verdicts = [
        {"status": "correct"},
        {"status": "incorrect"},
        {"status": "timeout", "details": {}},
        {"status": "infra_error", "reason": "sandbox unavailable: no nsjail", "details": {"infra": "sandbox"}},
        {"status": "error"},
        {"status": "infra_error", "details": {"infra": "service_deadline", "service_deadline": True}},
    ]
    metrics.count_verdicts(raws, verdicts)
    sample = metrics.registry.get_sample_value
    assert sample("groupscore_items_total", {"verifier": "math", "status": "correct"}) == 1
    assert sample("groupscore_items_total", {"verifier": "math", "status": "timeout"}) == 1
    assert sample("groupscore_items_total", {"verifier": "code", "status": "infra_error"}) == 1
    assert sample("groupscore_items_total", {"verifier": "invalid", "status": "error"}) == 1
    assert sample("groupscore_items_total", {"verifier": "invalid", "status": "infra_error"}) == 1
    assert sample("groupscore_item_timeouts_total", {"cause": "verifier"}) == 1  # infra errors are not timeouts
    assert sample("groupscore_infra_errors_total", {"cause": "sandbox"}) == 1
    assert sample("groupscore_infra_errors_total", {"cause": "service_deadline"}) == 1
    assert sample("groupscore_sandbox_failures_total") == 1
