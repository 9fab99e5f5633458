"""The scoring service end to end, against a real `groupscore serve` on a loopback port."""

from __future__ import annotations

import json
import math
import re
import threading

import httpx
import pytest
from helpers import py

from groupscore.client.http import ScoreClient, ServiceError
from groupscore.service.embedded import start_embedded

MAX_BODY = 4 * 1024 * 1024
MAX_ITEMS = 5000

# the `url` and `http` fixtures (conftest.py)
pytestmark = pytest.mark.service(
    workers=2, env={"GROUPSCORE_MAX_BODY_BYTES": str(MAX_BODY), "GROUPSCORE_MAX_ITEMS": str(MAX_ITEMS)}
)


def math_item(id, boxed, answer):
    return {"id": id, "verifier": "math", "completion": f"So the result is \\boxed{{{boxed}}}.", "answer": answer}


def code_item(id, program, tests):
    return {"id": id, "verifier": "code", "completion": py(program), "tests": tests}


DOUBLE_TESTS = [{"type": "stdio", "stdin": "3\n", "stdout": "6\n"}, {"type": "stdio", "stdin": "5\n", "stdout": "10\n"}]


def assert_still_healthy(http):
    assert http.get("/healthz").status_code == 200
    answer = http.post("/v1/score", json={"items": [math_item("ok", "12", "12")]})
    assert answer.status_code == 200 and answer.json()["results"][0]["reward"] == 1.0


# -- scoring -----------------------------------------------------------------------------------------------------------


def test_math_items_are_scored_in_order(http):
    items = [math_item(i, str(i), str(i if i % 3 else i + 1)) for i in range(30)]
    results = http.post("/v1/score", json={"items": items}).json()["results"]
    assert [r["id"] for r in results] == list(range(30))
    assert [r["reward"] for r in results] == [0.0 if i % 3 == 0 else 1.0 for i in range(30)]
    assert {r["status"] for r in results} == {"correct", "incorrect"}


def test_code_items_run_in_the_sandbox_end_to_end(http):
    items = [
        code_item("right", "print(int(input()) * 2)", DOUBLE_TESTS),
        code_item("half", "n = int(input())\nprint(6 if n == 3 else 0)", DOUBLE_TESTS),
        code_item("crash", "raise SystemExit(3)", DOUBLE_TESTS),
    ]
    results = {r["id"]: r for r in http.post("/v1/score", json={"items": items}).json()["results"]}
    assert results["right"]["reward"] == 1.0 and results["right"]["status"] == "correct"
    assert results["half"]["reward"] == pytest.approx(0.5)
    assert results["crash"]["reward"] == 0.0


def test_one_bad_item_gets_an_error_and_the_rest_are_scored(http):
    items = [
        math_item(1, "4", "4"),
        {"id": 2, "verifier": "math", "completion": 5, "answer": "4"},
        {"id": 3, "verifier": "nope", "completion": "x"},
        17,
        None,
        math_item(6, "7", "8"),
    ]
    results = http.post("/v1/score", json={"items": items}).json()["results"]
    assert [r["id"] for r in results] == [1, 2, 3, None, None, 6]
    assert [r["status"] for r in results] == ["correct", "error", "error", "error", "error", "incorrect"]
    assert "completion" in results[1]["reason"]
    assert "verifier" in results[2]["reason"]


def test_composite_reward_weights_gate_and_components(http):
    spec = {
        "components": [
            {"name": "correct", "weight": 1.0},
            {"name": "strict", "weight": 0.2, "params": {"strict": True}},
        ]
    }
    hedge = {"id": "hedge", "verifier": "math", "completion": "Either \\boxed{4} or \\boxed{5}.", "answer": "4"}
    items = [math_item("clean", "4", "4"), hedge, math_item("wrong", "3", "4")]
    results = {r["id"]: r for r in http.post("/v1/score", json={"items": items, "reward": spec}).json()["results"]}
    assert results["clean"]["components"] == {"correct": 1.0, "strict": 1.0}
    assert results["clean"]["reward"] == pytest.approx(1.0)
    strict_hedge = results["hedge"]["components"]["strict"]
    assert strict_hedge == 0.0  # strict mode scores several different boxed answers as a hedge
    assert results["hedge"]["reward"] == pytest.approx((results["hedge"]["components"]["correct"] + 0.0) / 1.2)
    assert results["wrong"]["reward"] == 0.0
    gated = {
        "components": [
            {"name": "correct", "weight": 1.0},
            {"name": "strict", "weight": 0.2, "params": {"strict": True}, "gate": True},
        ]
    }
    result = http.post("/v1/score", json={"items": [hedge], "reward": gated}).json()["results"][0]
    assert result["reward"] == 0.0 and "gate 'strict'" in result["reason"]


