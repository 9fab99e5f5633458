"""A training run records the verifier versions that scored it and refuses to mix two versions of one kind."""

from __future__ import annotations

from pathlib import Path

import pytest

from groupscore.schema.verdict import Verdict
from groupscore.schema.wire import GroupResult
from groupscore.train.config import load_config
from groupscore.train.pipeline import report_text
from groupscore.train.scoring import ServiceScorer
from groupscore.train.summary import RunSummary
from groupscore.train.versions import ALLOW_FLAG, MixedVerifierVersions, VersionLedger

TASKSETS = Path(__file__).resolve().parents[2] / "train" / "tasks"


def group(*tags):
    n = len(tags)
    return GroupResult.model_validate(
        {
            "id": "g",
            "results": [{"status": "correct", "reward": 1.0, "verifier_version": t} for t in tags],
            "total": {"rewards": [1.0] * n, "mean": 1.0, "std": 0.0, "advantages": [0.0] * n, "zero_variance": True},
        }
    )


class FakeClient:
    """Stands in for the service: answers each call with the next prepared groups."""

    def __init__(self, *answers):
        self.answers = list(answers)

    def score_groups(self, groups, reward=None):
        return self.answers.pop(0)

    def close(self):
        pass


def scorer_with(*answers, allow_mixed=False):
    scorer = ServiceScorer(["http://127.0.0.1:9"], allow_mixed_versions=allow_mixed)  # never contacted
    scorer._sync = FakeClient(*answers)
    return scorer


def test_one_version_per_kind_is_recorded_for_the_summary():
    scorer = scorer_with([group("math@2", "math@2", None)], [group("format@1+math@2")])
    scorer.score_groups([{}])
    scorer.score_groups([{}])
    assert scorer.versions.summary() == {"format": 1, "math": 2}


def test_a_second_version_of_a_kind_stops_the_run_with_one_line_naming_the_flag():
    scorer = scorer_with([group("math@2")], [group("math@3")])
    scorer.score_groups([{}])
    with pytest.raises(MixedVerifierVersions) as info:
        scorer.score_groups([{}])
    message = str(info.value)
    assert "\n" not in message and ALLOW_FLAG in message and "math@2" in message and "math@3" in message
    assert isinstance(info.value, ValueError)  # the CLI prints it as one line, no traceback


def test_a_composite_tag_counts_for_each_of_its_kinds():
    ledger = VersionLedger()
    ledger.record([Verdict(reward=1.0, status="correct", verifier_version="format@1+math@2")])
    with pytest.raises(MixedVerifierVersions, match="'format'"):
        ledger.record([Verdict(reward=1.0, status="correct", verifier_version="format@2")])


def test_mixing_is_allowed_when_the_config_says_so():
    scorer = scorer_with([group("math@2")], [group("math@3", "math@2")], allow_mixed=True)
    scorer.score_groups([{}])
    scorer.score_groups([{}])
    assert scorer.versions.summary() == {"math": [2, 3]}
    summary = RunSummary(
        run_dir="r",
        device="cpu",
        precision="fp32",
        seed=0,
        selected_model="m",
        plots={},
        logs={},
        seconds=1,
        verifier_versions=scorer.versions.summary(),
    )
    assert "verifier versions: math@2 and math@3 (mixed)" in report_text(summary)


def test_the_flag_is_a_service_config_field_and_off_by_default(tmp_path):
    base = (
        f"run_dir: runs/x\nmodel: {{tiny: {{}}}}\ntaskset: {{train: {TASKSETS}/arith/train.jsonl, "
        f"eval: {TASKSETS}/arith/heldout.jsonl}}\n"
    )
    path = tmp_path / "c.yaml"
    path.write_text(base)
    assert load_config(path).service.allow_mixed_verifier_versions is False
    path.write_text(base + "service: {allow_mixed_verifier_versions: true}\n")
    assert load_config(path).service.allow_mixed_verifier_versions is True
    assert ALLOW_FLAG == "service.allow_mixed_verifier_versions"
