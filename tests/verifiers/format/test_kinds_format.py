"""The format verifier: tags in order with non-empty content, exactly once each; regexes matched in linear time."""

from __future__ import annotations

import time

import pytest
from pydantic import ValidationError

from groupscore.schema.verdict import Status
from groupscore.verifiers.registry import describe_error, parse_item, score_item


def score(completion: str, **fields):
    return score_item(parse_item({"verifier": "format", "completion": completion, **fields}))


GOOD = "<think>\nTwo and two make four.\n</think>\n<answer>4</answer>"


def test_think_then_answer_pays_and_extracts_the_last_tag():
    verdict = score(GOOD)
    assert (verdict.reward, verdict.status, verdict.extracted) == (1.0, Status.correct, "4")


@pytest.mark.parametrize(
    "completion, why",
    [
        ("<think>ok</think><answer></answer>", "empty answer"),
        ("<think>ok</think><answer>  \n </answer>", "whitespace-only answer"),
        ("<think></think><answer>4</answer>", "empty think"),
        ("<think>ok</think>", "answer missing"),
        ("<answer>4</answer><think>ok</think>", "tags out of order"),
        ("<think>ok</think><answer>4</answer><answer>5</answer>", "second answer block"),
        ("<think>ok <answer>3</answer></think><answer>4</answer>", "answer nested in think"),
        ("<think>ok</think><answer>4", "answer never closed"),
        ("</answer><think>ok</think><answer>4", "closing tag before opening tag"),
        ("<Think>ok</Think><answer>4</answer>", "tag names are case-sensitive"),
    ],
)
def test_malformed_tags_do_not_pay(completion, why):
    verdict = score(completion)
    assert verdict.reward == 0.0, why
    assert verdict.status == Status.incorrect
    assert verdict.reason


def test_outside_text_is_allowed_by_default_and_refused_when_configured():
    text = "Sure! " + GOOD + "\nHope this helps."
    assert score(text).reward == 1.0
    refused = score(text, allow_outside_text=False)
    assert refused.reward == 0.0 and "outside" in refused.reason
    assert score("  \n" + GOOD + "\n\n", allow_outside_text=False).reward == 1.0  # whitespace is fine


def test_partial_credit_is_the_fraction_of_checks_passed():
    verdict = score("<think>ok</think><answer></answer>", partial_credit=True)
    assert verdict.reward == pytest.approx(0.5) and verdict.status == Status.partial
    three = score("hi <think>ok</think><answer>4</answer>", partial_credit=True, allow_outside_text=False)
    assert three.reward == pytest.approx(2 / 3)


def test_custom_tag_list():
    completion = "<plan>a</plan><code>b</code><check>c</check>"
    assert score(completion, tags=["plan", "code", "check"]).reward == 1.0
    assert score(completion, tags=["plan", "check", "code"]).reward == 0.0


@pytest.mark.parametrize(
    "completion, expected", [("42", 1.0), ("  42\n", 1.0), ("42 apples", 0.0), ("x42", 0.0), ("", 0.0)]
)
def test_regex_must_match_the_whole_completion(completion, expected):
    assert score(completion, regex=r"\d+").reward == expected


def test_regex_without_strip_sees_surrounding_whitespace():
    assert score(" 42", regex=r"\d+", strip=False).reward == 0.0


def test_catastrophic_pattern_runs_in_linear_time():
    # `(a+)+$` takes exponential time in a backtracking engine on "aaaa...b".
    start = time.perf_counter()
    verdict = score("a" * 200_000 + "b", regex=r"(a+)+$")
    assert verdict.reward == 0.0
    assert time.perf_counter() - start < 2.0


def test_overlong_completion_scores_zero_unscanned():
    verdict = score("x" * 101, regex=r"x*", max_chars=100)
    assert verdict.reward == 0.0 and "max_chars" in verdict.reason


@pytest.mark.parametrize(
    "fields, path",
    [
        ({"regex": r"(a)\1"}, "format.regex"),  # backreference: not linear-time
        ({"regex": r"(?=a)a"}, "format.regex"),  # lookahead
        ({"regex": "(unclosed"}, "format.regex"),
        ({"regex": "a" * 3000}, "format.regex"),  # too long
        ({"tags": ["a b"]}, "format.tags"),
        ({"tags": []}, "format.tags"),
        ({"tags": ["answer", "answer"]}, "format.tags"),
        ({"tags": ["answer"], "regex": "x"}, "format"),  # two modes at once
        ({"max_chars": 0}, "format.max_chars"),
        ({"bogus": 1}, "format.bogus"),
    ],
)
def test_bad_fields_are_validation_errors_with_the_field_path(fields, path):
    with pytest.raises(ValidationError) as info:
        parse_item({"verifier": "format", "completion": "x", **fields})
    assert describe_error(info.value).startswith(path + ":")