def test_composite_with_a_format_gate_zeroes_unformatted_answers(http):
    spec = {
        "components": [
            {"name": "correct", "weight": 1.0},
            {
                "name": "format",
                "weight": 0.2,
                "verifier": "format",
                "params": {"tags": ["think", "answer"]},
                "gate": True,
            },
        ]
    }
    formatted = {
        "id": "f",
        "verifier": "math",
        "answer": "4",
        "completion": "<think>2+2=4</think><answer>\\boxed{4}</answer>",
    }
    formatted_wrong = {**formatted, "id": "fw", "completion": "<think>hm</think><answer>\\boxed{5}</answer>"}
    results = {
        r["id"]: r
        for r in http.post(
            "/v1/score", json={"items": [formatted, formatted_wrong, math_item("bare", "4", "4")], "reward": spec}
        ).json()["results"]
    }
    assert results["f"]["reward"] == pytest.approx(1.0) and results["f"]["components"] == {
        "correct": 1.0,
        "format": 1.0,
    }
    assert results["fw"]["reward"] == pytest.approx(0.2 / 1.2)
    assert results["bare"]["components"] == {"correct": 1.0, "format": 0.0}
    assert results["bare"]["reward"] == 0.0 and results["bare"]["status"] == "correct"  # status: the primary's


def test_bad_reward_spec_is_a_422_naming_the_field(http):
    spec = {"components": [{"name": "c", "weight": -1}]}
    answer = http.post("/v1/score", json={"items": [math_item(1, "1", "1")], "reward": spec})
    assert answer.status_code == 422
    assert "body.reward.components.0.weight" in [d["field"] for d in answer.json()["detail"]]


def test_groups_report_mean_std_advantages_by_hand(http):
    groups = [
        {
            "id": "p1",
            "item": {"verifier": "math", "answer": "4"},
            "completions": ["\\boxed{4}", "\\boxed{5}", "\\boxed{4}", "\\boxed{6}"],
        },
        {"id": "p2", "item": {"verifier": "math", "answer": "1"}, "completions": ["\\boxed{2}", "\\boxed{3}"]},
    ]
    answer = http.post("/v1/score/groups", json={"groups": groups}).json()["groups"]
    first, second = answer
    assert first["id"] == "p1" and [r["id"] for r in first["results"]] == [0, 1, 2, 3]
    assert first["total"]["rewards"] == [1.0, 0.0, 1.0, 0.0]
    assert first["total"]["mean"] == pytest.approx(0.5)
    assert first["total"]["std"] == pytest.approx(math.sqrt(1 / 3))  # sample std, as TRL
    a = 0.5 / (math.sqrt(1 / 3) + 1e-4)
    assert first["total"]["advantages"] == pytest.approx([a, -a, a, -a])
    assert first["total"]["zero_variance"] is False
    assert second["total"]["zero_variance"] is True and second["total"]["advantages"] == [0.0, 0.0]


def test_groups_per_component_statistics_and_population_std(http):
    spec = {
        "components": [
            {"name": "correct", "weight": 1.0},
            {"name": "strict", "weight": 1.0, "params": {"strict": True}},
        ]
    }
    groups = [
        {
            "id": 0,
            "item": {"verifier": "math", "answer": "4"},
            "completions": ["\\boxed{4}", "\\boxed{4} or maybe \\boxed{5}"],
        }
    ]
    group = http.post(
        "/v1/score/groups", json={"groups": groups, "reward": spec, "std": "population", "eps": 0.0}
    ).json()["groups"][0]
    strict = group["components"]["strict"]
    assert strict["rewards"] == [1.0, 0.0]
    assert strict["std"] == pytest.approx(0.5) and strict["advantages"] == pytest.approx([1.0, -1.0])
    correct = group["components"]["correct"]
    assert correct["rewards"][0] == 1.0
    totals = group["total"]["rewards"]
    assert totals == pytest.approx([(c + s) / 2 for c, s in zip(correct["rewards"], strict["rewards"])])


def test_verifiers_lists_every_kind_with_its_schema(http):
    from groupscore.verifiers.registry import KINDS

    answer = http.get("/v1/verifiers").json()
    names = [v["name"] for v in answer["verifiers"]]
    assert names == list(KINDS)
    math_schema = next(v for v in answer["verifiers"] if v["name"] == "math")["item_schema"]
    assert "answer" in math_schema["properties"] and all(v["available"] for v in answer["verifiers"])
    assert "components" in answer["reward_spec_schema"]["properties"]


