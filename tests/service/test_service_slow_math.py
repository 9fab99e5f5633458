"""A math answer whose symbolic step runs long gets its own `timeout` (0) in the service, never the deadline's masked
infra_error, and never masks the answers around it (issue 23): a math item, like a program, is started only while its
request still holds the item's whole time budget (`timeout_s`); otherwise it is not started (`service_deadline`).

Before: math items were started whatever time was left. One that started with less than its `timeout_s` before the
deadline ran its symbolic step past it, and its whole chunk came back `infra_error` (masked): its own 0, and the
correct answers scored beside it; in /v1/score/groups whole groups were masked (advantages 0).

The slow answer is real: sympy takes far longer than any budget here (over a minute on a dev machine) to compare it
with its reference, so the symbolic step always runs to the item's `timeout_s`.
"""

from __future__ import annotations

import time

import pytest

from groupscore.runtime import tasks
from groupscore.runtime.chunks import chunk_size

GOLD = "\\sec(x)^{2}(v+x+y+z+w)^{18}"
SLOW = "So it is $\\boxed{\\tan(x)^{2}(v+x+y+z+w)^{18}+(w+x+y+z+v)^{18}+1}$."  # wrong too: the +1
SLOW_BUDGET_S = 4.0  # the slow items' timeout_s: their symbolic step runs this long, and they end as `timeout`
FAST_BUDGET_S = 0.25  # the fast items' timeout_s (the fast path decides them in microseconds)
# The first slow item starts at once (its budget and the 1 s return margin fit with 1.5 s to spare). The one queued
# behind it would start after those 4 s with at most 2.5 s left, less than its budget: before, it started anyway and
# ran 1.5 s past the deadline. The fast ones behind it still have their budget and the margin left, with over a second to spare.
DEADLINE_S = 6.5
RIGHT, WRONG = "The answer is $\\boxed{4}$.", "The answer is $\\boxed{5}$."

# The `http` fixture (conftest.py). One worker, so the items queue behind the slow ones and share chunks with them.
pytestmark = pytest.mark.service(workers=1, env={"GROUPSCORE_DEADLINE_S": "60"})


def slow(id: str) -> dict:
    return {"id": id, "verifier": "math", "completion": SLOW, "answer": GOLD, "timeout_s": SLOW_BUDGET_S}


def fast(id: str, completion: str) -> dict:
    return {"id": id, "verifier": "math", "completion": completion, "answer": "4", "timeout_s": FAST_BUDGET_S}


def test_a_slow_math_answer_scores_its_own_timeout_and_never_masks_its_chunk_mates(http):
    items = [fast("f0", RIGHT), slow("s1"), slow("s2")] + [
        fast(f"f{i}", RIGHT if i % 3 else WRONG) for i in range(1, 10)
    ]
    assert chunk_size(len(items), 1, 32) == 3  # chunks: [f0, s1, s2], [f1, f2, f3], ...: s2 behind s1, beside f0
    answer = http.post("/v1/score", json={"items": items, "deadline_s": DEADLINE_S})
    assert answer.status_code == 200, answer.text
    results = {r["id"]: r for r in answer.json()["results"]}
    # s1 had its budget left: its own timeout, a 0 that is trained on.
    assert (results["s1"]["status"], results["s1"]["reward"]) == ("timeout", 0.0), results["s1"]
    # s2 had not: never started (it would have run into the deadline), whatever its completion does.
    assert results["s2"]["status"] == "infra_error" and results["s2"]["details"]["infra"] == "service_deadline"
    assert "not scored before the request's deadline" in results["s2"]["reason"]
    # Every fast answer is scored: f0 shared s1's and s2's chunk, the others queued behind them.
    fast_ones = {id: r for id, r in results.items() if id.startswith("f")}
    assert {id: r["status"] for id, r in fast_ones.items()} == {
        id: "correct" if id == "f0" or int(id[1:]) % 3 else "incorrect" for id in fast_ones
    }


def test_a_group_behind_a_slow_answer_is_scored_not_masked(http):
    slow_group = {
        "id": "slow",
        "item": {"verifier": "math", "answer": GOLD, "timeout_s": SLOW_BUDGET_S},
        "completions": [SLOW, SLOW],
    }
    fast_group = {
        "id": "fast",
        "item": {"verifier": "math", "answer": "4", "timeout_s": FAST_BUDGET_S},
        "completions": [RIGHT, WRONG, RIGHT, RIGHT],
    }
    answer = http.post("/v1/score/groups", json={"groups": [slow_group, fast_group], "deadline_s": DEADLINE_S})
    assert answer.status_code == 200, answer.text
    slow_result, fast_result = answer.json()["groups"]
    # The first slow completion started with its budget left: its own timeout. The second was not started.
    assert [r["status"] for r in slow_result["results"]] == ["timeout", "infra_error"], slow_result["results"]
    assert slow_result["results"][1]["details"]["infra"] == "service_deadline"
    assert slow_result["total"]["masked"] == 1
    # The fast group, queued behind them on the one worker, is scored in full: no masked completion, real advantages.
    assert [r["status"] for r in fast_result["results"]] == ["correct", "incorrect", "correct", "correct"]
    assert fast_result["total"]["masked"] == 0 and fast_result["total"]["mean"] == pytest.approx(0.75)
    assert fast_result["total"]["advantages"][1] < 0 < fast_result["total"]["advantages"][0]


def test_a_worker_starts_no_math_item_it_cannot_finish_before_the_deadline():
    raw = {**slow("late"), "timeout_s": 30.0}
    started = time.monotonic()
    [verdict] = tasks.score_task([raw], None, False, time.time() + 10.0)
    assert time.monotonic() - started < 1.0  # refused, not run
    assert verdict["status"] == "infra_error" and verdict["details"]["infra"] == "service_deadline"
    assert verdict["id"] == "late"


def test_a_math_item_with_its_budget_left_is_started_and_ends_before_the_deadline():
    raw = fast("on-time", RIGHT)
    [verdict] = tasks.score_task([raw], None, False, time.time() + FAST_BUDGET_S + 3.0)
    assert verdict["status"] == "correct"
    [verdict] = tasks.score_task([{**raw, "timeout_s": 2.5}], None, False, time.time() + 2.0)
    assert verdict["status"] == "infra_error" and verdict["details"]["infra"] == "service_deadline"
