"""Bounded calls: a hang is reported within the bound (even one holding the GIL), a dying reward is reported, and
the checker never uses SIGALRM, so it works from any thread."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from groupscore.testing import Case, check_reward_fn
from groupscore.testing.call_result import classify_reward
from groupscore.testing.calls import ProcessCaller, ThreadCaller, make_caller
from groupscore.testing.targets import as_target

ROOT = Path(__file__).resolve().parents[2]
MISBEHAVING = f"{ROOT}/fixtures/checks/planted_rewards.py:misbehaving_reward"


def case(text: str) -> Case:
    return Case("p", text, {}, text)


def test_a_gil_holding_hang_is_reported_within_the_bound_and_the_worker_replaced():
    caller = make_caller(as_target(MISBEHAVING))
    assert isinstance(caller, ProcessCaller)
    with caller:
        hung_pid = int(caller.call([case("pid")], 30.0).values[0].number)
        start = time.monotonic()
        outcome = caller.call([case("gil-hang")], 1.0)
        waited = time.monotonic() - start
        assert outcome.hang and not outcome.ok and "no answer within 1 s" in outcome.error
        assert waited < 5.0  # the bound plus a kill, with room for a loaded CI machine
        with pytest.raises(ProcessLookupError):
            os.kill(hung_pid, 0)  # the hung worker is gone (killed and reaped)
        assert int(caller.call([case("pid")], 30.0).values[0].number) != hung_pid  # a fresh worker answers


def test_a_reward_that_kills_its_process_is_reported_with_the_exit_code():
    with make_caller(as_target(MISBEHAVING)) as caller:
        outcome = caller.call([case("die")], 30.0)
        assert not outcome.ok and not outcome.hang
        assert "died" in outcome.error and "exit code 3" in outcome.error
        assert caller.call([case("fine")], 30.0).ok


def test_output_of_the_reward_does_not_disturb_the_protocol():
    with make_caller(as_target(MISBEHAVING)) as caller:
        outcome = caller.call([case("print"), case("fine")], 30.0)
        assert [v.number for v in outcome.values] == [0.5, 0.5]


def test_exceptions_are_described_with_type_message_and_place():
    with make_caller(as_target(MISBEHAVING)) as caller:
        outcome = caller.call([case("raise")], 30.0)
    assert outcome.error.startswith("RuntimeError: planted failure (at planted_rewards.py:")


def test_thread_caller_reports_a_sleeping_hang_on_time():
    def reward(prompts, completions, **kwargs):
        if completions[0] == "sleep":
            time.sleep(30)
        return [1.0]

    def sleepers() -> int:
        return sum(t.name == "groupscore-check-0" and t.is_alive() for t in threading.enumerate())

    caller = ThreadCaller(as_target(reward))
    before = sleepers()
    start = time.monotonic()
    outcome = caller.call([case("sleep")], 0.5)
    assert outcome.hang and time.monotonic() - start < 3.0
    assert sleepers() == before + 1  # the hung call's thread is left behind, not waited for
    assert caller.call([case("ok")], 5.0).values[0].number == 1.0


def test_checks_run_from_a_worker_thread_without_touching_sigalrm():
    handler_before = signal.getsignal(signal.SIGALRM)
    result = {}

    def run():
        result["report"] = check_reward_fn(
            MISBEHAVING,
            [{"prompt": "p", "completion": "fine"}],
            checks=("determinism",),
            repeats=1,
            processes=1,
            threads=2,
        )

    worker = threading.Thread(target=run)
    worker.start()
    worker.join(120)
    assert not worker.is_alive()
    assert result["report"].exit_code == 0, result["report"].table()
    assert signal.getsignal(signal.SIGALRM) == handler_before


def test_values_are_classified_as_trl_would_accept_them():
    import numpy as np

    assert classify_reward(0.5).kind == "number"
    assert classify_reward(np.float32(0.25)).number == 0.25
    assert classify_reward(True).detail == "bool"
    assert classify_reward(None).kind == "none"
    assert classify_reward("1.0").kind == "other"
    assert classify_reward(np.array([1.0, 2.0])).kind == "other"


def test_a_reward_that_hangs_on_every_case_is_reported_once_not_waited_on_for_each_check():
    start = time.monotonic()
    report = check_reward_fn(MISBEHAVING, [{"prompt": "p", "completion": "sleep"}] * 2, timeout_s=0.5)
    assert time.monotonic() - start < 30
    returns = report.result("returns")
    assert returns.status.value == "FAIL" and "hang" in returns.detail
    assert {r.status.value for r in report.results if r.name != "returns"} == {"SKIP"}
    assert report.exit_code == 1


def test_arrays_are_accepted_as_trl_accepts_them_and_strings_are_not():
    import numpy as np

    from groupscore.testing.call_result import run_call

    cases = [case("a"), case("b")]
    outcome = run_call(as_target(lambda prompts, completions, **kw: np.array([0.5, 1.0])), cases)
    assert [v.number for v in outcome.values] == [0.5, 1.0]
    outcome = run_call(as_target(lambda prompts, completions, **kw: "10"), cases)
    assert outcome.error == "returned str, not a list of rewards"
    outcome = run_call(as_target(lambda prompts, completions, **kw: [1.0]), cases)
    assert outcome.error == "returned 1 rewards for 2 completions"


def test_a_lambda_runs_in_threads_and_the_report_says_why():
    report = check_reward_fn(
        lambda prompts, completions, **kw: [0.0] * len(completions),
        [{"prompt": "p", "completion": "c"}],
        checks=("determinism",),
        repeats=1,
    )
    assert report.exit_code == 0
    assert report.result("determinism.processes").status.value == "SKIP"
    assert any("calls run in threads because it cannot be rebuilt" in note for note in report.notes)