def test_docs_pages_load_everything_from_the_service_itself(http):
    # Offline machines: every script, style and icon the docs pages reference is served here, none from a CDN.
    for page in ("/docs", "/redoc"):
        html = http.get(page)
        assert html.status_code == 200 and "text/html" in html.headers["content-type"]
        urls = re.findall(r'(?:src|href)="([^"]+)"|url: ?[\'"]([^\'"]+)[\'"]', html.text)
        refs = [u for pair in urls for u in pair if u]
        assert refs and not [u for u in refs if "://" in u], refs
        for ref in refs:
            if ref.startswith("/docs/assets/"):
                asset = http.get(ref)
                assert asset.status_code == 200 and len(asset.content) > 1000, ref
    assert "SwaggerUIBundle" in http.get("/docs/assets/swagger-ui-bundle.js").text


def test_probes_docs_and_metrics(http):
    assert http.get("/healthz").json() == {"status": "ok"}
    ready = http.get("/readyz")
    assert ready.status_code == 200 and ready.json()["ready"] is True
    assert http.get("/docs").status_code == 200
    spec = http.get("/openapi.json").json()
    assert {"/v1/score", "/v1/score/groups", "/v1/verifiers", "/get_reward", "/run_code"} <= set(spec["paths"])
    http.post("/v1/score", json={"items": [math_item(1, "2", "2")]})
    text = http.get("/metrics").text
    for name in (
        "groupscore_requests_total",
        "groupscore_request_seconds_bucket",
        "groupscore_items_total",
        "groupscore_queue_depth_items",
        "groupscore_item_timeouts_total",
        "groupscore_task_seconds_bucket",
        "groupscore_sandbox_failures_total",
        "groupscore_infra_errors_total",
    ):
        assert name in text
    assert 'groupscore_items_total{status="correct",verifier="math"}' in text


# -- malformed input -----------------------------------------------------------------------------------------------


def test_invalid_json_is_422(http):
    answer = http.post("/v1/score", content=b'{"items": [', headers={"content-type": "application/json"})
    assert answer.status_code == 422 and answer.json()["detail"][0]["type"] == "json_invalid"
    assert_still_healthy(http)


@pytest.mark.parametrize(
    "body, field",
    [
        ({"items": "not a list"}, "body.items"),
        ({}, "body.items"),
        ({"items": [], "deadline_s": "soon"}, "body.deadline_s"),
        ({"items": [], "unknown": 1}, "body.unknown"),
        ({"items": [], "reward": {"components": []}}, "body.reward.components"),
    ],
)
def test_wrong_types_are_422_with_the_field_path(http, body, field):
    answer = http.post("/v1/score", json=body)
    assert answer.status_code == 422
    assert field in [d["field"] for d in answer.json()["detail"]]


def test_huge_body_is_413_and_the_server_stays_up(http):
    big = json.dumps({"items": [math_item(0, "1", "x" * (MAX_BODY + 10))]}).encode()
    answer = http.post("/v1/score", content=big, headers={"content-type": "application/json"})
    assert answer.status_code == 413
    assert_still_healthy(http)


