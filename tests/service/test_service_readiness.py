"""Readiness, as `/readyz` and the Ray deployment's health check see it: the scoring processes up, and the sandbox able
to run a program (a probe jail, at most every 30 s while it works, at every ask while it does not); with
`require_sandbox` a service whose sandbox cannot run is not ready."""

from __future__ import annotations

import asyncio

import pytest
from fastapi.testclient import TestClient

from groupscore.sandbox import settings as sandbox_settings
from groupscore.service.app import create_app
from groupscore.service.readiness import Readiness, SandboxProbe
from groupscore.service.settings import Settings


def test_problems_name_what_is_missing_and_the_sandbox_only_when_required():
    broken = Readiness(workers_ready=True, sandbox="sandbox unavailable: no nsjail")
    assert broken.problems(require_sandbox=False) == []
    assert broken.problems(require_sandbox=True) == ["sandbox unavailable: no nsjail"]
    assert Readiness(workers_ready=False, sandbox=None).problems(True) == ["the scoring processes are not started"]


def test_a_working_sandbox_is_probed_again_only_when_stale_a_broken_one_at_every_ask():
    answers = iter([None, "broken", "broken", None])
    calls = []

    def probe():
        calls.append(1)
        return next(answers)

    async def asks():
        fresh = SandboxProbe(probe, every_s=3600)
        first = [await fresh.problem(), await fresh.problem()]  # a pass is trusted for an hour
        stale = SandboxProbe(probe, every_s=0)
        return first, [await stale.problem(), await stale.problem(), await stale.problem()]

    first, later = asyncio.run(asks())
    assert first == [None, None] and later == ["broken", "broken", None] and len(calls) == 4


@pytest.fixture
def broken_sandbox(monkeypatch):
    monkeypatch.setenv("GROUPSCORE_NSJAIL", "/nonexistent/nsjail")
    sandbox_settings.reload()
    yield monkeypatch
    monkeypatch.delenv("GROUPSCORE_NSJAIL")
    sandbox_settings.reload()


def test_readyz_is_503_without_a_sandbox_when_required_and_ready_once_it_runs_again(broken_sandbox):
    app = create_app(Settings(workers=1, require_sandbox=True))
    with TestClient(app) as client:
        answer = client.get("/readyz")
        assert answer.status_code == 503, answer.text
        body = answer.json()
        assert body["ready"] is False and "/nonexistent/nsjail" in body["sandbox"] and body["problems"]
        broken_sandbox.delenv("GROUPSCORE_NSJAIL")
        sandbox_settings.reload()
        answer = client.get("/readyz")  # a failed probe is not trusted: the next ask probes again
        assert answer.status_code == 200 and answer.json()["sandbox"] is None, answer.text
        broken_sandbox.setenv("GROUPSCORE_NSJAIL", "/nonexistent/nsjail")  # the fixture removes it again


def test_readyz_reports_a_broken_sandbox_but_stays_ready_when_not_required(broken_sandbox):
    with TestClient(create_app(Settings(workers=1))) as client:
        answer = client.get("/readyz")
        assert answer.status_code == 200 and "/nonexistent/nsjail" in answer.json()["sandbox"], answer.text
