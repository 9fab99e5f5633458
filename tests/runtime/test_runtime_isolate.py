"""The scoring runtime's shared parts: chunk sizes, program items alone, and split on failure (only the culprit fails,
a dead worker's item is sent again, an overrun is not, no call starts once the deadline has passed)."""

from __future__ import annotations

import pytest

from groupscore.bounded.workers import BudgetExceeded, WorkerCrashed, WorkerUnavailable
from groupscore.runtime.chunks import chunk_size, chunks, chunks_with_singles, worker_count
from groupscore.runtime.isolate import NoTimeLeft, call_with_retries, killed_a_worker, run_isolated


class FakePool:
    """Runs calls in this process; `fail(part)` says what a call on `part` raises instead (None: it succeeds)."""

    def __init__(self, fail=lambda part: None):
        self.fail = fail
        self.calls: list[tuple[list, float]] = []

    def run(self, fn, part, timeout_s):
        self.calls.append((list(part), timeout_s))
        failure = self.fail(part)
        if failure is not None:
            raise failure
        return fn(part)


def doubled(part):
    return [2 * entry for entry in part]


def failed(entry, exc):
    return (entry, type(exc).__name__)


def test_chunk_size_keeps_every_worker_busy_and_caps_the_chunk():
    assert chunk_size(None, 4) == 16 and chunk_size(0, 4) == 16
    assert chunk_size(8, 2) == 1  # 8 items on 2 workers: 4 chunks each
    assert chunk_size(1000, 2) == 16 and chunk_size(1000, 2, max_chunk=32) == 32
    assert chunk_size(256, 2, max_chunk=32) == 32
    assert list(chunks(range(5), 2)) == [[0, 1], [2, 3], [4]]
    with pytest.raises(ValueError, match="at least 1"):
        worker_count(0)


def test_an_entry_that_must_run_alone_gets_a_chunk_of_its_own_in_order():
    parts = chunks_with_singles(range(8), 3, alone=lambda entry: entry in (1, 5))
    assert parts == [[0], [1], [2, 3, 4], [5], [6, 7]]


def test_a_chunk_whose_worker_dies_is_rescored_one_entry_at_a_time():
    pool = FakePool(lambda part: WorkerCrashed("died") if 3 in part else None)
    seen: list[Exception] = []
    results = run_isolated(pool, doubled, [1, 2, 3, 4], failed, lambda n: 10.0, observe=seen.append)
    assert results == [2, 4, (3, "WorkerCrashed"), 8]
    assert [part for part, _ in pool.calls] == [[1, 2, 3, 4], [1], [2], [3], [4]]
    assert len(seen) == 2 and all(killed_a_worker(exc) for exc in seen)


def test_an_entry_alone_is_sent_again_when_its_worker_dies_but_not_when_it_overruns():
    deaths = iter([WorkerCrashed("killed from outside"), None])
    pool = FakePool(lambda part: next(deaths))
    assert run_isolated(pool, doubled, [7], failed, lambda n: 10.0, attempts=3) == [14]
    assert len(pool.calls) == 2

    always = FakePool(lambda part: WorkerCrashed("dies every time"))
    assert run_isolated(always, doubled, [7], failed, lambda n: 10.0, attempts=3) == [(7, "WorkerCrashed")]
    assert len(always.calls) == 3

    hung = FakePool(lambda part: BudgetExceeded("overran"))
    assert run_isolated(hung, doubled, [7], failed, lambda n: 10.0, attempts=3) == [(7, "BudgetExceeded")]
    assert len(hung.calls) == 1


def test_the_budget_is_asked_per_call_and_nothing_starts_without_one():
    budgets = iter([5.0, None, 1.0])
    pool = FakePool(lambda part: BudgetExceeded("overran") if len(part) > 1 else None)
    results = run_isolated(pool, doubled, [1, 2], failed, lambda n: next(budgets))
    assert results == [(1, "NoTimeLeft"), 4]  # the chunk overran; then no time for 1, and 1.0 s for 2
    assert [(part, timeout) for part, timeout in pool.calls] == [([1, 2], 5.0), ([2], 1.0)]
    assert isinstance(NoTimeLeft("x"), WorkerUnavailable)
    assert not killed_a_worker(WorkerUnavailable("no worker was free"))


def test_a_one_off_call_is_retried_only_while_its_worker_dies():
    deaths = iter([WorkerCrashed("1"), WorkerCrashed("2"), None])
    pool = FakePool(lambda part: next(deaths))
    assert call_with_retries(pool, doubled, [3], timeout_s=1.0, attempts=3) == [6]
    with pytest.raises(WorkerCrashed):
        call_with_retries(FakePool(lambda part: WorkerCrashed("x")), doubled, [3], timeout_s=1.0, attempts=2)
    hung = FakePool(lambda part: BudgetExceeded("overran"))
    with pytest.raises(BudgetExceeded):
        call_with_retries(hung, doubled, [3], timeout_s=1.0, attempts=3)
    assert len(hung.calls) == 1


def test_a_chunk_that_reaches_its_worker_after_the_deadline_scores_nothing():
    import time

    from groupscore.runtime import tasks

    raw = {"verifier": "math", "id": "late", "completion": "\\boxed{4}", "answer": "4"}
    [late] = tasks.score_task([raw], None, False, time.time() - 0.1)
    assert late["status"] == "infra_error" and late["details"]["infra"] == "service_deadline"
    [on_time] = tasks.score_task([raw], None, False, time.time() + 5)
    assert on_time["status"] == "correct"
