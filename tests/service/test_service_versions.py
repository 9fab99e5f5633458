"""The service says which verifier versions judge: /v1/verifiers lists them, every verdict it returns carries one."""

from __future__ import annotations

import pytest

from groupscore.verifiers.registry import KINDS, VERSIONS

pytestmark = pytest.mark.service(workers=1)  # the `url` and `http` fixtures (conftest.py)


def test_verifiers_endpoint_lists_each_kinds_version(http):
    listed = {v["name"]: v["version"] for v in http.get("/v1/verifiers").json()["verifiers"]}
    assert listed == {name: VERSIONS[name] for name in KINDS}
    schema = http.get("/openapi.json").json()["components"]["schemas"]
    assert "version" in schema["VerifierInfo"]["required"]


def test_scored_verdicts_carry_their_verifier_version(http):
    items = [
        {"id": 1, "verifier": "math", "completion": "\\boxed{4}", "answer": "4"},
        {"id": 2, "verifier": "format", "completion": "<answer>4</answer>", "tags": ["answer"]},
        {"id": 3, "verifier": "math", "completion": "no answer field"},
    ]
    results = http.post("/v1/score", json={"items": items}).json()["results"]
    assert [r["verifier_version"] for r in results] == [
        f"math@{VERSIONS['math']}",
        f"format@{VERSIONS['format']}",
        None,
    ]
    reward = {
        "components": [{"name": "correct"}, {"name": "format", "verifier": "format", "params": {"tags": ["answer"]}}]
    }
    groups = http.post(
        "/v1/score/groups",
        json={
            "groups": [
                {
                    "id": "g",
                    "item": {"verifier": "math", "answer": "4"},
                    "completions": ["<answer>\\boxed{4}</answer>", "5"],
                }
            ],
            "reward": reward,
        },
    ).json()["groups"]
    assert {r["verifier_version"] for r in groups[0]["results"]} == {
        f"format@{VERSIONS['format']}+math@{VERSIONS['math']}"
    }


def test_the_trainers_scorer_records_the_versions_a_real_service_returns(url):
    from groupscore.train.scoring import ServiceScorer, wire_group

    scorer = ServiceScorer([url])
    try:
        scores = scorer.score_groups([wire_group("g", {"verifier": "math", "answer": "4"}, ["\\boxed{4}", "5"])])
    finally:
        scorer.close()
    assert scores[0].total.rewards == [1.0, 0.0]
    assert scorer.versions.summary() == {"math": VERSIONS["math"]}
