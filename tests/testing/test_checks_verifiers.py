"""groupscore's own verifiers pass every check: in process through the registry, behind TRL's and verl's
signatures, and through a real service on loopback."""

from __future__ import annotations

from pathlib import Path

import pytest

from groupscore.testing import CheckStatus, check_reward_fn
from groupscore.testing.commands import check_command

ROOT = Path(__file__).resolve().parents[2]
CHECKS = ROOT / "fixtures" / "checks"
MATH_CASES = CHECKS / "math_cases.jsonl"
CODE_CASES = CHECKS / "code_cases.jsonl"
FAST = dict(repeats=2, processes=1, fuzz_examples=12)


def test_the_math_kind_passes_every_check_from_the_command_line(tmp_path, capsys):
    assert check_command("math", MATH_CASES, tmp_path / "report.json") == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert "FAIL" not in out and "ERROR" not in out and "22 PASS" in out


@pytest.mark.parametrize("name", ["math_accuracy_reward", "math_compute_score"])
def test_the_math_verifier_behind_trl_and_verl_signatures_passes(name):
    report = check_reward_fn(f"{CHECKS}/planted_rewards.py:{name}", MATH_CASES, **FAST)
    assert report.exit_code == 0, report.table()
    assert report.target.startswith("verl" if name.endswith("compute_score") else "TRL")


@pytest.fixture(scope="module")
def code_report():
    return check_reward_fn("code", CODE_CASES, **FAST)


def test_the_code_kind_in_the_sandbox_passes_every_other_check(code_report):
    rows = {r.name: r for r in code_report.results}
    bad = [f"{r.name}: {r.detail}" for r in code_report.results if r.status is not CheckStatus.PASS]
    assert not bad, code_report.table()
    for probe in ("probe.exit_zero_before_tests", "probe.fake_pass_markers", "probe.eq_always_true"):
        assert rows[probe].status is CheckStatus.PASS
    assert "3 of 3" in rows["probe.reference"].detail


def test_the_code_kind_does_not_pay_hardcoded_public_tests(code_report):
    row = code_report.result("probe.hardcoded_public_tests")
    assert row.status is CheckStatus.PASS, row.detail


def test_a_service_url_passes_end_to_end(tmp_path, capsys):
    from groupscore.service.embedded import start_embedded

    with start_embedded(workers=1) as url:
        report = check_reward_fn(url, MATH_CASES, **FAST)
    assert report.exit_code == 0, report.table()
    assert report.target == f"scoring service at {url}"
    assert report.result("determinism.processes").status is CheckStatus.PASS


@pytest.mark.parametrize("kind", ["format", "json", "sql"])
def test_the_other_kinds_pass_every_check(kind):
    report = check_reward_fn(kind, CHECKS / f"{kind}_cases.jsonl", **FAST)
    assert report.exit_code == 0, report.table()
    if kind == "sql":
        assert report.result("probe.several_queries").status is CheckStatus.PASS
        assert "3 of 3" in report.result("probe.reference").detail


def test_the_default_math_kind_passes_the_several_boxes_probes():
    # Default settings (not strict): whether the math kind takes the last box (the probe recognises a last-answer
    # policy and explains it) or refuses different boxes as a hedge, neither several-boxes probe may fail.
    cases = [
        {
            "prompt": "Sam had three bags of four apples and ate two. How many are left?",
            "completion": "\\boxed{10}",
            "answer": "10",
        },
        {"prompt": "What is half of nine?", "completion": "\\boxed{4.5}", "answer": "4.5"},
    ]
    report = check_reward_fn("math", cases, checks=("probes",), processes=0)
    row = report.result("probe.several_boxed_gold_last")
    assert row.status is CheckStatus.PASS, row.detail
    assert report.result("probe.several_boxed_gold_first").status is CheckStatus.PASS
    assert report.failures == []
