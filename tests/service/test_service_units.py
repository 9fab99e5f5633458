"""Service pieces that need no server: group statistics, composite totals, client sharding and retries, adapters' mapping."""

from __future__ import annotations

import itertools
import math

import httpx
import pytest
from pydantic import ValidationError

from groupscore.client.adapters import completion_text, verl_item
from groupscore.client.http import RetryPolicy, _shards
from groupscore.sandbox import CompileResult, RunResult, RunStatus
from groupscore.schema.advantages import group_stats
from groupscore.schema.reward import RewardSpec
from groupscore.service.protocols import label_item, response_text, sandbox_fusion_response
from groupscore.service.settings import Settings
from groupscore.verifiers.composite import CheckedRewardSpec, total_reward

# -- group statistics, by hand ------------------------------------------------------------------------------------


def test_group_advantages_use_sample_std_like_trl():
    stats = group_stats([1.0, 0.0, 0.0, 1.0])
    # mean 0.5; squared deviations sum to 1.0; sample std = sqrt(1/3)
    assert stats.mean == pytest.approx(0.5)
    assert stats.std == pytest.approx(math.sqrt(1 / 3))
    a = 0.5 / (math.sqrt(1 / 3) + 1e-4)
    assert stats.advantages == pytest.approx([a, -a, -a, a])
    assert stats.advantages[0] == pytest.approx(0.86588, abs=1e-5)
    assert not stats.zero_variance


def test_group_population_std_divides_by_n():
    stats = group_stats([1.0, 0.0, 0.0, 1.0], eps=1e-4, std="population")
    assert stats.std == pytest.approx(0.5)
    assert stats.advantages[0] == pytest.approx(0.5 / 0.5001)


def test_group_with_equal_rewards_is_flagged_and_has_zero_advantages():
    stats = group_stats([0.25, 0.25, 0.25])
    assert stats.zero_variance and stats.std == 0.0 and stats.advantages == [0.0, 0.0, 0.0]


def test_group_of_one_has_zero_std_and_zero_eps_does_not_divide_by_zero():
    assert group_stats([0.7]).advantages == [0.0]
    assert group_stats([0.3, 0.3], eps=0.0).advantages == [0.0, 0.0]


def test_group_three_values_by_hand():
    stats = group_stats([1.0, 0.5, 0.0], eps=0.0)
    assert stats.mean == pytest.approx(0.5)
    assert stats.std == pytest.approx(0.5)  # sum of squares 0.5 over n-1 = 2 -> 0.25 -> 0.5
    assert stats.advantages == pytest.approx([1.0, 0.0, -1.0])


# -- composite totals -------------------------------------------------------------------------------------------------


def _spec(*components, normalize="weighted_mean"):
    return RewardSpec.model_validate({"components": list(components), "normalize": normalize})


def test_spec_naming_the_items_own_kind_needs_no_reference_fields():
    # "answer" comes from each math item; only the params themselves are checked up front.
    spec = _spec({"name": "correct"}, {"name": "strict", "verifier": "math", "params": {"strict": True}})
    assert [c.name for c in spec.components] == ["correct", "strict"]


def test_weighted_mean_normalises_by_the_weights():
    spec = _spec({"name": "correct", "weight": 1.0}, {"name": "strict", "weight": 0.2, "params": {"strict": True}})
    assert total_reward({"correct": 1.0, "strict": 0.0}, spec) == (pytest.approx(1.0 / 1.2), None)
    assert total_reward({"correct": 1.0, "strict": 1.0}, spec) == (pytest.approx(1.0), None)


def test_clipped_sum_and_gate():
    spec = _spec(
        {"name": "outcome", "weight": 0.7},
        {"name": "strict", "weight": 0.3, "params": {"strict": True}, "gate": True, "gate_threshold": 0.5},
        normalize="clipped_sum",
    )
    assert total_reward({"outcome": 1.0, "strict": 1.0}, spec)[0] == pytest.approx(1.0)
    assert total_reward({"outcome": 1.0, "strict": 0.4}, spec) == (0.0, "strict")
    assert total_reward({"outcome": 0.0, "strict": 0.5}, spec)[0] == pytest.approx(0.15)


