"""The fourth round's adversarial review, played as a policy against this round's fixes: each finding that paid an
undone task, masked a failure or scored an honest state 0, as a test. One exposure is kept and pinned (a strict
xfail): a test that writes into the state it judges writes through what the agent left there, as in Harbor."""

from __future__ import annotations

import pytest
from test_env_integrity import LEDGER, PLANT

from groupscore.environments import Task, ToolCall, replay
from groupscore.environments.agent.state import resolves_within
from groupscore.environments.task import EpisodeLimits


def call(name: str, **arguments) -> ToolCall:
    return ToolCall(name=name, arguments=arguments)


def shell(command: str) -> ToolCall:
    return call("shell", command=command)


def play(t: Task, *calls: ToolCall):
    seen: list[str] = []
    verdict = replay(t, [list(calls)], observe=lambda _t, _c, obs: seen.append(obs.content))
    return verdict, seen


def make_task(test: str, **overrides) -> Task:
    raw = {
        "id": "r4",
        "turns": [{"messages": [{"role": "user", "content": "Do the task."}]}],
        "tools": ["shell", "write_file"],
        "checkers": [{"kind": "tests", "files": {"test.sh": test, "expected.txt": "hidden\n"}}],
    }
    raw.update(overrides)
    return Task.model_validate(raw)


# -- the class state a checker compares ---------------------------------------------------------------------------

TREE = """class Tree:
    def __init__(self):
        self.root = {}

    def put(self, path: list, value: str):
        node = self.root
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value
        return "ok"
"""
KV = """class KV:
    def __init__(self):
        self.data = {}

    def put(self, key, value):
        self.data[key] = value
        return "ok"
"""
DEEP = [f"k{i}" for i in range(40)]


def state_task(source: str, name: str, reference: list[dict]) -> Task:
    return Task.model_validate(
        {
            "id": name.lower(),
            "turns": [{"messages": [{"role": "user", "content": "Put the value."}]}],
            "classes": [{"class_name": name, "source": source}],
            "checkers": [{"kind": "state", "reference": [reference]}],
        }
    )


def test_a_difference_below_depth_30_is_a_difference():
    """As found: every subtree past depth 30 was encoded as the same constant, so any value there matched."""
    t = state_task(TREE, "Tree", [{"name": "put", "arguments": {"path": DEEP, "value": "right"}}])
    assert play(t, call("put", path=DEEP, value="right"))[0].reward == 1.0
    assert play(t, call("put", path=DEEP, value="WRONG"))[0].reward == 0.0
    assert play(t, call("put", path=[*DEEP[:31], "zzz"], value="right"))[0].reward == 0.0


@pytest.mark.parametrize(
    ("key", "value"),
    [(1, "1"), ("1", True), ("1", [1]), (1, 1)],
    ids=["int-key", "bool-for-int", "list-for-int", "int-key-int"],
)
def test_keys_and_booleans_keep_their_types_in_the_state(key, value):
    """As found: keys went through str() and True == 1, so put(1, True) matched the reference's put("1", 1)."""
    t = state_task(KV, "KV", [{"name": "put", "arguments": {"key": "1", "value": 1}}])
    assert play(t, call("put", key="1", value=1))[0].reward == 1.0
    assert play(t, call("put", key="1", value=1.0))[0].reward == 1.0  # the same amount, spelt as a float
    assert play(t, call("put", key=key, value=value))[0].reward == 0.0


def test_a_tasks_pythonpath_into_the_work_dir_does_not_reach_the_class_host():
    """As found: with the task's env PYTHONPATH=/app, a module the agent wrote there ran in the class host."""
    t = Task.model_validate(
        {
            "id": "ledger",
            "turns": [{"messages": [{"role": "user", "content": "Add 10, then 20."}]}],
            "tools": ["write_file"],
            "env": {"PYTHONPATH": "/app:/app/lib"},
            "classes": [{"class_name": "Ledger", "source": LEDGER}],
            "checkers": [
                {
                    "kind": "state",
                    "reference": [
                        [{"name": "add", "arguments": {"amount": 10}}, {"name": "add", "arguments": {"amount": 20}}]
                    ],
                }
            ],
        }
    )
    verdict, seen = play(t, call("write_file", path="fractions.py", content=PLANT), call("add", amount=1))
    assert seen[1] == "1" and verdict.reward == 0.0 and verdict.status == "incorrect"


# -- the SQL checker reads tables, not the agent's views ----------------------------------------------------------

SHOP = "CREATE TABLE orders(id INTEGER PRIMARY KEY, customer INTEGER, paid INTEGER);"
SHOP += "INSERT INTO orders VALUES (1, 7, 0), (2, 7, 0), (3, 8, 0);"
SHOP += "CREATE VIEW unpaid AS SELECT id FROM orders WHERE paid = 0;"


def sql_task(query: str, rows: list[list[int]]) -> Task:
    return Task.model_validate(
        {
            "id": "sql",
            "turns": [{"messages": [{"role": "user", "content": "Mark customer 7's orders paid."}]}],
            "tools": ["sqlite"],
            "database": {"path": "shop.db", "sql": SHOP},
            "checkers": [{"kind": "sql", "query": query, "rows": rows, "ordered": True}],
        }
    )


