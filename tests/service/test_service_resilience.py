"""The service under stress on a real loopback server: a worker killed mid-batch, a full queue, request deadlines.

The server runs with GROUPSCORE_DEBUG=1, which turns on two test hooks: GET /debug/workers (the pool's pids) and
`metadata.debug_sleep_s` on an item (its worker sleeps first), so these tests can time their faults.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from groupscore.client.http import RetryPolicy, ScoreClient

QUEUE = 8
STUCK_GRACE_S = 1.0
ITEM_BUDGET_S = 0.5  # each item's timeout_s (the fast path decides them in microseconds)
# A request deadline that holds an item's whole budget and the return margin (tasks.RETURN_MARGIN_S, 1 s) with a
# second to spare: an item is started only then, so a shorter one would start none.
SHORT_DEADLINE_S = 2.5

# the `url` and `http` fixtures (conftest.py)
pytestmark = pytest.mark.service(
    workers=2,
    env={
        "GROUPSCORE_DEBUG": "1",
        "GROUPSCORE_MAX_QUEUE_ITEMS": str(QUEUE),
        "GROUPSCORE_MAX_ITEMS": str(QUEUE),
        "GROUPSCORE_STUCK_GRACE_S": str(STUCK_GRACE_S),
    },
)


def slow_math(id, boxed, answer, sleep_s):
    return {
        "id": id,
        "verifier": "math",
        "completion": f"\\boxed{{{boxed}}}",
        "answer": answer,
        "timeout_s": ITEM_BUDGET_S,
        "metadata": {"debug_sleep_s": sleep_s},
    }


def metric(http, name: str) -> float:
    for line in http.get("/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not exported")


def _in_background(fn):
    box: dict = {}
    thread = threading.Thread(target=lambda: box.setdefault("value", fn()))
    thread.start()
    return thread, box


def _wait_for(condition, timeout_s=20.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def test_a_worker_killed_mid_batch_is_replaced_and_the_request_still_answered_right(http):
    items = [slow_math(i, str(i), str(i if i % 2 else -1), 0.25) for i in range(8)]  # 8 items, ~1 s on 2 workers
    before = http.get("/debug/workers").json()["pids"]
    assert len(before) == 2
    thread, box = _in_background(lambda: http.post("/v1/score", json={"items": items}))
    assert _wait_for(lambda: http.get("/readyz").json()["queue_depth"] == 8)
    time.sleep(0.3)  # every worker is now inside a task
    os.kill(before[0], signal.SIGKILL)
    thread.join(timeout=60)
    answer = box["value"]
    assert answer.status_code == 200
    results = answer.json()["results"]
    assert [r["id"] for r in results] == list(range(8))
    assert [r["reward"] for r in results] == [1.0 if i % 2 else 0.0 for i in range(8)]
    assert all(r["status"] in ("correct", "incorrect") for r in results)
    after = http.get("/debug/workers").json()["pids"]
    assert before[0] not in after
    assert metric(http, "groupscore_worker_pool_restarts_total") >= 1
    assert (
        http.post("/v1/score", json={"items": [slow_math("next", "5", "5", 0)]}).json()["results"][0]["reward"] == 1.0
    )


def test_full_queue_answers_429_with_retry_after_and_a_retrying_client_gets_through(http, url):
    holding = [slow_math(i, "1", "1", 0.6) for i in range(QUEUE)]  # fills the queue for ~2.4 s
    thread, box = _in_background(lambda: http.post("/v1/score", json={"items": holding}))
    assert _wait_for(lambda: http.get("/readyz").json()["queue_depth"] == QUEUE)
    refused = http.post("/v1/score", json={"items": [slow_math("x", "2", "2", 0)]})
    assert refused.status_code == 429
    assert int(refused.headers["retry-after"]) >= 1
    assert "queue full" in refused.json()["detail"]
    assert (
        http.post("/get_reward", json={"query": ["Q: \\boxed{1}"], "prompts": ["Q: "], "labels": ["1"]}).status_code
        == 429
    )
    # The client honours Retry-After (capped here to keep the test short) and gets its answer once there is room.
    with ScoreClient(url, retry=RetryPolicy(max_retries=30, max_retry_after_s=0.2)) as client:
        verdicts = client.score([slow_math("y", "3", "3", 0)])
    assert verdicts[0].reward == 1.0
    thread.join(timeout=60)
    assert box["value"].status_code == 200 and all(r["reward"] == 1.0 for r in box["value"].json()["results"])
    assert 'groupscore_rejected_requests_total{reason="queue_full"}' in http.get("/metrics").text


def test_items_past_the_deadline_get_infra_error_verdicts_not_a_hung_request(http):
    items = [slow_math("fast", "1", "1", 0), slow_math("slow", "1", "1", 5.0)]
    started = time.monotonic()
    answer = http.post("/v1/score", json={"items": items, "deadline_s": SHORT_DEADLINE_S})
    elapsed = time.monotonic() - started
    assert answer.status_code == 200 and elapsed < SHORT_DEADLINE_S + 3.0
    results = {r["id"]: r for r in answer.json()["results"]}
    # The service ran out of time, not the program: infra_error (trainers mask it), never a timeout worth 0.
    assert results["slow"]["status"] == "infra_error" and results["slow"]["reward"] == 0.0
    assert results["slow"]["details"]["infra"] == "service_deadline"
    assert results["fast"]["reward"] == 1.0
    assert 'groupscore_infra_errors_total{cause="service_deadline"}' in http.get("/metrics").text
    assert 'groupscore_item_timeouts_total{cause="service_deadline"}' not in http.get("/metrics").text
    assert http.get("/healthz").status_code == 200


def test_tasks_stuck_past_their_deadline_lose_their_workers_so_the_next_request_is_served(http):
    restarts = metric(http, "groupscore_worker_pool_restarts_total")
    # Both workers get an item that sleeps far beyond its request's deadline (a scorer ignoring its time bound).
    stuck = [slow_math("stuck-a", "1", "1", 25.0), slow_math("stuck-b", "1", "1", 25.0)]
    answer = http.post("/v1/score", json={"items": stuck, "deadline_s": SHORT_DEADLINE_S})
    assert [r["status"] for r in answer.json()["results"]] == ["infra_error", "infra_error"]
    assert _wait_for(lambda: metric(http, "groupscore_stuck_tasks_total") >= 1, timeout_s=10)
    started = time.monotonic()
    fresh = http.post("/v1/score", json={"items": [slow_math("next", "6", "6", 0)] * 2})
    assert all(r["reward"] == 1.0 for r in fresh.json()["results"])
    assert time.monotonic() - started < 10.0  # not the 25 s the stuck items would have held the workers
    assert metric(http, "groupscore_worker_pool_restarts_total") > restarts
