"""Completion rollouts keep TRL's generation batch in its groups, start scoring right after generation and collect
the prefetched scores exactly once."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from groupscore.schema.verdict import Verdict
from groupscore.schema.wire import GroupResult, GroupStats
from groupscore.train.completions import CompletionRollouts as ServiceReward


class RecordingScorer:
    """Scores '\\boxed{answer}' as 1, anything else 0; remembers every request."""

    def __init__(self):
        self.requests = []

    async def ascore_groups(self, groups):
        self.requests.append(groups)
        out = []
        for g in groups:
            rewards = [float(c == f"\\boxed{{{g['item']['answer']}}}") for c in g["completions"]]
            mean = sum(rewards) / len(rewards)
            verdicts = [Verdict(id=i, reward=r, status="correct" if r else "incorrect") for i, r in enumerate(rewards)]
            out.append(
                GroupResult(
                    id=g["id"],
                    results=verdicts,
                    total=GroupStats(
                        rewards=rewards,
                        mean=mean,
                        std=0.0,
                        advantages=[r - mean for r in rewards],
                        zero_variance=len(set(rewards)) == 1,
                    ),
                )
            )
        return out


def rows(task_answers: list[tuple[str, str]], g: int) -> tuple[list[str], list[str]]:
    task_ids, items = [], []
    for task_id, answer in task_answers:
        task_ids += [task_id] * g
        items += [json.dumps({"verifier": "math", "answer": answer})] * g
    return task_ids, items


def call(reward, completions, task_ids, items, **kw):
    return asyncio.run(
        reward(prompts=["p"] * len(completions), completions=completions, task_id=task_ids, item=items, **kw)
    )


def test_batch_is_sent_as_one_group_per_prompt_in_order():
    scorer = RecordingScorer()
    reward = ServiceReward(scorer, num_generations=2)
    task_ids, items = rows([("a", "1"), ("b", "2")], 2)
    metrics = {}
    out = call(
        reward,
        ["\\boxed{1}", "x", "y", "\\boxed{2}"],
        task_ids,
        items,
        log_metric=lambda name, value: metrics.__setitem__(name, value),
    )
    assert out == [1.0, 0.0, 0.0, 1.0]
    (groups,) = scorer.requests
    assert [(g["id"], g["item"]["answer"], g["completions"]) for g in groups] == [
        ("a", "1", ["\\boxed{1}", "x"]),
        ("b", "2", ["y", "\\boxed{2}"]),
    ]
    assert "completion" not in groups[0]["item"]  # the service fills in each completion itself
    assert metrics["service/zero_variance_share"] == 0.0
    assert reward.scored().task_ids == task_ids


def test_groups_that_are_not_contiguous_are_refused():
    reward = ServiceReward(RecordingScorer(), num_generations=2)
    task_ids, items = rows([("a", "1"), ("b", "2")], 2)
    with pytest.raises(ValueError, match="mix tasks"):
        call(reward, ["1", "2", "3", "4"], [task_ids[0], task_ids[2], task_ids[1], task_ids[3]], items)
    with pytest.raises(ValueError, match="not made of whole groups"):
        call(reward, ["1", "2", "3"], task_ids[:3], items[:3])


def _loop_in_thread():
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    return loop


class FakeTokenizer:
    def __init__(self, completions):
        self.completions = completions

    def __call__(self, text):
        return {"input_ids": [[7] for _ in text]}

    def batch_decode(self, ids, skip_special_tokens):
        assert skip_special_tokens
        return self.completions[: len(ids)]


class FakeTrainer:
    """What the rollout function uses of TRL's trainer: its tokenizer, its single-turn generation, its reward loop."""

    num_generations = 2

    def __init__(self, loop, completions):
        self.async_loop = loop
        self.processing_class = FakeTokenizer(completions)

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations):
        assert images is None and multimodal_fields == {} and num_generations == 2
        return [[i, 0] for i in range(len(prompt_ids))], None


def begin(reward, task_ids, items):
    reward.begin([{"prompt": "p", "task_id": t, "item": i} for t, i in zip(task_ids, items)])


def test_prefetched_scores_are_used_once_and_only_for_the_same_completions():
    scorer = RecordingScorer()
    reward = ServiceReward(scorer, num_generations=2)
    task_ids, items = rows([("a", "1")], 2)
    loop = _loop_in_thread()
    try:
        begin(reward, task_ids, items)
        out = reward.rollout(["p", "p"], FakeTrainer(loop, ["\\boxed{1}", "no"]))
        assert out == {"prompt_ids": [[7], [7]], "completion_ids": [[0, 0], [1, 0]], "logprobs": None}
        out = asyncio.run_coroutine_threadsafe(
            reward(prompts=["p", "p"], completions=["\\boxed{1}", "no"], task_id=task_ids, item=items), loop
        ).result()
        assert out == [1.0, 0.0] and len(scorer.requests) == 1  # the prefetch answered; no second request
        assert reward.scored().rewards == [1.0, 0.0]
        # Different completions than prefetched (or no prefetch at all): scored afresh.
        begin(reward, task_ids, items)
        reward.rollout(["p", "p"], FakeTrainer(loop, ["\\boxed{1}", "no"]))
        asyncio.run_coroutine_threadsafe(
            reward(prompts=["p", "p"], completions=["no", "no"], task_id=task_ids, item=items), loop
        ).result()
        assert len(scorer.requests) == 3 and scorer.requests[-1][0]["completions"] == ["no", "no"]
    finally:
        loop.call_soon_threadsafe(loop.stop)


def test_without_overlap_nothing_is_sent_before_the_reward_call():
    scorer = RecordingScorer()
    reward = ServiceReward(scorer, num_generations=2, overlap=False)
    task_ids, items = rows([("a", "1")], 2)
    loop = _loop_in_thread()
    try:
        begin(reward, task_ids, items)
        reward.rollout(["p", "p"], FakeTrainer(loop, ["\\boxed{1}", "no"]))
        assert scorer.requests == []
    finally:
        loop.call_soon_threadsafe(loop.stop)


def test_a_rollout_of_other_prompts_than_the_rows_is_refused_loudly():
    reward = ServiceReward(RecordingScorer(), num_generations=2)
    task_ids, items = rows([("a", "1")], 2)
    begin(reward, task_ids, items)
    with pytest.raises(RuntimeError, match="call order changed"):
        reward.rollout(["p", "q"], FakeTrainer(None, ["x", "y"]))
    reward.begin(None)
    with pytest.raises(RuntimeError, match="call order changed"):
        reward.rollout(["p", "p"], FakeTrainer(None, ["x", "y"]))
