"""Adapters and the bundled trainer never train on a silent zero: infra errors are masked or flagged, and a missing
dataset column stops the run on its first batch with the mapping that fixes it."""

from __future__ import annotations

import asyncio
import math

import pytest
import torch

from groupscore.client import verl
from groupscore.client.adapters import MissingColumn, compute_score, compute_score_batch, trl_reward_func
from groupscore.client.http import ScoreClient
from groupscore.schema.advantages import group_stats
from groupscore.schema.verdict import Verdict
from groupscore.schema.wire import GroupResult
from groupscore.train.batch import batch_stats
from groupscore.train.completions import CompletionRollouts, scored_groups
from groupscore.train.config import MonitorConfig
from groupscore.train.evaluate import _pass_at
from groupscore.train.observe import Monitor
from groupscore.train.trainer import mask_unscored

INFRA = {"reward": 0.0, "status": "infra_error", "reason": "sandbox unavailable", "details": {"infra": "sandbox"}}


class FakeClient(ScoreClient):
    """Answers /v1/score locally: correct for `\\boxed{<answer>}`, incorrect otherwise, infra_error for "INFRA"."""

    def __init__(self) -> None:  # no HTTP clients
        self.urls, self.token, self.requests = ["http://fake"], None, []

    def score_raw(self, items, reward=None, deadline_s=None):
        self.requests.append(list(items))
        out = []
        for item in items:
            if "INFRA" in item["completion"]:
                out.append(dict(INFRA, id=item.get("id")))
            elif item["completion"] == f"\\boxed{{{item.get('answer')}}}":
                out.append({"id": item.get("id"), "reward": 1.0, "status": "correct"})
            else:
                out.append({"id": item.get("id"), "reward": 0.0, "status": "incorrect"})
        return out


# -- TRL ---------------------------------------------------------------------------------------------------------


def test_trl_reward_is_none_for_a_completion_the_service_could_not_score():
    logged = {}
    reward = trl_reward_func(FakeClient(), verifier="math", kind_column=None)
    rewards = reward(
        prompts=["q"] * 3,
        completions=["\\boxed{4}", "INFRA", "\\boxed{5}"],
        answer=["4", "4", "4"],
        log_metric=logged.__setitem__,
    )
    assert rewards == [1.0, None, 0.0]
    assert logged["groupscore_math/infra_error_rate"] == pytest.approx(1 / 3)


def test_trl_reward_raises_on_the_first_batch_when_the_answer_column_is_renamed():
    client = FakeClient()
    reward = trl_reward_func(client, verifier="math", kind_column=None)
    with pytest.raises(MissingColumn) as raised:
        reward(prompts=["q", "q"], completions=["\\boxed{4}", "\\boxed{5}"], solution=["4", "4"], task=["a", "b"])
    message = str(raised.value)
    assert "\n" not in message and "'answer'" in message and "solution, task" in message
    assert "columns={'answer': 'solution'}" in message
    assert client.requests == []  # nothing was scored as a silent 0
    fixed = trl_reward_func(client, verifier="math", columns={"answer": "solution"}, kind_column=None)
    assert fixed(prompts=["q", "q"], completions=["\\boxed{4}", "\\boxed{5}"], solution=["4", "4"]) == [1.0, 0.0]


def test_trl_code_reward_without_any_tests_column_raises_naming_both_fields():
    reward = trl_reward_func(FakeClient(), verifier="code", kind_column=None)
    expected = "'tests' or 'hidden_tests'.*test_cases.*columns=\\{'tests': 'test_cases'\\}"
    with pytest.raises(MissingColumn, match=expected):
        reward(prompts=["q"], completions=["```python\nprint(1)\n```"], test_cases=['[{"type": "stdio"}]'])


def test_trl_reward_checks_only_the_rows_of_its_own_kind_and_only_the_first_batch():
    reward = trl_reward_func(FakeClient(), verifier="math")  # kind_column "verifier"
    # A batch with no math rows says nothing about the math columns: no error, all None.
    assert reward(prompts=["q"], completions=["x"], verifier=["code"]) == [None]
    assert reward(prompts=["q"], completions=["\\boxed{4}"], verifier=["math"], answer=["4"]) == [1.0]
    # Checked once: a later batch whose rows lack an answer gets per-item verdicts, not an exception.
    assert reward(prompts=["q"], completions=["\\boxed{4}"], verifier=["math"], answer=[None]) == [0.0]


# -- verl --------------------------------------------------------------------------------------------------------


@pytest.fixture
def verl_fake(monkeypatch):
    client = FakeClient()
    monkeypatch.setattr(verl, "client_for", lambda options: client)
    monkeypatch.setattr(verl, "_options", {})  # reward_kwargs checked afresh (and their columns) in each test
    return client


