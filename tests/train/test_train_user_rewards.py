"""The user's own reward functions beside the service's reward: called with TRL's signature and the rows' columns,
logged per component, folded into the reward and the group advantages the policy trains on; bad ones refused early."""

from __future__ import annotations

import asyncio
import json
import math
import re

import pytest

from groupscore.schema.advantages import group_stats
from groupscore.schema.verdict import Verdict
from groupscore.schema.wire import GroupResult
from groupscore.train.batch import batch_stats
from groupscore.train.completions import CompletionRollouts as ServiceReward
from groupscore.train.config import RewardsConfig
from groupscore.train.user_rewards import UserReward, load_reward_functions

CALLS: list[dict] = []


def brevity(prompts, completions, completion_ids, answer, log_metric, **kwargs):
    """A TRL-style reward: 1 for completions of at most 10 characters; None (does not apply) for empty ones."""
    CALLS.append({"answer": answer, "kwargs": sorted(kwargs), "ids": completion_ids})
    log_metric("brevity/seen", float(len(completions)))
    return [None if not c else float(len(c) <= 10) for c in completions]


async def mentions_answer(prompts, completions, answer, **kwargs):
    return [float(a in c) for c, a in zip(completions, answer)]


class FakeScorer:
    """The service's part: 1 when the completion contains '\\boxed{answer}', 'INFRA' is an infra_error."""

    async def ascore_groups(self, groups):
        out = []
        for g in groups:
            verdicts = []
            for i, c in enumerate(g["completions"]):
                if c == "INFRA":
                    verdicts.append(Verdict(id=i, reward=0.0, status="infra_error", details={"infra": "sandbox"}))
                else:
                    ok = f"\\boxed{{{g['item']['answer']}}}" in c
                    verdicts.append(Verdict(id=i, reward=float(ok), status="correct" if ok else "incorrect"))
            rewards = [v.reward for v in verdicts]
            out.append(
                GroupResult(
                    id=g["id"],
                    results=verdicts,
                    total=group_stats(rewards, masked=[v.status == "infra_error" for v in verdicts]),
                )
            )
        return out


def reward_with(functions: list[UserReward], service_weight: float = 1.0) -> ServiceReward:
    return ServiceReward(
        FakeScorer(),
        num_generations=3,
        extra=functions,
        service_weight=service_weight,
        task_columns={"a": {"answer": "7", "source": "gsm8k"}, "b": {"answer": "9", "source": "gsm8k"}},
    )


def call(reward: ServiceReward, completions: list[str], metrics: dict) -> list:
    task_ids = ["a"] * 3 + ["b"] * 3
    items = [json.dumps({"verifier": "math", "answer": "7"})] * 3 + [
        json.dumps({"verifier": "math", "answer": "9"})
    ] * 3
    return asyncio.run(
        reward(
            prompts=["p"] * 6,
            completions=completions,
            completion_ids=[[1, 2]] * 6,
            task_id=task_ids,
            item=items,
            trainer_state=None,
            log_extra=lambda *a, **k: None,
            log_metric=lambda name, value: metrics.__setitem__(name, value),
        )
    )


def test_functions_get_trls_arguments_and_the_rows_columns_and_add_to_the_service_reward():
    CALLS.clear()
    functions = [UserReward("brevity", 0.5, brevity, "m:brevity"), UserReward("mentions", 0.25, mentions_answer, "m:m")]
    reward, metrics = reward_with(functions), {}
    completions = ["\\boxed{7}", "a long wrong answer", "", "\\boxed{9} indeed, 9", "9", "INFRA"]
    out = call(reward, completions, metrics)
    # service + 0.5 * brevity (None adds nothing) + 0.25 * mentions; the infra_error stays None (masked)
    assert out == [1.0 + 0.5 + 0.25, 0.0 + 0.0 + 0.0, 0.0 + 0.0 + 0.0, 1.0 + 0.0 + 0.25, 0.0 + 0.5 + 0.25, None]
    (seen,) = CALLS
    assert seen["answer"] == ["7"] * 3 + ["9"] * 3 and seen["ids"] == [[1, 2]] * 6
    assert {"source", "task_id", "trainer_state", "log_extra"} <= set(seen["kwargs"])
    # over the values it gave (None: does not apply); its own judgement, so the service's infra_error counts too
    assert metrics["rewards/brevity/mean"] == pytest.approx(3 / 5)
    assert metrics["rewards/mentions/mean"] == pytest.approx(3 / 6) and metrics["brevity/seen"] == 6.0
    batch = reward.scored()
    assert batch.components["brevity"] == [1.0, 0.0, None, 0.0, 1.0, 1.0]