def test_normalise_is_read_as_normalize_and_written_as_it():
    older = RewardSpec.model_validate({"components": [{"name": "a"}], "normalise": "clipped_sum"})
    assert older.normalize == "clipped_sum" and older.model_dump()["normalize"] == "clipped_sum"
    assert "normalise" not in older.model_dump() and "normalise" not in RewardSpec.model_json_schema()["properties"]
    with pytest.raises(ValidationError, match="normalise"):  # both spellings at once: refused, not one picked
        RewardSpec.model_validate(
            {"components": [{"name": "a"}], "normalize": "clipped_sum", "normalise": "weighted_mean"}
        )


@pytest.mark.parametrize(
    "components, message",
    [
        ([{"name": "a"}, {"name": "a"}], "unique"),
        ([{"name": "a", "weight": 0.0}], "positive weight"),
        ([{"name": "a", "verifier": "no_such_kind"}], "unknown verifier kind"),
        ([{"name": "a", "params": {"completion": "x"}}], "may not set completion"),
        ([{"name": "bad name!"}], "pattern"),
        ([{"name": "a", "verifier": "math", "params": {"rel_tol": 5}}], "components.0.params.rel_tol"),
        ([{"name": "a", "verifier": "format", "params": {"tags": ["1bad"]}}], "components.0.params.tags"),
        ([{"name": "a", "verifier": "math", "params": {"no_such_field": 1}}], "no_such_field"),
    ],
)
def test_bad_reward_specs_are_refused_with_the_reason(components, message):
    with pytest.raises(ValidationError, match=message):
        CheckedRewardSpec.model_validate({"components": components})


# -- client --------------------------------------------------------------------------------------------------------------


def test_shards_are_contiguous_cover_everything_and_respect_max_batch():
    for n_items, n_urls, max_batch in [(10, 3, 100), (1, 4, 10), (1000, 2, 128), (7, 1, 7), (8, 1, 7)]:
        shards = _shards(n_items, n_urls, max_batch)
        assert shards[0][0] == 0 and shards[-1][1] == n_items
        assert all(a[1] == b[0] for a, b in itertools.pairwise(shards))
        assert all(0 < stop - start <= max_batch for start, stop in shards)
        assert len(shards) >= min(n_urls, n_items)
    assert _shards(0, 3, 10) == [(0, 0)]


def test_retry_delay_honours_retry_after_and_backs_off_otherwise():
    policy = RetryPolicy(backoff_s=0.5, max_backoff_s=4.0, max_retry_after_s=30.0)
    request = httpx.Request("POST", "http://127.0.0.1/v1/score")
    assert policy.delay(0, httpx.Response(429, headers={"Retry-After": "3"}, request=request)) == 3.0
    assert policy.delay(0, httpx.Response(429, headers={"Retry-After": "999"}, request=request)) == 30.0
    assert 0.25 <= policy.delay(0, None) <= 0.5
    assert 2.0 <= policy.delay(5, httpx.Response(503, request=request)) <= 4.0


# -- adapters' mapping ------------------------------------------------------------------------------------------------


def test_trl_chat_completions_become_the_assistant_text():
    assert completion_text("plain") == "plain"
    assert completion_text([{"role": "assistant", "content": "The answer is \\boxed{2}"}]) == "The answer is \\boxed{2}"
    assert (
        completion_text(
            [
                {
                    "role": "assistant",
                    "content": [{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}],
                }
            ]
        )
        == "ab"
    )


def test_verl_items_from_math_and_code_ground_truths():
    assert verl_item("openai/gsm8k", "#### 72", "72", None) == {
        "verifier": "math",
        "completion": "#### 72",
        "answer": "72",
    }
    code = verl_item("codecontests", "```python\nprint(1)\n```", '{"inputs": ["1\\n"], "outputs": ["1\\n"]}', {})
    assert code["verifier"] == "code" and code["tests"] == [{"type": "stdio", "stdin": "1\n", "stdout": "1\n"}]
    call = verl_item("taco", "x", {"inputs": [[1, 2]], "outputs": [[3]], "fn_name": "add"}, None)
    assert call["tests"] == [{"type": "call", "fn": "add", "args": [1, 2], "expected": 3}]
    picked = verl_item("whatever", "x", "7", {"verifier": "math"})
    assert picked["verifier"] == "math" and picked["answer"] == "7"