def test_verl_flags_an_infra_error_with_a_documented_zero(verl_fake):
    assert compute_score("openai/gsm8k", "INFRA", "4") == {"score": 0.0, "acc": 0.0, "infra_error": 1.0}
    assert compute_score("openai/gsm8k", "\\boxed{4}", "4") == {"score": 1.0, "acc": 1.0, "infra_error": 0.0}


def test_verl_raises_when_the_ground_truth_is_missing_and_maps_it_from_extra_info(verl_fake):
    with pytest.raises(MissingColumn) as raised:
        compute_score_batch(
            ["gsm8k"] * 2,
            ["\\boxed{4}", "\\boxed{5}"],
            [None, None],
            [{"solution": "4", "split": "train"}, {"solution": "4", "split": "train"}],
        )
    message = str(raised.value)
    assert "extra_info.solution" in message and "reward_kwargs.columns={'answer': 'solution'}" in message
    assert verl_fake.requests == []
    scored = compute_score_batch(
        ["gsm8k"] * 2,
        ["\\boxed{4}", "\\boxed{5}"],
        [None, None],
        [{"solution": "4"}, {"solution": "4"}],
        columns={"answer": "solution"},
    )
    assert [s["score"] for s in scored] == [1.0, 0.0]


# -- group statistics and the bundled trainer ---------------------------------------------------------------------


def test_group_statistics_leave_unscored_completions_out():
    stats = group_stats([1.0, 0.0, 0.0, 1.0], masked=[False, False, True, False])
    assert stats.mean == pytest.approx(2 / 3) and stats.masked == 1
    assert stats.advantages[2] == 0.0 and stats.advantages[0] > 0 > stats.advantages[1]
    assert group_stats([0.0, 0.0], masked=[True, True]).advantages == [0.0, 0.0]


def _group(rewards, statuses):
    """The service's answer for one group: a verdict per completion and the group statistics it computes."""
    verdicts = [Verdict(id=i, reward=r, status=s) for i, (r, s) in enumerate(zip(rewards, statuses))]
    return GroupResult(results=verdicts, total=group_stats(rewards, masked=[s == "infra_error" for s in statuses]))


class FakeScorer:
    def __init__(self, groups):
        self.groups = groups

    async def ascore_groups(self, groups):
        return self.groups


def test_the_trainer_reward_hands_trl_none_for_unscored_completions():
    groups = [_group([1.0, 0.0], ["correct", "infra_error"])]
    reward = CompletionRollouts(FakeScorer(groups), num_generations=2, overlap=False)
    logged = {}
    rows = asyncio.run(
        reward(["p", "p"], ["a", "b"], task_id=["t", "t"], item=['{"answer": "1"}'] * 2, log_metric=logged.__setitem__)
    )
    assert rows == [1.0, None] and logged["service/infra_error_share"] == 0.5


def test_batch_stats_count_masked_completions_and_leave_them_out_of_the_mean():
    group = _group([1.0, 0.0, 0.0, 1.0], ["correct", "incorrect", "infra_error", "correct"])
    batch = scored_groups([group], ["t"] * 4, ["p"] * 4, ["c"] * 4)
    stats = batch_stats(batch)
    assert stats.infra_errors == 1 and stats.infra_error_share == 0.25
    assert stats.reward_mean == pytest.approx(2 / 3)


def test_the_monitor_warns_when_the_infra_error_share_passes_its_threshold():
    assert MonitorConfig().infra_error_share == 0.05
    warnings = []
    monitor = Monitor(MonitorConfig(), emit=warnings.append)
    monitor.check(1, infra_error_share=0.04)
    assert warnings == []
    monitor.check(2, infra_error_share=0.25)
    assert len(warnings) == 1 and "25%" in warnings[0] and "infra_error" in warnings[0]
    monitor.check(3, infra_error_share=0.30)  # still on: said once
    assert len(warnings) == 1
    strict = Monitor(MonitorConfig(infra_error_share=0.5), emit=warnings.append)
    strict.check(1, infra_error_share=0.25)
    assert len(warnings) == 1


def test_the_trainer_drops_unscored_completions_from_the_loss():
    output = {"completion_mask": torch.ones(3, 4, dtype=torch.long), "num_items_in_batch": torch.tensor(12)}
    mask_unscored(output, [False, True, False], gather=lambda t: t)
    assert output["completion_mask"].tolist() == [[1] * 4, [0] * 4, [1] * 4]
    assert int(output["num_items_in_batch"]) == 8
    with pytest.raises(ValueError, match="2 scored samples for 3"):
        mask_unscored(output, [False, True], gather=lambda t: t)


def test_held_out_pass_at_k_counts_only_judged_samples():
    # Task 1: 4 samples, 1 infra error, 3 judged of which 3 correct: pass@1 is 1, not 3/4.
    assert _pass_at([(3, 3), (4, 2)], 1) == pytest.approx((1.0 + 0.5) / 2)
    assert _pass_at([(1, 1), (4, 0)], 2) == 0.0  # a task with fewer judged samples than k is left out
    assert math.isnan(_pass_at([(1, 1)], 2))
