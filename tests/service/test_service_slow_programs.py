"""A program that runs long in the service gets its own `timeout` (0), never the deadline's masked infra_error, and
never masks the items around it (the red team's F2).

Before: items were scored in tasks of several, and an unfinished task at the request's deadline masked every item in
it; a completion that slept through its tests turned its own 0 (and its task-mates' scores) into service_deadline
infra_errors, which trainers mask: under GRPO, being masked beats a below-mean score.
"""

from __future__ import annotations

import time

import httpx
import pytest

from groupscore.runtime import tasks
from groupscore.verifiers.budget import item_time_budget_s
from groupscore.verifiers.code.verify import MAX_RUNNER_WALL_S

TESTS = [{"type": "call", "fn": "add", "args": [i, i], "expected": 2 * i} for i in range(3)]
ITEM = {"verifier": "code", "tests": TESTS, "time_limit_s": 1.0}
HONEST = "```python\ndef add(a, b):\n    return a + b\n```"
SLOW = "```python\nimport time\ndef add(a, b):\n    time.sleep(30)\n```"
COMPLETIONS = [HONEST, HONEST, SLOW, HONEST, HONEST, HONEST]


# The `http` fixture (conftest.py). One worker: the items queue behind the slow one, and (by the default chunking)
# would share tasks with it.
pytestmark = pytest.mark.service(workers=1, env={"GROUPSCORE_DEADLINE_S": "60"})


def _group(http: httpx.Client, deadline_s: float | None = None) -> list[dict]:
    body = {"groups": [{"id": "g", "item": ITEM, "completions": COMPLETIONS}]}
    if deadline_s is not None:
        body["deadline_s"] = deadline_s
    answer = http.post("/v1/score/groups", json=body)
    assert answer.status_code == 200, answer.text
    return answer.json()["groups"][0]["results"]


def test_a_slow_completion_scores_its_own_timeout_and_its_group_mates_are_scored(http):
    results = _group(http)
    assert [r["status"] for r in results] == ["correct", "correct", "timeout", "correct", "correct", "correct"]
    assert results[2]["reward"] == 0.0


def test_a_deadline_too_short_for_the_item_masks_every_completion_alike_never_only_the_slow_one(http):
    # 3 s cannot hold this item's budget (its limits allow ~17 s of scoring): no completion is started, whatever it
    # does. Before, the honest ones that finished first were scored and the slow one alone was masked.
    budget = item_time_budget_s({**ITEM, "completion": SLOW})
    assert budget > 3.0
    results = _group(http, deadline_s=3.0)
    masked = [r["status"] == "infra_error" for r in results]
    assert masked[2], results[2]
    assert all(masked), [r["status"] for r in results]
    assert {r["details"]["infra"] for r in results} == {"service_deadline"}
    time.sleep(0.5)


def test_a_worker_starts_no_program_it_cannot_finish_before_the_deadline():
    raw = {**ITEM, "id": "late", "completion": SLOW}
    started = time.monotonic()
    [verdict] = tasks.score_task([raw], None, False, time.time() + 3.0)
    assert time.monotonic() - started < 1.0  # refused, not run
    assert verdict["status"] == "infra_error" and verdict["details"]["infra"] == "service_deadline"
    assert verdict["id"] == "late"


def test_items_without_a_budget_are_always_started_and_others_while_their_budget_fits():
    raw = {"verifier": "format", "id": "f", "completion": "<a>x</a>", "tags": ["a"]}
    [verdict] = tasks.score_task([raw], None, False, time.time() + 0.5)
    assert verdict["status"] == "correct"
    raw = {"verifier": "math", "id": "m", "completion": "\\boxed{4}", "answer": "4", "timeout_s": 0.5}
    [verdict] = tasks.score_task([raw], None, False, time.time() + 0.5 + tasks.RETURN_MARGIN_S + 1.0)
    assert verdict["status"] == "correct"  # math: its timeout_s, as programs (tests/service/test_service_slow_math.py)


def test_an_items_budget_covers_the_runner_and_every_stdio_run():
    calls = item_time_budget_s({**ITEM, "completion": ""})
    assert calls >= 2 + 1 + 3 * (1 + 1)  # the runner's own wall limit for three call tests
    stdio = [{"type": "stdio", "stdin": "", "stdout": "x"}] * 4
    assert item_time_budget_s({"verifier": "code", "completion": "", "tests": stdio, "time_limit_s": 2.0}) >= 2.0
    big = [{"type": "call", "fn": "f", "args": [i], "expected": i} for i in range(200)]
    assert item_time_budget_s({"verifier": "code", "completion": "", "tests": big}) < MAX_RUNNER_WALL_S + 60
    assert item_time_budget_s({"verifier": "math", "completion": "", "answer": "1"}) == 2.0  # its default timeout_s
    assert item_time_budget_s({"verifier": "format", "completion": "", "tags": ["a"]}) == 0.0
    assert item_time_budget_s({"verifier": "code", "tests": "not a list"}) == 0.0
