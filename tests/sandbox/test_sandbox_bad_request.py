"""Only a run's own bad arguments are a refused request; a failure inside the sandbox is the sandbox's, never the
request's (a refused request scores the completion 0, a sandbox failure is infra_error and is masked)."""

from __future__ import annotations

import pytest

from groupscore.sandbox import BadRunRequest, RunStatus, SandboxUnavailable, run_many, uids
from groupscore.sandbox import runner as sandbox_runner
from groupscore.sandbox import settings as sandbox_settings


def test_a_bad_argument_is_a_refused_request_for_that_run_only():
    results = run_many(
        [
            {"files": {"../x.py": "print(1)"}, "language": "python"},
            {"files": {"main.py": "print(1)"}, "language": "python"},
        ],
        workers=1,
    )
    assert results[0].status is RunStatus.SANDBOX_ERROR and results[0].error.startswith("bad run request")
    assert results[1].status is RunStatus.OK and results[1].stdout == "1\n"


def test_bad_arguments_raise_bad_run_request_which_is_still_a_value_error():
    with pytest.raises(BadRunRequest):
        sandbox_runner.run({"main.py": "print(1)"}, language="cobol")
    assert issubclass(BadRunRequest, ValueError)  # callers that caught ValueError keep working


def test_an_internal_value_error_is_not_reported_as_the_requests_fault(monkeypatch):
    def broken(*args, **kwargs):
        raise ValueError("an internal bug")

    monkeypatch.setattr(sandbox_runner, "build_policy", broken)
    with pytest.raises(ValueError, match="an internal bug"):
        run_many([{"files": {"main.py": "print(1)"}, "language": "python"}], workers=1)


def test_a_uid_base_that_is_not_a_number_is_sandbox_unavailable(monkeypatch):
    monkeypatch.setenv("GROUPSCORE_SANDBOX_UID_BASE", "abc")
    sandbox_settings.reload()  # the settings are read once per process
    with pytest.raises(SandboxUnavailable, match="GROUPSCORE_SANDBOX_UID_BASE"):
        uids.id_base()
