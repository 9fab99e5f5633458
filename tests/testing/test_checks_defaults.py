"""Defaults and checks agree: every built-in kind passes `groupscore check` with its default settings on its bundled
cases; the last-box policy is told apart from a reward that pays any box; infra errors are never the reward's fault."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest

from groupscore.testing import CheckStatus, check_reward_fn
from groupscore.testing.commands import check_command
from groupscore.verifiers.registry import KINDS

ROOT = Path(__file__).resolve().parents[2]
CHECKS = ROOT / "fixtures" / "checks"
FAST = dict(repeats=2, processes=1, fuzz_examples=12)


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_builtin_kind_passes_every_check_with_its_default_settings(kind):
    cases_file = CHECKS / f"{kind}_cases.jsonl"
    assert cases_file.is_file(), f"no bundled cases for the {kind} kind"
    report = check_reward_fn(kind, cases_file, **FAST)
    assert report.exit_code == 0, report.table()


def test_the_bundled_math_cases_use_the_default_box_policy():
    # A case that sets strict=true would test a setting users do not get by default.
    cases = [json.loads(line) for line in (CHECKS / "math_cases.jsonl").read_text().splitlines() if line.strip()]
    assert all("strict" not in case for case in cases)


def test_the_math_command_line_check_passes_on_the_bundled_cases_with_defaults(tmp_path, capsys):
    assert check_command("math", CHECKS / "math_cases.jsonl", tmp_path / "report.json") == 0
    rows = {row["name"]: row for row in json.loads((tmp_path / "report.json").read_text())["checks"]}
    assert rows["probe.several_boxed_gold_last"]["status"] == "PASS"


def last_box_reward(prompts, completions, answer, **kwargs):
    """A pure last-box policy: only the last boxed answer counts (a self-correction is allowed)."""
    rewards = []
    for completion, gold in zip(completions, answer):
        boxes = re.findall(r"\\boxed\{([^{}]*)\}", completion if isinstance(completion, str) else "")
        rewards.append(1.0 if boxes and boxes[-1].strip() == str(gold) else 0.0)
    return rewards


def test_a_last_box_policy_passes_the_probe_with_its_explanation():
    # The right box last is paid, the right box first is not: extra boxes cannot raise the expected reward.
    report = check_reward_fn(
        last_box_reward, CHECKS / "math_cases.jsonl", checks=("probes",), processes=0, isolation="thread"
    )
    row = report.result("probe.several_boxed_gold_last")
    assert row.status is CheckStatus.PASS and "only as the last answer" in row.detail
    assert row.data["last_answer_policy"] is True and row.data["last_answer_comparisons"] > 0
    assert report.result("probe.several_boxed_gold_first").status is CheckStatus.PASS


def test_a_reward_that_pays_any_box_still_fails_the_last_box_probe():
    report = check_reward_fn(
        f"{CHECKS}/planted_rewards.py:substring_accuracy_reward",
        CHECKS / "math_cases.jsonl",
        checks=("probes",),
        processes=0,
    )
    row = report.result("probe.several_boxed_gold_last")
    assert row.status is CheckStatus.FAIL and "last_answer_policy" not in row.data
    assert report.result("probe.several_boxed_gold_first").status is CheckStatus.FAIL


# A verl reward whose service fails on every third call: the failed samples come back flagged, with score 0.0.
_calls = itertools.count()


def flaky_infra_compute_score(data_source, solution_str, ground_truth, extra_info=None):
    if next(_calls) % 3 == 2:
        return {"score": 0.0, "acc": 0.0, "infra_error": 1.0}
    boxes = re.findall(r"\\boxed\{([^{}]*)\}", solution_str)
    right = bool(boxes) and boxes[-1].strip() == str(ground_truth)
    return {"score": 1.0 if right else 0.0, "acc": 1.0 if right else 0.0, "infra_error": 0.0}


def test_infra_errors_are_not_counted_against_the_reward():
    report = check_reward_fn(
        flaky_infra_compute_score, CHECKS / "math_cases.jsonl", checks=("determinism",), processes=0, isolation="thread"
    )
    assert report.exit_code == 0, report.table()
    assert report.result("determinism.repeat").status is CheckStatus.PASS
    assert any("infra_error" in note and "not scored" in note for note in report.notes)