def test_100k_items_is_422_and_the_server_stays_up(http):
    answer = http.post("/v1/score", json={"items": [{}] * 100_000})
    assert answer.status_code == 422
    assert answer.json()["detail"][0]["field"] == "body.items" and "at most" in answer.json()["detail"][0]["msg"]
    groups = [{"item": {"verifier": "math", "answer": "1"}, "completions": ["x"] * 1000}] * (MAX_ITEMS // 1000 + 1)
    assert http.post("/v1/score/groups", json={"groups": groups}).status_code == 422
    assert_still_healthy(http)


def test_unicode_and_null_bytes(http):
    items = [
        {"id": "nul", "verifier": "math", "completion": "\u0000\u0000 ñ 🙂 \\boxed{4}\u0000", "answer": "4"},
        {"id": "surrogate", "verifier": "math", "completion": "\ud800 \\boxed{4}", "answer": "4"},
        {"id": "rtl", "verifier": "math", "completion": "الجواب \\boxed{٤}", "answer": "4"},
    ]
    # a lone surrogate is valid JSON text (\ud800) though not valid UTF-8; send it escaped
    body = json.dumps({"items": items}, ensure_ascii=True).encode()
    answer = http.post("/v1/score", content=body, headers={"content-type": "application/json"})
    assert answer.status_code == 200
    results = answer.json()["results"]
    assert [r["id"] for r in results] == ["nul", "surrogate", "rtl"]
    assert all(0.0 <= r["reward"] <= 1.0 for r in results)
    assert results[0]["reward"] == 1.0
    raw_nul = b'{"items": [{"verifier": "math", "completion": "a\x00b", "answer": "1"}]}'  # unescaped: invalid JSON
    assert http.post("/v1/score", content=raw_nul, headers={"content-type": "application/json"}).status_code == 422
    bad_utf8 = b'{"items": [{"verifier": "math", "completion": "\xff\xfe", "answer": "1"}]}'
    undecodable = http.post("/v1/score", content=bad_utf8, headers={"content-type": "application/json"})
    assert undecodable.status_code == 400 and "parsing the body" in undecodable.json()["detail"]
    assert_still_healthy(http)


# -- clients --------------------------------------------------------------------------------------------------------


def test_concurrent_clients_each_get_their_own_answers_in_order(url):
    failures: list[str] = []

    def worker(n: int) -> None:
        items = [math_item(f"{n}-{i}", str(n * 100 + i), str(n * 100 + (i if i % 2 else i + 1))) for i in range(40)]
        with ScoreClient(url) as client:
            for _ in range(3):
                verdicts = client.score(items)
                if [v.id for v in verdicts] != [it["id"] for it in items]:
                    failures.append(f"client {n}: order")
                if [v.reward for v in verdicts] != [1.0 if i % 2 else 0.0 for i in range(40)]:
                    failures.append(f"client {n}: rewards")

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not failures and not any(t.is_alive() for t in threads)


def test_async_client_and_sharding_over_two_urls_keep_order(url):
    import asyncio

    from groupscore.client.http import AsyncScoreClient

    items = [math_item(i, str(i), str(i)) for i in range(101)]

    async def go():
        async with AsyncScoreClient([url, url], max_batch=16) as client:
            return await client.score(items)

    verdicts = asyncio.run(go())
    assert [v.id for v in verdicts] == list(range(101)) and all(v.reward == 1.0 for v in verdicts)
    with ScoreClient([url, url, url], max_batch=7) as client:
        groups = client.score_groups(
            [
                {
                    "id": g,
                    "item": {"verifier": "math", "answer": str(g)},
                    "completions": [f"\\boxed{{{g}}}", "\\boxed{x}", "none"],
                }
                for g in range(9)
            ]
        )
    assert [g.id for g in groups] == list(range(9))
    assert all(g.total.rewards == [1.0, 0.0, 0.0] for g in groups)


def test_client_fails_over_from_a_dead_url(url):
    from groupscore.client.http import RetryPolicy
    from groupscore.service.embedded import free_port

    dead = f"http://127.0.0.1:{free_port()}"
    with ScoreClient([dead, url], retry=RetryPolicy(backoff_s=0.01)) as client:
        verdicts = client.score([math_item(i, "1", "1") for i in range(10)])
    assert [v.reward for v in verdicts] == [1.0] * 10


def test_client_gives_up_after_its_retries_with_a_service_error():
    from groupscore.client.http import RetryPolicy
    from groupscore.service.embedded import free_port

    retry = RetryPolicy(max_retries=2, backoff_s=0.01)
    with (
        ScoreClient(f"http://127.0.0.1:{free_port()}", retry=retry) as client,
        pytest.raises(ServiceError, match="failed after 3 attempts"),
    ):
        client.score([math_item(1, "1", "1")])


def test_client_raises_service_error_on_4xx_without_retrying(url):
    with ScoreClient(url) as client, pytest.raises(ServiceError) as info:
        client.request("POST", "/v1/score", {"items": "nope"})
    assert info.value.status_code == 422


# -- auth -------------------------------------------------------------------------------------------------------------


def test_bearer_token_protects_scoring_but_not_probes():
    with start_embedded(workers=1, token="s3cret") as base:
        with httpx.Client(base_url=base, timeout=60) as http:
            body = {"items": [math_item(1, "2", "2")]}
            assert http.post("/v1/score", json=body).status_code == 401
            wrong = http.post("/v1/score", json=body, headers={"authorization": "Bearer nope"})
            assert wrong.status_code == 401 and wrong.headers["www-authenticate"] == "Bearer"
            assert http.post("/get_reward", json={"query": ["x"]}).status_code == 401
            assert http.get("/metrics").status_code == 401
            assert http.get("/healthz").status_code == 200 and http.get("/readyz").status_code == 200
            # the docs pages and their assets are open; a path that only starts like them is not
            assert http.get("/docs").status_code == 200 and http.get("/docs/assets/swagger-ui.css").status_code == 200
            assert http.get("/docs/assetsX").status_code == 401 and http.get("/docsx").status_code == 401
            good = http.post("/v1/score", json=body, headers={"authorization": "Bearer s3cret"})
            assert good.status_code == 200 and good.json()["results"][0]["reward"] == 1.0
        with ScoreClient(base, token="s3cret") as client:
            assert client.score([math_item(1, "3", "3")])[0].reward == 1.0
