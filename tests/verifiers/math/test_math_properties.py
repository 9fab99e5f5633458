"""Properties of the math verifier for any input: no exception, reward in [0, 1], whitespace does not matter,
and the same item always gets the same verdict (repeats, threads, processes with other hash seeds)."""

from __future__ import annotations

import json
import os
import pkgutil
import random
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groupscore.bounded import workers
from groupscore.schema.verdict import Status, Verdict
from groupscore.verifiers.math.item import MathItem
from groupscore.verifiers.registry import score_item

# Short budgets keep the suite fast; the properties hold for any budget.
BUDGET_S = 1.0
PROPERTY_SETTINGS = settings(
    max_examples=100, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow]
)

# Pieces that answers and completions are made of, so that generated text reaches every stage of the verifier,
# not only "no answer found".
TOKENS = [
    "\\boxed{",
    "\\fbox{",
    "}",
    "{",
    "\\frac",
    "\\dfrac",
    "\\sqrt",
    "^",
    "_",
    "(",
    ")",
    "[",
    "]",
    "\\{",
    "\\}",
    "\\left(",
    "\\right)",
    "\\pi",
    "e",
    "i",
    "\\mathrm{i}",
    "x",
    "y",
    "=",
    "<",
    "\\le",
    "+",
    "-",
    "\\pm",
    "*",
    "/",
    "\\cdot",
    ",",
    "{,}",
    ".",
    " ",
    "\n",
    "$",
    "\\$",
    "\\%",
    "%",
    "^\\circ",
    "\\text{ or }",
    "\\text{cm}",
    "0",
    "1",
    "2",
    "3",
    "7",
    "10",
    "0.5",
    ".5",
    "1,000",
    "1e5",
    "-3",
    "!",
    "\\infty",
    "\\emptyset",
    "\\cup",
    "\\begin{pmatrix}",
    "\\end{pmatrix}",
    "&",
    "\\\\",
    "#### ",
    "Final answer: ",
    "The answer is ",
    "The final answer is $",
    "$. I hope it is correct.",
    "<answer>",
    "</answer>",
    "(B)",
    "B",
    "\\sin",
    "\\log",
    "\\binom",
    "\\ln",
    "\\infty",
    "10^{10^{10}}",
    "9999999999!",
]

latexish = st.lists(st.sampled_from(TOKENS), max_size=30).map("".join)
any_text = st.one_of(st.text(max_size=200), latexish)
surrounding_space = st.text(alphabet=" \t\n\r", max_size=4)


def score(completion: str, answer: str) -> Verdict:
    return score_item(MathItem(completion=completion, answer=answer, timeout_s=BUDGET_S))


def comparable(verdict: Verdict) -> tuple:
    return verdict.reward, verdict.status, verdict.extracted


@pytest.fixture(scope="module", autouse=True)
def warm_verifier():
    import groupscore.verifiers.math as math_package

    workers.warm_up([f"groupscore.verifiers.math.{m.name}" for m in pkgutil.iter_modules(math_package.__path__)])


@PROPERTY_SETTINGS
@given(completion=any_text, answer=any_text)
def test_any_strings_give_a_verdict_with_reward_in_range(completion, answer):
    verdict = score(completion, answer)
    assert 0.0 <= verdict.reward <= 1.0
    assert verdict.reward in (0.0, 1.0)  # math rewards are all or nothing
    assert (verdict.reward == 1.0) == (verdict.status is Status.correct)


@PROPERTY_SETTINGS
@given(
    completion=latexish,
    answer=latexish,
    before=surrounding_space,
    after=surrounding_space,
    answer_before=surrounding_space,
    answer_after=surrounding_space,
)
def test_surrounding_whitespace_does_not_change_the_verdict(
    completion, answer, before, after, answer_before, answer_after
):
    plain = score(completion, answer)
    padded = score(before + completion + after, answer_before + answer + answer_after)
    if Status.timeout not in (plain.status, padded.status):  # a timeout depends on the machine, not the input
        assert comparable(padded) == comparable(plain)


@PROPERTY_SETTINGS
@given(completion=latexish, answer=latexish)
def test_repeats_give_the_same_verdict(completion, answer):
    first, second = score(completion, answer), score(completion, answer)
    if Status.timeout not in (first.status, second.status):
        assert comparable(first) == comparable(second)


# A fixed sample for the thread and process checks: fixture cases plus generated ones.
def sample_items() -> list[dict]:
    from groupscore.demo import load_math_cases

    rng = random.Random(7)
    generated = [
        {
            "verifier": "math",
            "completion": "".join(rng.choices(TOKENS, k=rng.randint(1, 25))),
            "answer": "".join(rng.choices(TOKENS, k=rng.randint(1, 8))),
        }
        for _ in range(60)
    ]
    orders = [
        {
            "verifier": "math",
            "completion": f"\\boxed{{\\{{{', '.join(map(str, order))}\\}}}}",
            "answer": "\\{1,2,3,4\\}",
        }
        for order in [(4, 3, 2, 1), (2, 4, 1, 3), (1, 2, 3, 5)]
    ]
    return [case.item for case in load_math_cases()[::3]] + generated + orders


def verdicts_here(items: list[dict]) -> list[tuple]:
    return [comparable(score_item(MathItem.model_validate(item))) for item in items]


def test_threads_give_the_same_verdicts_as_one_thread():
    items = sample_items()
    expected = verdicts_here(items)
    with ThreadPoolExecutor(max_workers=4) as pool:
        per_thread = list(pool.map(lambda item: comparable(score_item(MathItem.model_validate(item))), items * 2))
    for index, (got, want) in enumerate(zip(per_thread, expected * 2)):
        if Status.timeout not in (got[1], want[1]):
            assert got == want, items[index % len(items)]


SCORE_IN_SUBPROCESS = """
import json, sys
from groupscore.verifiers.math.item import MathItem
from groupscore.verifiers.registry import score_item
for line in sys.stdin:
    v = score_item(MathItem.model_validate(json.loads(line)))
    print(json.dumps([v.reward, v.status.value, v.extracted]))
"""


@pytest.mark.parametrize("hash_seed", ["0", "4242"])
def test_other_processes_with_other_hash_seeds_give_the_same_verdicts(hash_seed):
    items = sample_items()
    expected = verdicts_here(items)
    done = subprocess.run(
        [sys.executable, "-c", SCORE_IN_SUBPROCESS],
        input="".join(json.dumps(item) + "\n" for item in items),
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONHASHSEED": hash_seed},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    got = [tuple(json.loads(line)) for line in done.stdout.splitlines()]
    assert len(got) == len(items)
    for item, (reward, status, extracted), want in zip(items, got, expected):
        if Status.timeout not in (status, want[1]):
            assert (reward, status, extracted) == (want[0], want[1].value, want[2]), item
