"""The hypothesis strategies produce the edge shapes they promise, and the pytest helpers fail with clear messages."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from hypothesis import given, settings

from groupscore.testing import assert_handles, assert_not_hackable, strategies
from groupscore.testing.edges import MB, edge_completions

ROOT = Path(__file__).resolve().parents[2]
PLANTED = f"{ROOT}/fixtures/checks/planted_rewards.py"
BOUNDED = settings(max_examples=30, deadline=None, database=None)


@BOUNDED
@given(strategies.empty_or_whitespace())
def test_whitespace_strategy_is_blank(text):
    assert text.replace("\ufeff", "").replace("\u200b", "").strip() == ""  # BOM and zero-width space: blank too


@BOUNDED
@given(strategies.truncated("The answer is \\boxed{42}."))
def test_truncations_are_prefixes(text):
    assert "The answer is \\boxed{42}.".startswith(text)


@BOUNDED
@given(strategies.with_null_bytes("abc"))
def test_null_bytes_are_inserted_into_the_base(text):
    assert "\x00" in text and text.replace("\x00", "") == "abc"


@BOUNDED
@given(strategies.malformed_json())
def test_malformed_json_is_text(text):
    assert isinstance(text, str)


def test_huge_and_malformed_strategies_reach_their_shapes():
    @settings(max_examples=5, deadline=None, database=None)
    @given(strategies.huge_text())
    def check_huge(text):
        assert len(text) >= MB

    check_huge()
    seen = {"unbalanced": False, "open_box": False}

    @settings(max_examples=60, deadline=None, database=None, derandomize=True)
    @given(strategies.malformed_latex())
    def check_latex(text):
        seen["unbalanced"] |= text.count("{") != text.count("}")
        seen["open_box"] |= text.rstrip().endswith("\\boxed{")

    check_latex()
    assert seen["unbalanced"]

    broken = {"json": 0}

    @settings(max_examples=60, deadline=None, database=None, derandomize=True)
    @given(strategies.malformed_json())
    def check_json(text):
        try:
            json.loads(text)
        except ValueError:
            broken["json"] += 1

    check_json()
    assert broken["json"] > 10


def test_named_edges_cover_the_issue_list():
    edges = edge_completions("The answer is \\boxed{42}.")
    assert edges["empty"] == "" and edges["whitespace"].strip() == ""
    assert len(edges["huge_prose_1mb"]) >= MB and len(edges["huge_line_1mb"]) >= MB
    assert "\x00" in edges["null_bytes_inside"] and "\u202e" in edges["rtl"]
    assert edges["truncated_in_answer"].endswith("\\boxed{4")
    assert edges["latex_unclosed_box"].endswith("\\boxed{")
    assert any("```python" in v and v.count("```") == 1 for v in edges.values())
    with pytest.raises(ValueError):
        json.loads(edges["json_truncated"])


@settings(max_examples=40, deadline=None, database=None)
@given(strategies.completions(base="<think>x</think><answer>4</answer>", huge=False))
def test_a_sound_format_reward_survives_any_edge_completion(completion):
    assert assert_handles(f"{PLANTED}:strict_format_reward", completion) in (0.0, 1.0)


@settings(max_examples=15, deadline=None, database=None)
@given(strategies.completions(base="The answer is $\\boxed{4}$.", huge=False))
def test_the_math_verifier_survives_edge_completions(completion):
    reward = assert_handles("math", completion, answer="4", strict=True, timeout_s=10.0)
    assert 0.0 <= reward <= 1.0


def test_assert_handles_names_the_crash_the_hang_and_the_bad_value():
    def crashes(prompts, completions, **kwargs):
        return [1.0 / len(completions[0])]

    def hangs(prompts, completions, **kwargs):
        time.sleep(5)
        return [0.0]

    def out_of_range(prompts, completions, **kwargs):
        return [2.0]

    with pytest.raises(AssertionError, match=r"failed on '' \(0 chars\): ZeroDivisionError"):
        assert_handles(crashes, "")
    with pytest.raises(AssertionError, match=r"gave no answer within 0\.3 s"):
        assert_handles(hangs, "x", timeout_s=0.3)
    with pytest.raises(AssertionError, match=r"returned 2.0, outside \[0, 1\]"):
        assert_handles(out_of_range, "x")
    assert assert_handles(out_of_range, "x", reward_range=(-2, 2)) == 2.0


def test_assert_not_hackable_raises_with_the_failing_probe():
    with pytest.raises(AssertionError, match=r"probe\.or_hedge: FAIL"):
        assert_not_hackable(
            f"{PLANTED}:substring_accuracy_reward",
            [{"prompt": "2+2?", "completion": "\\boxed{4}", "answer": "4"}],
            processes=0,
        )
