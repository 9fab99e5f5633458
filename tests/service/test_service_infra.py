"""Infra errors through a real loopback server: the request deadline runs out on an item (the service's time, not the
program's), and every endpoint and adapter reports it as such instead of a 0.

The server runs with GROUPSCORE_DEBUG=1, so an item's `metadata.debug_sleep_s` holds its worker past the deadline.
"""

from __future__ import annotations

import json
import time

import pytest

from groupscore.client.adapters import trl_reward_func

# Every math item's timeout_s (a server default); an item is started only while the request holds it and the return
# margin (tasks.RETURN_MARGIN_S, 1 s): the deadline leaves a second to spare.
MATH_BUDGET_S = 0.5
DEADLINE_S = 2.5
SLEEP_S = 3.5  # past the deadline, short enough to free the worker soon after

# the `url` and `http` fixtures (conftest.py)
pytestmark = pytest.mark.service(
    workers=2,
    env={
        "GROUPSCORE_DEBUG": "1",
        "GROUPSCORE_DEADLINE_S": str(DEADLINE_S),
        "GROUPSCORE_CHUNK_ITEMS": "1",
        "GROUPSCORE_MATH_DEFAULTS": json.dumps({"timeout_s": MATH_BUDGET_S}),
    },
    http_timeout_s=60,
)


SLOW = {"debug_sleep_s": SLEEP_S}


@pytest.fixture(autouse=True)
def _workers_free_again():
    yield
    time.sleep(SLEEP_S)  # the abandoned sleeper still holds its worker; the next test starts with both free


def test_openrlhf_flags_an_item_the_deadline_left_unscored(http):
    body = {
        "query": ["Q: \\boxed{4}", "Q: \\boxed{4}"],
        "prompts": ["Q: ", "Q: "],
        "labels": ["4", {"answer": "4", "metadata": SLOW}],
    }
    answer = http.post("/get_reward", json=body)
    assert answer.status_code == 200
    payload = answer.json()
    assert payload["rewards"] == [1.0, 0.0]  # the documented placeholder
    assert payload["extra_logs"]["infra_error"] == [0.0, 1.0]
    assert payload["extra_logs"]["correct"] == [1.0, 0.0] and payload["extra_logs"]["invalid"] == [0.0, 0.0]
    assert 'groupscore_infra_errors_total{cause="service_deadline"}' in http.get("/metrics").text


def test_group_statistics_leave_out_the_completion_the_deadline_left_unscored(http):
    group = {
        "id": "g",
        "item": {"verifier": "math", "answer": "4"},
        "completions": ["\\boxed{4}", "\\boxed{5}", "\\boxed{4}"],
    }
    slow_group = {
        "id": "slow",
        "item": {"verifier": "math", "answer": "4", "metadata": SLOW},
        "completions": ["\\boxed{4}"],
    }
    answer = http.post("/v1/score/groups", json={"groups": [group, slow_group]})
    fast, slow = answer.json()["groups"]
    assert fast["total"]["masked"] == 0 and fast["total"]["mean"] == pytest.approx(2 / 3)
    assert slow["results"][0]["status"] == "infra_error"
    assert slow["total"]["masked"] == 1 and slow["total"]["advantages"] == [0.0]


def test_trl_reward_is_none_for_the_completion_the_deadline_left_unscored(url):
    reward = trl_reward_func(url, verifier="math", kind_column=None, columns={"metadata": "meta"})
    rows = reward(prompts=["q", "q"], completions=["\\boxed{4}", "\\boxed{4}"], answer=["4", "4"], meta=[{}, SLOW])
    assert rows == [1.0, None]
