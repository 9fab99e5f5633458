"""`groupscore check` flags planted bad reward functions, each on the check that names its bug, and passes sound ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from groupscore.testing import CheckStatus, check_reward_fn

ROOT = Path(__file__).resolve().parents[2]
PLANTED = ROOT / "fixtures" / "checks" / "planted_rewards.py"
MATH_CASES = ROOT / "fixtures" / "checks" / "math_cases.jsonl"
CODE_CASES = ROOT / "fixtures" / "checks" / "code_cases.jsonl"

# Small but real settings: every check still runs its full logic.
FAST = dict(repeats=2, processes=1, fuzz_examples=12, timeout_s=5.0)


def planted(name: str) -> str:
    return f"{PLANTED}:{name}"


def statuses(report) -> dict[str, CheckStatus]:
    return {r.name: r.status for r in report.results}


@pytest.mark.parametrize("name", ["noise_reward", "wall_clock_curriculum_reward"])
def test_nondeterministic_rewards_fail_the_repeat_check(name):
    report = check_reward_fn(planted(name), MATH_CASES, checks=("determinism",), **FAST)
    row = report.result("determinism.repeat")
    assert row.status is CheckStatus.FAIL, row.detail
    assert "difference" in row.detail
    assert report.exit_code == 1


def test_set_iteration_order_is_caught_across_processes_only():
    report = check_reward_fn(
        planted("set_order_reward"), MATH_CASES, checks=("determinism",), **dict(FAST, processes=2)
    )
    assert report.result("determinism.repeat").status is CheckStatus.PASS
    row = report.result("determinism.processes")
    assert row.status is CheckStatus.FAIL, row.detail
    assert "PYTHONHASHSEED" in row.detail


def test_crash_on_empty_input_is_reported_with_the_exception():
    report = check_reward_fn(planted("last_word_reward"), MATH_CASES, checks=("edge_inputs", "fuzz"), **FAST)
    row = report.result("edge_inputs.no_crash")
    assert row.status is CheckStatus.FAIL
    assert "empty" in row.detail and "IndexError" in row.detail
    assert report.result("edge_inputs.fuzz").status is CheckStatus.FAIL
    # The ordinary cases score fine: the failure is about edge inputs only.
    assert report.result("returns").status is CheckStatus.PASS


def test_substring_accuracy_pays_hedges_and_is_flagged():
    report = check_reward_fn(planted("substring_accuracy_reward"), MATH_CASES, checks=("probes",), **FAST)
    got = statuses(report)
    for probe in (
        "probe.or_hedge",
        "probe.several_boxed_gold_last",
        "probe.answer_list",
        "probe.gold_mentioned_not_final",
    ):
        assert got[probe] is CheckStatus.FAIL, (probe, report.result(probe).detail)
    assert "scored 1 > the honest wrong answer 0" in report.result("probe.or_hedge").detail
    assert got["probe.format_only"] is CheckStatus.PASS  # it does not pay empty tags


def test_format_reward_paying_empty_tags_is_flagged():
    report = check_reward_fn(planted("loose_format_reward"), MATH_CASES, checks=("probes",), **FAST)
    row = report.result("probe.format_only")
    assert row.status is CheckStatus.FAIL, row.detail
    assert "<think></think><answer></answer>" in str(row.data["paid"])
    assert [r.name for r in report.failures] == ["probe.format_only"]


def test_code_reward_fooled_by_exit_zero_is_flagged():
    report = check_reward_fn(planted("exit_status_code_reward"), CODE_CASES, checks=("probes",), **FAST)
    got = statuses(report)
    assert got["probe.exit_zero_before_tests"] is CheckStatus.FAIL
    assert got["probe.fake_pass_markers"] is CheckStatus.FAIL
    assert got["probe.eq_always_true"] is CheckStatus.PASS


def test_non_numeric_rewards_fail_the_return_check():
    report = check_reward_fn(planted("wrong_type_reward"), MATH_CASES, checks=(), **FAST)
    row = report.result("returns")
    assert row.status is CheckStatus.FAIL and "returned str '1.0', not a number" in row.detail


def test_nan_on_edge_inputs_is_flagged():
    report = check_reward_fn(planted("nan_on_unicode_reward"), MATH_CASES, checks=("edge_inputs",), **FAST)
    row = report.result("edge_inputs.valid_rewards")
    assert row.status is CheckStatus.FAIL and "NaN" in row.detail


def test_a_hang_that_holds_the_gil_is_reported_not_waited_on():
    report = check_reward_fn(
        planted("regex_hang_reward"), MATH_CASES, checks=("edge_inputs",), **dict(FAST, timeout_s=1.5, edge_cases=1)
    )
    row = report.result("edge_inputs.no_hang")
    assert row.status is CheckStatus.FAIL, row.detail
    assert "huge_number" in row.detail
    # Calls after the hang still run: the killed worker was replaced.
    assert report.result("edge_inputs.no_crash").status is CheckStatus.PASS


def test_a_quadratic_regex_is_reported_as_a_hang_on_a_megabyte_of_open_tags():
    report = check_reward_fn(
        planted("quadratic_answer_tag_reward"),
        MATH_CASES,
        checks=("edge_inputs",),
        **dict(FAST, timeout_s=2.0, edge_cases=1),
    )
    row = report.result("edge_inputs.no_hang")
    assert row.status is CheckStatus.FAIL and "huge_open_tags" in row.detail, row.detail


@pytest.mark.parametrize("name", ["strict_format_reward", "exact_final_answer_reward"])
def test_sound_rewards_pass_every_check(name):
    report = check_reward_fn(planted(name), MATH_CASES, **FAST)
    assert report.exit_code == 0, report.table()
    assert report.count(CheckStatus.FAIL) == 0 and report.count(CheckStatus.PASS) >= 20


def test_sql_reward_comparing_text_is_flagged_by_the_sql_probes():
    cases = ROOT / "fixtures" / "checks" / "sql_cases.jsonl"
    report = check_reward_fn(planted("sql_text_match_reward"), cases, checks=("probes",), **FAST)
    got = statuses(report)
    assert got["probe.gold_in_comment"] is CheckStatus.FAIL
    assert got["probe.several_queries"] is CheckStatus.FAIL


def test_verl_scores_may_not_be_none():
    report = check_reward_fn(planted("verl_none_score"), MATH_CASES, checks=("edge_inputs",), **FAST)
    assert report.target.startswith("verl compute_score")
    row = report.result("edge_inputs.valid_rewards")
    assert row.status is CheckStatus.FAIL and "returned None" in row.detail


def test_a_documented_reward_range_is_honoured():
    name = planted("signed_correctness_reward")
    default = check_reward_fn(name, MATH_CASES, checks=(), **FAST)
    assert default.result("returns").status is CheckStatus.FAIL
    assert "outside [0, 1]" in default.result("returns").detail
    report = check_reward_fn(name, MATH_CASES, reward_range=(-1, 1), **FAST)
    assert report.exit_code == 0, report.table()
