"""Targets: each adapter calls its reward the way the real framework would; cases files fail loudly and precisely."""

from __future__ import annotations

import json

import pytest

from groupscore.testing import (
    Case,
    CasesError,
    RewardFunctionTarget,
    TargetError,
    VerifierTarget,
    VerlScoreTarget,
    as_target,
    load_cases,
)
from groupscore.testing.call_result import run_call
from groupscore.testing.targets import ServiceTarget, build_target, item_for_case, resolve_target

CASES = [
    Case("What is 2+2?", "It is \\boxed{4}.", {"answer": "4", "level": 1}, "c0"),
    Case("What is 3+3?", "It is \\boxed{7}.", {"answer": "6"}, "c1"),
]


def test_trl_target_passes_what_grpo_trainer_passes():
    seen = {}

    def reward(prompts, completions, completion_ids, answer, level, trainer_state, log_extra, log_metric):
        seen.update(
            prompts=prompts,
            completions=completions,
            ids=completion_ids,
            answer=answer,
            level=level,
            step=trainer_state.global_step,
        )
        log_metric("x", 1.0)
        return [1.0, 0.0]

    assert RewardFunctionTarget(reward).score(CASES) == [1.0, 0.0]
    assert seen["prompts"] == ["What is 2+2?", "What is 3+3?"]
    assert seen["answer"] == ["4", "6"]
    assert seen["level"] == [1, None]  # a column missing from one case is None there, as in a padded dataset
    assert seen["ids"][0] == list(b"It is \\boxed{4}.")
    assert seen["step"] == 0


def test_trl_target_awaits_async_rewards_and_keeps_conversational_format():
    async def reward(prompts, completions, **kwargs):
        return [float(len(c[-1]["content"]) > 3) for c in completions]

    chat = Case([{"role": "user", "content": "hi"}], [{"role": "assistant", "content": "hello"}], {}, "chat")
    assert chat.conversational
    edge = chat.with_completion("")
    assert edge.completion == [{"role": "assistant", "content": ""}]
    assert RewardFunctionTarget(reward).score([chat, edge]) == [1.0, 0.0]


def test_a_reward_without_kwargs_fails_as_it_would_under_trl():
    def reward(prompts, completions):  # TRL always passes completion_ids and the columns
        return [0.0] * len(completions)

    outcome = run_call(RewardFunctionTarget(reward), CASES)
    assert not outcome.ok and "TypeError" in outcome.error and "unexpected keyword" in outcome.error


def test_verl_target_by_signature_reads_dict_scores_and_ground_truth():
    def compute_score(data_source, solution_str, ground_truth, extra_info=None):
        return {"score": 1.0 if ground_truth in solution_str else 0.0, "acc": True}

    target = as_target(compute_score)
    assert isinstance(target, VerlScoreTarget)
    assert target.score(CASES) == [1.0, 0.0]
    with pytest.raises(CasesError, match="ground_truth"):
        target.validate([Case("p", "c", {}, "x")])


def test_module_level_functions_can_be_rebuilt_in_another_process_and_lambdas_cannot():
    target = as_target(json.dumps)
    spec = target.spec()
    assert spec is not None and spec.ref == "json:dumps"
    assert build_target(spec).fn is json.dumps
    assert as_target(lambda prompts, completions, **kw: [0.0] * len(completions)).spec() is None


def test_verifier_target_builds_registry_items_from_case_fields():
    case = Case("chat prompt", "x", {"answer": "4", "strict": True, "unrelated": 1}, "c")
    assert item_for_case(case, "math") == {
        "answer": "4",
        "strict": True,
        "verifier": "math",
        "completion": "x",
        "question": "chat prompt",
    }  # the math kind reads the prompt as the question
    code = Case("Write add", "```python\n```", {"tests": [], "item_prompt": "def add(a, b):\n"}, "k")
    assert item_for_case(code, "code")["prompt"] == "def add(a, b):\n"  # never the chat prompt
    with pytest.raises(CasesError, match="not a valid math item"):
        VerifierTarget("math").validate([Case("p", "c", {}, "bad")])


def test_resolve_target_forms(tmp_path):
    assert isinstance(resolve_target("math"), VerifierTarget)
    service = resolve_target("http://127.0.0.1:9/#math")
    assert isinstance(service, ServiceTarget) and service.url == "http://127.0.0.1:9" and service.default_kind == "math"
    module = tmp_path / "rewards_here.py"
    module.write_text("def r(prompts, completions, **kw):\n    return [0.5] * len(completions)\n")
    target = resolve_target(f"{module}:r")
    assert isinstance(target, RewardFunctionTarget) and target.score(CASES) == [0.5, 0.5]
    with pytest.raises(TargetError, match="has no attribute"):
        resolve_target(f"{module}:missing")
    with pytest.raises(TargetError, match="ModuleNotFoundError"):
        resolve_target("no_such_module_xyz:r")
    with pytest.raises(TargetError, match="unknown target"):
        resolve_target("not-a-kind")


def test_a_service_that_is_not_there_is_a_target_error():
    with pytest.raises(TargetError, match="no ready scoring service"):
        ServiceTarget("http://127.0.0.1:9").validate([Case("p", "c", {"answer": "1"}, "x")])


@pytest.mark.parametrize(
    "line, message",
    [
        ("[1, 2]", "must be a JSON object"),
        ('{"prompt": "p"}', "missing field 'completion'"),
        ('{"prompt": "p", "completion": 3}', "must be a string or a list"),
        ('{"prompt": "p", "completion": "c", "completion_ids": [1]}', "filled in by the checker"),
        ('{"prompt": "p", "completion": "c"', "invalid JSON"),
    ],
)
def test_bad_case_lines_name_the_line_and_the_problem(tmp_path, line, message):
    path = tmp_path / "cases.jsonl"
    path.write_text('# a comment\n{"prompt": "p", "completion": "c"}\n\n' + line + "\n")
    with pytest.raises(CasesError, match=message) as err:
        load_cases(path)
    assert "cases.jsonl:4" in str(err.value)


def test_an_empty_or_missing_cases_file_is_an_error(tmp_path):
    (tmp_path / "empty.jsonl").write_text("\n# nothing\n")
    with pytest.raises(CasesError, match="no cases"):
        load_cases(tmp_path / "empty.jsonl")
    with pytest.raises(CasesError, match="not found"):
        load_cases(tmp_path / "absent.jsonl")


def test_conversational_cases_run_through_every_check():
    from pathlib import Path

    from groupscore.testing import check_reward_fn

    planted = Path(__file__).resolve().parents[2] / "fixtures" / "checks" / "planted_rewards.py"
    chat = [
        {
            "prompt": [{"role": "user", "content": "What is 6 * 7?"}],
            "completion": [{"role": "assistant", "content": "<think>6 * 7 = 42</think><answer>42</answer>"}],
            "answer": "42",
        },
        {
            "prompt": [{"role": "user", "content": "What is 2 + 2?"}],
            "completion": [{"role": "assistant", "content": "It is \\boxed{4}."}],
            "answer": "4",
        },
    ]
    report = check_reward_fn(f"{planted}:exact_final_answer_reward", chat, repeats=1, processes=1, fuzz_examples=5)
    assert report.exit_code == 0, report.table()
    assert "on 4 of 4 comparisons" in report.result("probe.reference").detail
