"""Infrastructure failures are not zeros: every producer says `infra_error`; a verdict's status agrees with its reward.

A sandbox that cannot start, a worker that died, a budget spent waiting for a worker: nothing judged the completion,
so its reward 0.0 is a placeholder that trainers must not learn from (they mask it; see test_infra_adapters.py).
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from pydantic import ValidationError

from groupscore import score as score_cli
from groupscore.bounded import workers
from groupscore.runtime import batch
from groupscore.runtime.engine import EngineConfig, ScoringEngine
from groupscore.sandbox import SandboxUnavailable
from groupscore.schema.reward import RewardSpec
from groupscore.schema.verdict import Status, Verdict
from groupscore.verifiers.code import sandbox_jobs
from groupscore.verifiers.code.item import CodeItem
from groupscore.verifiers.code.verify import score_code
from groupscore.verifiers.math import verify as math_verify
from groupscore.verifiers.math.grader import Comparison
from groupscore.verifiers.math.item import MathItem
from groupscore.verifiers.scoring import score_raw


def py(source: str) -> str:
    return f"```python\n{source}```"


def refuse_sandbox(*args, **kwargs):
    raise SandboxUnavailable("nsjail cannot start: shared library libnl-route-3.so.200 is missing")


# -- the schema ---------------------------------------------------------------------------------------------------


def test_infra_error_is_a_status_of_its_own_with_a_cause_and_a_placeholder_reward():
    verdict = Verdict.infra_error("a", "sandbox unavailable", "sandbox")
    assert verdict.status is Status.infra_error and verdict.status.value == "infra_error"
    assert verdict.status not in (Status.error, Status.timeout)
    assert verdict.reward == 0.0 and verdict.details == {"infra": "sandbox"}
    with pytest.raises(ValidationError, match=r"reward 0\.0"):  # an infra failure never pays
        Verdict(reward=0.5, status="infra_error")
    with pytest.raises(ValueError, match="unknown infra cause"):
        Verdict.infra_error(None, "x", "cosmic rays")


def test_full_reward_is_never_partial_whoever_builds_the_verdict():
    assert Verdict(reward=1.0, status="partial").status is Status.correct
    assert Verdict.model_validate({"reward": 1.0, "status": "partial"}).status is Status.correct
    assert Verdict(reward=0.5, status="partial").status is Status.partial


def test_a_code_item_whose_hidden_tests_all_pass_is_correct_not_partial():
    # The public test fails (hardcoding it would not pay anyway); every hidden test passes: reward 1.0.
    item = CodeItem(
        completion=py("def f(x):\n    return x * 2 if x != 1 else 0\n"),
        tests=[{"type": "call", "fn": "f", "args": [1], "expected": 2}],
        hidden_tests=[{"type": "call", "fn": "f", "args": [5], "expected": 10}],
    )
    verdict = score_code(item)
    assert verdict.reward == 1.0 and verdict.details["public_passed"] == 0
    assert verdict.status is Status.correct


def test_a_composite_whose_bonus_saturates_is_correct_not_partial():
    spec = RewardSpec.model_validate(
        {
            "normalize": "clipped_sum",
            "components": [
                {"name": "schema", "weight": 1.0},
                {"name": "short", "weight": 1.0, "verifier": "length", "params": {"max": 50}},
            ],
        }
    )
    raw = {
        "verifier": "json",
        "completion": '{"a": 1}',
        "partial_credit": True,
        "json_schema": {"type": "object", "required": ["a", "b"], "properties": {"a": {"type": "integer"}}},
    }
    verdict = score_raw(raw, spec)
    assert verdict.components["schema"] < 1.0 and verdict.reward == 1.0
    assert verdict.status is Status.correct


# -- producers ----------------------------------------------------------------------------------------------------


def test_a_sandbox_that_cannot_start_is_an_infra_error_not_a_zero_for_the_program(monkeypatch):
    monkeypatch.setattr(sandbox_jobs, "run_many", refuse_sandbox)
    verdict = score_code(
        CodeItem(completion=py("def f():\n    return 1\n"), tests=[{"type": "call", "fn": "f", "expected": 1}])
    )
    assert verdict.status is Status.infra_error and verdict.reward == 0.0
    assert verdict.details["infra"] == "sandbox" and "libnl-route" in verdict.reason


def test_a_run_the_sandbox_refuses_because_of_the_completion_is_the_items_fault_not_infra():
    # Think like the policy: a masked infra_error hides a wrong answer from its negative advantage. A program the
    # sandbox refuses to run because of what the completion holds (here text that is not encodable) must stay a 0.
    verdict = score_code(
        CodeItem(completion=py('def f():\n    return "\ud800"\n'), tests=[{"type": "call", "fn": "f", "expected": 1}])
    )
    assert verdict.status is Status.error and verdict.reward == 0.0
    assert "refused" in verdict.reason


def test_a_composite_with_an_unscored_component_is_an_infra_error_whatever_the_others_paid(monkeypatch):
    monkeypatch.setattr(sandbox_jobs, "run_many", refuse_sandbox)
    spec = RewardSpec.model_validate(
        {
            "components": [
                {"name": "tests", "weight": 1.0},
                {"name": "short", "weight": 1.0, "verifier": "length", "params": {"max": 500}},
            ]
        }
    )
    raw = {
        "verifier": "code",
        "completion": py("def f():\n    return 1\n"),
        "tests": [{"type": "call", "fn": "f", "expected": 1}],
    }
    verdict = score_raw(raw, spec)
    assert verdict.components["short"] == 1.0
    assert verdict.status is Status.infra_error and verdict.reward == 0.0
    assert verdict.details["infra"] == "sandbox"


def _undecided_math(monkeypatch, failure: Exception) -> Verdict:
    """A math item whose fast comparison is undecided, so the symbolic step runs, and whose worker call fails."""

    def fail(*args, **kwargs):
        raise failure

    math_verify.clear_caches()
    monkeypatch.setattr(math_verify, "compare_fast", lambda *a: Comparison(None, "fast", "undecided"))
    monkeypatch.setattr(math_verify, "_ensure_workers", lambda: None)
    monkeypatch.setattr(workers, "run_bounded", fail)
    return math_verify.score_math(MathItem(completion="\\boxed{x^2 - 1}", answer="(x-1)(x+1)"))


def test_math_symbolic_step_that_never_got_a_worker_is_an_infra_error(monkeypatch):
    verdict = _undecided_math(monkeypatch, workers.WorkerUnavailable("waiting for a free worker"))
    assert verdict.status is Status.infra_error and verdict.details["infra"] == "worker_unavailable"


def test_math_symbolic_step_whose_worker_died_is_an_infra_error_not_unparsable(monkeypatch):
    verdict = _undecided_math(monkeypatch, workers.WorkerCrashed("bounded worker pid 1 died"))
    assert verdict.status is Status.infra_error and verdict.details["infra"] == "worker_died"


def test_math_symbolic_step_past_its_own_budget_is_still_a_timeout(monkeypatch):
    verdict = _undecided_math(monkeypatch, workers.BudgetExceeded("symbolic_outcome() ran out of its budget"))
    assert verdict.status is Status.timeout


def test_a_budget_spent_waiting_for_a_worker_is_worker_unavailable_but_an_overrun_is_not():
    pool = workers.WorkerPool(1)
    try:
        pool.warm_up([])
        holder = threading.Thread(target=lambda: pool.run(time.sleep, 1.5, timeout_s=10))
        holder.start()
        time.sleep(0.2)
        with pytest.raises(workers.WorkerUnavailable, match="waiting for a free worker"):
            pool.run(time.sleep, 0, timeout_s=0.3)
        holder.join()
        with pytest.raises(workers.BudgetExceeded) as overrun:  # the call itself ran past its budget
            pool.run(time.sleep, 5, timeout_s=0.5)
        assert not isinstance(overrun.value, workers.WorkerUnavailable)
    finally:
        pool.shutdown()


# Chunk function for the batch dispatcher: entry 13 kills its worker.
def doubled_or_die(entries):
    import os

    if 13 in entries:
        os._exit(9)
    return [2 * e for e in entries]


def test_a_batch_item_that_kills_its_worker_gets_an_infra_error_verdict():
    failed = batch.infra_failure("x", workers.WorkerCrashed("bounded worker pid 7 died during f()"))
    assert failed.status is Status.infra_error and failed.details["infra"] == "worker_died" and failed.id == "x"
    results = [
        r
        for part in batch.map_chunks(doubled_or_die, batch._infra_verdict, range(16), workers=2, chunk=4)
        for r in part
    ]
    assert results[13].status is Status.infra_error and results[13].details["infra"] == "worker_died"
    assert [r for i, r in enumerate(results) if i != 13] == [2 * i for i in range(16) if i != 13]


def test_groupscore_score_exits_1_when_an_item_was_not_scored(tmp_path, monkeypatch):
    monkeypatch.setattr(score_cli, "_score_lines", _die_on_lines)
    source = tmp_path / "in.jsonl"
    source.write_text('{"id": "a", "verifier": "math", "completion": "1", "answer": "1"}\n')
    out = tmp_path / "out.jsonl"
    assert score_cli.score_jsonl(source, out, workers=1, progress=False) == 1
    assert '"status": "infra_error"' in out.read_text() and '"line": 1' in out.read_text()


def _die_on_lines(reward, lines):
    import os

    os._exit(9)


# -- the service's scoring engine ---------------------------------------------------------------------------------


class _DyingPool:
    """Stands in for the engine's worker pool: every call's worker dies."""

    calls = 0

    def run(self, fn, *args, timeout_s):
        self.calls += 1
        raise workers.WorkerCrashed(f"bounded worker pid 1 died during {fn}")


def _engine(pool=None) -> ScoringEngine:
    from concurrent.futures import ThreadPoolExecutor

    engine = ScoringEngine(EngineConfig(workers=1, max_attempts=2))
    engine._pool, engine._threads = pool or _DyingPool(), ThreadPoolExecutor(1)
    return engine


def test_an_item_whose_scoring_process_died_every_time_is_an_infra_error():
    pool = _DyingPool()
    engine = _engine(pool)

    async def score():
        return await engine.score([{"id": 1}, {"id": 2}], None, asyncio.get_running_loop().time() + 5)

    verdicts = asyncio.run(score())
    assert [v["status"] for v in verdicts] == ["infra_error", "infra_error"]
    assert [v["id"] for v in verdicts] == [1, 2] and verdicts[0]["details"]["infra"] == "worker_died"
    assert "died on this item 2 times" in verdicts[0]["reason"]
    assert pool.calls == 2 * 2  # each item (a chunk of its own here) sent twice: max_attempts


def test_a_task_that_failed_inside_the_service_is_an_infra_error():
    engine = _engine()

    def broken(*args, **kwargs):
        raise RuntimeError("the scoring pool is shut down")

    engine._score_chunk = broken

    async def score():
        return await engine.score([{"id": "a"}], None, asyncio.get_running_loop().time() + 5)

    verdict = asyncio.run(score())[0]
    assert verdict["status"] == "infra_error" and verdict["details"]["infra"] == "internal"
    assert "shut down" in verdict["reason"]


def test_items_the_request_deadline_left_unscored_are_infra_errors_not_timeouts():
    engine = _engine()

    def slow(*args, **kwargs):
        time.sleep(2)

    engine._score_chunk = slow

    async def score():
        return await engine.score([{"id": "a"}], None, asyncio.get_running_loop().time() + 0.1)

    verdict = asyncio.run(score())[0]
    assert verdict["status"] == "infra_error" and verdict["details"]["infra"] == "service_deadline"