def test_advantages_are_recomputed_from_the_combined_reward_group_by_group():
    reward = reward_with([UserReward("brevity", 0.5, brevity, "m:brevity")])
    call(reward, ["\\boxed{7}", "a long wrong answer", "wrong", "\\boxed{9} indeed, 9", "9", "INFRA"], {})
    batch = reward.scored()
    first, second = batch.rewards[:3], batch.rewards[3:]
    assert first == [1.5, 0.0, 0.5] and second == [1.0, 0.5, None]
    mean, std = 2 / 3, math.sqrt(((1.5 - 2 / 3) ** 2 + (2 / 3) ** 2 + (0.5 - 2 / 3) ** 2) / 2)
    advantages = batch.advantages()
    assert advantages[:3] == pytest.approx([(r - mean) / (std + 1e-4) for r in first])
    assert advantages[5] == 0.0 and advantages[3] > 0 > advantages[4]  # the masked one moves nothing
    stats = batch_stats(batch)
    assert stats.reward_mean == pytest.approx((1.5 + 0 + 0.5 + 1.0 + 0.5) / 5) and stats.infra_errors == 1
    assert stats.components["brevity"].mean == pytest.approx(4 / 6)


def test_without_functions_the_advantages_trained_on_are_the_services_own():
    reward = ServiceReward(FakeScorer(), num_generations=3)
    call(reward, ["\\boxed{7}", "x", "INFRA", "\\boxed{9}", "z", "w"], {})
    batch = reward.scored()
    service = [a for g in asyncio.run(FakeScorer().ascore_groups(_groups(batch))) for a in g.total.advantages]
    assert batch.advantages() == service and service[2] == 0.0 and service[0] > 0


def _groups(batch):
    return [
        {
            "id": batch.task_ids[rows.start],
            "item": {"answer": "7" if batch.task_ids[rows.start] == "a" else "9"},
            "completions": batch.samples[rows],
        }
        for rows in batch.groups()
    ]


def test_a_flat_group_has_no_signal():
    from groupscore.schema.advantages import judged_stats

    for rewards in ([0.3, 0.3, None], [1.0, None], [0.1 + 0.2, 0.3]):
        stats = judged_stats(rewards)
        assert stats.advantages == [0.0] * len(rewards) or stats.zero_variance
        assert stats.zero_variance


def test_a_function_returning_the_wrong_shape_or_value_is_refused():
    bad_len = UserReward("short", 1.0, lambda prompts, completions, **k: [1.0], "m:short")
    with pytest.raises(ValueError, match="returned 1 values for 6 completions"):
        call(reward_with([bad_len]), ["a"] * 6, {})
    bad_value = UserReward("nan", 1.0, lambda prompts, completions, **k: [math.nan] * 6, "m:nan")
    with pytest.raises(ValueError, match="a finite number or None is needed"):
        call(reward_with([bad_value]), ["a"] * 6, {})


def test_loading_by_module_or_file_and_bad_references_name_their_field(tmp_path):
    loaded = load_reward_functions(
        RewardsConfig.model_validate(
            {
                "functions": [
                    {"function": f"{__name__}:brevity", "weight": 0.2},
                    {"function": f"{__name__}:mentions_answer", "name": "hit"},
                ]
            }
        )
    )
    assert [(u.name, u.weight, u.function) for u in loaded] == [
        ("brevity", 0.2, brevity),
        ("hit", 1.0, mentions_answer),
    ]
    source = tmp_path / "my_rewards.py"
    source.write_text("def strict(prompts, completions, **kwargs):\n    return [1.0 for _ in completions]\n")
    (from_file,) = load_reward_functions(
        RewardsConfig.model_validate({"functions": [{"function": f"{source}:strict"}]})
    )
    assert from_file.function(prompts=["p"], completions=["c"]) == [1.0]
    for ref, expected in [
        ("no_such_module_xyz:f", "rewards.functions.0.function: cannot load no_such_module_xyz:f (ModuleNotFoundError"),
        (f"{__name__}:nothing", f"cannot load {__name__}:nothing (AttributeError"),
        (f"{__name__}:CALLS", "is not callable (it is a list)"),
    ]:
        with pytest.raises(ValueError, match=re.escape(expected)):
            load_reward_functions(RewardsConfig.model_validate({"functions": [{"function": ref}]}))
    with pytest.raises(ValueError, match=r"rewards\.functions\.0\.name: 'correct' is taken"):
        load_reward_functions(
            RewardsConfig.model_validate({"functions": [{"function": f"{__name__}:brevity", "name": "correct"}]}),
            service_components=["correct", "format"],
        )
