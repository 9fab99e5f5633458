"""score_math end to end: statuses, extracted answers and reasons, strict mode, the symbolic worker, determinism."""

from __future__ import annotations

import threading

import pytest

from groupscore.schema.verdict import Status
from groupscore.verifiers.math.item import MathItem
from groupscore.verifiers.math.verify import score_math
from groupscore.verifiers.registry import parse_item, score_item


def score(completion: str, answer: str, **knobs):
    return score_math(MathItem(completion=completion, answer=answer, **knobs))


def test_correct_answer_carries_extraction_and_reason():
    verdict = score("Adding up: $\\boxed{\\dfrac{1}{2}}$", "0.5")
    assert (verdict.status, verdict.reward, verdict.extracted) == (Status.correct, 1.0, "\\dfrac{1}{2}")
    assert verdict.reason == "numeric match"
    assert verdict.details["source"] == "boxed"


def test_wrong_answer_is_incorrect():
    verdict = score("\\boxed{41}", "42")
    assert (verdict.status, verdict.reward) == (Status.incorrect, 0.0)


def test_no_answer_and_empty_box():
    assert score("I could not work it out.", "42").status == Status.no_answer
    assert score("\\boxed{}", "42").status == Status.no_answer


def test_an_overlong_box_is_unparsable():
    verdict = score("\\boxed{" + "1+" * 5000 + "1} and more text " * 2, "42")
    assert verdict.status == Status.unparsable and verdict.reward == 0.0


def test_an_expression_past_the_guards_is_refused_without_hanging():
    verdict = score("\\boxed{10^{10^{10}}}", "7")
    assert verdict.status == Status.unparsable and "limits" in verdict.reason
    assert score("\\boxed{10^{10^{10}}}", "10^{10^{10}}").status == Status.correct  # identical strings still match


def test_strict_mode_scores_different_boxes_as_a_hedge_and_equal_ones_as_an_answer():
    completion = "First $\\boxed{6}$, then I fixed it: $\\boxed{7}$."
    assert score(completion, "7").status == Status.correct
    hedged = score(completion, "7", strict=True)
    assert hedged.status == Status.incorrect and hedged.details.get("hedge")
    assert score("$\\boxed{\\frac12}$ so $\\boxed{0.5}$", "1/2", strict=True).status == Status.correct


def test_hedge_is_incorrect_with_a_reason():
    verdict = score("$\\boxed{6 \\text{ or } 7}$", "6")
    assert verdict.status == Status.incorrect and verdict.reason.startswith("hedge")


def test_symbolic_comparisons_run_in_the_worker():
    verdict = score("\\boxed{\\lfloor 7.5 \\rfloor}", "7", timeout_s=30.0)
    assert verdict.status == Status.correct and verdict.details["method"] == "symbolic"
    assert score("\\boxed{\\arccos(0)}", "\\frac{\\pi}{3}", timeout_s=30.0).status == Status.incorrect


def test_a_symbolic_step_past_its_budget_is_a_timeout():
    score("\\boxed{\\lfloor 1.5 \\rfloor}", "1", timeout_s=30.0)  # the pool is up, so only the budget is short
    verdict = score("\\boxed{\\lfloor 123.5 \\rfloor}", "123", timeout_s=1e-6)
    assert verdict.status == Status.timeout and verdict.reward == 0.0


def test_the_reference_may_be_stored_in_any_form():
    for stored in ("42", "$42$", "\\boxed{42}", "$\\boxed{42}$", "\\(42\\)", "Work.\n#### 42"):
        assert score("The answer is 42.", stored).status == Status.correct, stored


def test_a_bad_reference_is_an_error_not_a_crash():
    assert score("\\boxed{1}", "   ").status == Status.error
    assert score("\\boxed{1}", "1+" * 5000 + "1").status == Status.error


def test_scoring_through_the_registry_keeps_the_id():
    item = parse_item({"id": "q7", "verifier": "math", "completion": "#### 1,234", "answer": "1234"})
    verdict = score_item(item)
    assert (verdict.id, verdict.status) == ("q7", Status.correct)


@pytest.mark.parametrize(
    "completion, answer",
    [("\\boxed{x^2+2x+1}", "(x+1)^2"), ("\\boxed{3}", "4"), ("\\boxed{\\arctan(1)}", "\\frac{\\pi}{4}")],
)
def test_the_same_item_gives_the_same_verdict_across_repeats_and_threads(completion, answer):
    item = MathItem(completion=completion, answer=answer, timeout_s=30.0)
    first = score_math(item)
    results = []
    threads = [threading.Thread(target=lambda: results.append(score_math(item))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(results) == 8 and all(r == first for r in results)


def test_only_short_answers_are_cached():
    from groupscore.verifiers.math.caching import MAX_KEY_CHARS, short_key_cache

    calls = []

    @short_key_cache(maxsize=8)
    def echo(text):
        calls.append(text)
        return text

    short, long = "a" * 10, "b" * (MAX_KEY_CHARS + 1)
    for _ in range(3):
        echo(short)
        echo(long)
    assert calls.count(short) == 1 and calls.count(long) == 3


def test_an_expression_copied_from_the_question_does_not_pay_a_numeric_reference():
    question = "Compute 3 * 4 - 2."
    copied = score_math(MathItem(completion="<answer>3 * 4 - 2</answer>", answer="10", question=question))
    assert copied.reward == 0.0 and copied.status == "incorrect" and "arithmetic left to do" in copied.reason
    # without the question the same text is an (unsimplified) right answer; with it, the evaluated value still pays
    assert score_math(MathItem(completion="<answer>3 * 4 - 2</answer>", answer="10")).reward == 1.0
    assert score_math(MathItem(completion="<answer>10</answer>", answer="10", question=question)).reward == 1.0
    # a non-numeric reference may legitimately repeat the question's own notation
    same = score_math(MathItem(completion="\\boxed{x^2+1}", answer="1+x^2", question="Simplify x^2+1+0."))
    assert same.reward == 1.0