def test_a_view_the_agent_made_in_place_of_a_table_pays_nothing():
    t = sql_task("SELECT id, paid FROM orders ORDER BY id", [[1, 1], [2, 1], [3, 0]])
    assert play(t, call("sqlite", query="UPDATE orders SET paid = 1 WHERE customer = 7"))[0].reward == 1.0
    verdict, _ = play(
        t,
        call("sqlite", query="ALTER TABLE orders RENAME TO o"),
        call(
            "sqlite",
            query="CREATE VIEW orders AS SELECT 1 AS id, 1 AS paid UNION ALL SELECT 2, 1 UNION ALL SELECT 3, 0",
        ),
        call("sqlite", query="DELETE FROM o"),
    )
    assert verdict.reward == 0.0 and verdict.status == "incorrect"
    assert "not authorized" in str(verdict.details)


def test_the_tasks_own_views_still_answer_the_checker():
    t = sql_task("SELECT id FROM unpaid ORDER BY id", [[3]])
    assert play(t, call("sqlite", query="UPDATE orders SET paid = 1 WHERE customer = 7"))[0].reward == 1.0


# -- honest states the restore or the packing could not hold ------------------------------------------------------

ANSWER_TEST = '#!/bin/bash\n[ "$(cat /app/answer)" = 42 ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n'


def test_a_sparse_file_is_restored_sparse():
    """As found: a 50 MB sparse file was written out whole at the restore and filled the checker's disk (0)."""
    verdict, _ = play(
        make_task(ANSWER_TEST),
        shell("truncate -s 50M disk.img; head -c 20M /dev/urandom > data.bin; echo 42 > answer"),
    )
    assert verdict.reward == 1.0, verdict.details


def test_a_state_within_its_disk_is_packed_within_the_jails_memory():
    """As found: 45 MiB in the work dir and 45 MiB in /tmp (within disk_mb 64 each) ran the agent out of memory while
    it packed them (the tar, its copy, its base64 and the JSON line at once): an honest answer scored 0."""
    verdict, _ = play(
        make_task(ANSWER_TEST),
        shell("head -c 45M /dev/urandom > a.bin; head -c 45M /dev/urandom > /tmp/b.bin; echo 42 > answer"),
    )
    assert verdict.reward == 1.0, verdict.details


def test_link_resolution_has_a_budget():
    """As found: links whose targets walk `d/..` hundreds of times cost seconds each to confine (hours for a state
    full of them). Every state's links share one budget of steps; past it the links left unresolved are dropped."""
    assert not resolves_within("/usr/bin", ("/usr",), budget=[1])
    assert resolves_within("/usr/bin", ("/usr",), budget=[10])
    chain = (
        "mkdir d; prev=d; for i in $(seq 39); do ln -s \"$prev/$(printf 'd/../%.0s' $(seq 400))\" l$i; prev=l$i; done"
    )
    many = "for i in $(seq 60); do ln -s l39 m$i; done; echo 42 > answer"
    verdict, _ = play(make_task(ANSWER_TEST), shell(f"{chain}; {many}"))
    assert verdict.reward == 1.0 and verdict.details["checkers"]["tests"]["not_carried"]


# -- the jail's own clock never reads as the server's ---------------------------------------------------------------


def test_no_episode_or_check_outlives_the_jails_clock():
    """As found: episodes of up to 24 h were allowed in jails that live an hour; the jail's end then read as the
    server losing the session (infra_error). Both are now bounded below the jail's hour, less the host's grace."""
    with pytest.raises(ValueError, match="less than or equal to 3480"):
        EpisodeLimits(episode_time_s=7200)
    with pytest.raises(ValueError, match="less than or equal to 3480"):
        make_task(ANSWER_TEST, checkers=[{"kind": "tests", "files": {"test.sh": "true"}, "timeout_s": 3600}])


# -- kept, and pinned ---------------------------------------------------------------------------------------------

COPYING_TEST = """#!/bin/bash
cp /tests/expected.txt /tmp/gs-expected.txt
cmp -s /app/answer /tmp/gs-expected.txt && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt
"""


@pytest.mark.xfail(strict=True, reason="known, not closed: a test that writes into the state writes through its links")
def test_a_test_that_copies_its_expected_file_into_tmp_writes_through_the_agents_link():
    """The test copies its hidden file to /tmp, part of the state it judges, where the agent left a link to its answer
    (or a decoy its answer links to): the copy lands where the agent pointed it. Harbor runs the test in the agent's
    own container and has the same exposure; tests should write their own files under $TMPDIR (fresh, empty)."""
    verdict, _ = play(make_task(COPYING_TEST), shell("touch answer; ln -s /app/answer /tmp/gs-expected.txt"))
    assert verdict.reward == 0.0


def test_the_same_test_writing_under_its_own_tmpdir_pays_nothing():
    safe = COPYING_TEST.replace("/tmp/gs-expected.txt", "$TMPDIR/gs-expected.txt")
    assert play(make_task(safe), shell("touch answer; ln -s /app/answer /tmp/gs-expected.txt"))[0].reward == 0.0
    assert play(make_task(safe), shell("echo hidden > answer"))[0].reward == 1.0


def test_a_task_that_asks_for_a_view_says_so_and_its_honest_view_pays():
    """The strict reading's honest twin: a task whose answer is a view the agent makes (agent_views) pays for it."""
    raw = sql_task("SELECT id FROM paid_orders ORDER BY id", [[1], [2]]).model_dump()
    raw["checkers"][0]["agent_views"] = True
    t = Task.model_validate(raw)
    make = "CREATE VIEW paid_orders AS SELECT id FROM orders WHERE customer = 7"
    assert play(t, call("sqlite", query=make))[0].reward == 1.0
    assert (
        play(sql_task("SELECT id FROM paid_orders ORDER BY id", [[1], [2]]), call("sqlite", query=make))[0].reward
        == 0.0
    )