def test_openrlhf_labels_and_queries():
    assert response_text("PROMPT answer", "PROMPT ") == "answer"
    assert response_text("<pad><pad>PROMPT answer", "PROMPT ") == "answer"  # left padding decoded into the query
    with pytest.raises(ValueError, match="does not contain its prompt"):  # never the whole query, prompt included
        response_text("no prefix here", "PROMPT")
    assert label_item("42", "math") == {"verifier": "math", "answer": "42"}
    assert label_item('{"verifier": "code", "tests": []}', "math") == {"verifier": "code", "tests": []}
    assert label_item(None, "math") == {"verifier": "math", "answer": ""}


def test_sandbox_fusion_status_mapping():
    ok = RunResult(status=RunStatus.OK, exit_code=0, stdout="hi\n", wall_time_s=0.1)
    assert sandbox_fusion_response(ok)["status"] == "Success"
    assert sandbox_fusion_response(ok)["run_result"] == {
        "status": "Finished",
        "execution_time": 0.1,
        "return_code": 0,
        "stdout": "hi\n",
        "stderr": "",
    }
    slow = sandbox_fusion_response(RunResult(status=RunStatus.TIMEOUT, signal=9, wall_time_s=1.0, error="wall time"))
    assert slow["status"] == "Failed" and slow["run_result"]["status"] == "TimeLimitExceeded"
    crashed = sandbox_fusion_response(RunResult(status=RunStatus.RUNTIME_ERROR, exit_code=1, stderr="Traceback"))
    assert crashed["status"] == "Failed" and crashed["run_result"]["return_code"] == 1
    broken = sandbox_fusion_response(RunResult(status=RunStatus.SANDBOX_ERROR, error="nsjail failed"))
    assert broken["status"] == "SandboxError" and broken["message"] == "nsjail failed"
    compile_error = RunResult(
        status=RunStatus.COMPILE_ERROR,
        compile=CompileResult(status=RunStatus.RUNTIME_ERROR, exit_code=1, stderr="error: x"),
    )
    answer = sandbox_fusion_response(compile_error)
    assert answer["status"] == "Failed" and answer["run_result"] is None
    assert answer["compile_result"]["return_code"] == 1
    files = sandbox_fusion_response(RunResult(status=RunStatus.OK, exit_code=0, files={"out.txt": b"data"}))
    assert files["files"] == {"out.txt": "ZGF0YQ=="}


def test_settings_from_env(monkeypatch):
    monkeypatch.setenv("GROUPSCORE_MAX_ITEMS", "10")
    monkeypatch.setenv("GROUPSCORE_DEBUG", "yes")
    monkeypatch.setenv("GROUPSCORE_TOKEN", "s3cret")
    settings = Settings.from_env(workers=1)
    assert settings.max_items == 10 and settings.debug and settings.token == "s3cret" and settings.workers == 1
    monkeypatch.setenv("GROUPSCORE_MAX_ITEMS", "ten")
    with pytest.raises(ValueError, match="GROUPSCORE_MAX_ITEMS"):
        Settings.from_env()
    with pytest.raises(ValueError):
        Settings(max_items=100, max_queue_items=10)


def test_group_advantages_match_trl_grpo_trainer_on_random_groups():
    # The same numbers GRPOTrainer computes with scale_rewards="group": (r - mean) / (nanstd + 1e-4).
    torch = pytest.importorskip("torch")
    nanstd = pytest.importorskip("trl.trainer.utils").nanstd
    generator = torch.Generator().manual_seed(0)
    rewards = torch.rand(6, 8, generator=generator, dtype=torch.float64).round(decimals=1)
    std = nanstd(rewards, dim=1, keepdim=True)
    expected = (rewards - rewards.mean(dim=1, keepdim=True)) / (std + 1e-4)
    for row, expected_row, expected_std in zip(rewards.tolist(), expected.tolist(), std.flatten().tolist()):
        stats = group_stats(row)
        assert stats.std == pytest.approx(expected_std, rel=1e-6)  # TRL computes n/(n-1) in float32
        assert stats.advantages == pytest.approx(expected_row, rel=1e-6, abs=1e-9)
