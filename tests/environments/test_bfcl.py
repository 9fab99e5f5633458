"""BFCL v4 multi-turn: every task loads with OpenAI tool schemas, its ground truth parses, and groupscore's check
(bfcl_check) gives BFCL's own checker's verdict (the oracle, run in the jail's `bfcl` environment, made by `make`) on
the ground truth and on thousands of perturbed trajectories, each batch run in one jail."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from bfcl_perturb import KINDS, perturb, perturbed_set

from groupscore.environments.bfcl import CATEGORIES, function_docs, load_bfcl, reference_trajectory
from groupscore.environments.bfcl_check import bfcl_check

JSON_TYPES = {"string", "integer", "number", "boolean", "array", "object"}
SEEDS = (0,)


def _schema_types(prop: dict) -> list[str]:
    out = [prop["type"]]
    for sub in prop.get("properties", {}).values():
        out += _schema_types(sub)
    if isinstance(prop.get("items"), dict):
        out += _schema_types(prop["items"])
    return out


@pytest.fixture(scope="module")
def tasks():
    return {t.id: t for t in load_bfcl()}


def test_every_task_of_the_four_categories_loads_with_bfcl_ids_and_openai_tool_schemas(tasks):
    for category in CATEGORIES:
        ids = [t.id for t in load_bfcl(category)]
        assert ids == [f"{category}_{i}" for i in range(200)]
    for task in tasks.values():
        assert task.checkers[0].compare == "bfcl" and task.classes
        for spec in task.classes:
            assert spec.python_env == "bfcl" and spec.module.startswith("bfcl_eval.")
            assert [s["function"]["name"] for s in spec.tool_schemas] == list(spec.methods)
            for schema in spec.tool_schemas:
                params = schema["function"]["parameters"]
                assert schema["type"] == "function" and params["type"] == "object"
                assert set(params["required"]) <= set(params["properties"])
                for prop in params["properties"].values():
                    assert set(_schema_types(prop)) <= JSON_TYPES, schema


def test_a_held_out_function_appears_at_its_turn_with_bfcls_prompt():
    task = load_bfcl("multi_turn_miss_func_0")[0]
    assert [t.add_tools for t in task.turns] == [(), (), (), ("sort",), ()]
    assert task.turns[3].messages[0]["content"].startswith("I have updated some more functions")
    assert load_bfcl("multi_turn_long_context_0")[0].classes[0].setup_args["long_context"] is True


def test_ground_truth_calls_parse_into_documented_tools_with_named_arguments(tasks):
    calls = 0
    for task in tasks.values():
        documented = {d["name"]: d for c in task.metadata["involved_classes"] for d in function_docs(c)}
        truth = task.metadata["ground_truth"]
        for strings, turn in zip(truth, reference_trajectory(task), strict=True):
            assert len(strings) == len(turn)
            for call in turn:
                calls += 1
                assert set(call["arguments"]) <= set(documented[call["name"]]["parameters"]["properties"])
    assert calls == 4625
    # a positional argument takes the documented parameter's name
    first = reference_trajectory(load_bfcl("multi_turn_base_0")[0])[2][0]
    assert first == {"name": "sort", "arguments": {"file_name": "final_report.pdf"}}


def _turn(calls, state, texts=None):
    texts = texts or ["ok"] * len(calls)
    return {
        "calls": [{"name": n, "arguments": {}, "text": t} for n, t in zip(calls, texts, strict=True)],
        "state": state,
    }


def test_the_check_follows_bfcls_rules_over_data():
    ref = [_turn(["cd"], {"A": {"x": 1}}), _turn([], {"A": {"x": 1}}), _turn(["ls"], {"A": {"x": 2}}, ["r"])]
    ok = [_turn(["cd"], {"A": {"x": 1.0, "extra": 5}}), _turn(["ls"], {"A": {"x": 9}}), _turn(["ls"], {"A": {"x": 2}})]
    # the empty reference turn is not checked; extra model attributes are ignored; 1 == 1.0; results already given
    # in an earlier turn count
    assert bfcl_check([*ok[:2], _turn(["ls"], {"A": {"x": 2}}, ["r"])], ref)[0] == 1.0
    assert bfcl_check(ok, ref)[1]["error_type"] == "multi_turn:execution_response_mismatch"
    assert bfcl_check(ok[:2], ref)[1]["error_type"] == "multi_turn:force_terminated"
    empty = [ok[0], ok[1], _turn([], {"A": {"x": 2}})]
    assert bfcl_check(empty, ref)[1]["error_type"] == "multi_turn:empty_turn_model_response"
    tuple_not_list = [_turn(["cd"], {"A": {"x": {"$tuple": [1]}}})]
    verdict = bfcl_check(tuple_not_list, [_turn(["cd"], {"A": {"x": [1]}})])
    assert verdict[1]["error_type"] == "multi_turn:instance_state_mismatch"


def test_perturbations_are_one_change_each_and_the_same_for_a_seed(tasks):
    task = tasks["multi_turn_base_0"]
    first, again = perturb(task, seed=3), perturb(task, seed=3)
    assert [p.turns for p in first] == [p.turns for p in again] and [p.kind for p in first] == list(KINDS)
    assert sum(map(len, first[0].turns)) == sum(map(len, reference_trajectory(task))) - 1
    assert sum(map(len, first[1].turns)) == sum(map(len, reference_trajectory(task))) + 1


def _tabled_disagreements() -> set[str]:
    table = (Path(__file__).with_name("data") / "bfcl_disagreements.md").read_text()
    return set(re.findall(r"^\| `([^`]+)` \|", table, flags=re.M))


@pytest.mark.usefixtures("jail_available")
def test_the_check_agrees_with_bfcls_checker_on_ground_truth_and_perturbed_trajectories(tasks):
    from bfcl_oracle import oracle_verdicts, replay_turns

    truth = [(f"truth:{t.id}", t, reference_trajectory(t)) for t in tasks.values()]
    perturbed = perturbed_set(list(tasks.values()), SEEDS)
    runs = truth + [(p.key, tasks[p.task_id], p.turns) for p in perturbed]
    assert len(perturbed) >= 2000
    verdicts = oracle_verdicts(runs)
    records = replay_turns(runs)
    disagree = set()
    for key, task, _turns in runs:
        reward, evidence = bfcl_check(records[key], records[f"truth:{task.id}"])
        oracle = verdicts[key]
        assert oracle["valid"] is not None, (key, oracle)
        same = (reward == 1.0) == oracle["valid"] and (
            oracle["valid"] or evidence["error_type"] == oracle["error_type"]
        )
        if not same:
            disagree.add(key)
    assert all(verdicts[k]["valid"] for k, _t, _ in truth), "BFCL's checker fails a ground truth"
    wrong = sum(not verdicts[p.key]["valid"] for p in perturbed)
    assert wrong > len(perturbed) // 2  # the set is mostly wrong trajectories, not a trivially passing one
    assert len(disagree) <= len(runs) // 100
    assert disagree == _tabled_disagreements()
