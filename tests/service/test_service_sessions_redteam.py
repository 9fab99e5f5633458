"""The fourth round's adversarial review as a hostile HTTP client, each finding a test: a step or score racing a close
(500, or a solved episode scored 0), one client holding every worker thread with calls on one session, a session's
record growing with a client's megabytes, a task whose turn adds a tool it lacks (500 and a jail left holding a
place), task files of odd shapes (500) and YAML errors quoting the file."""

from __future__ import annotations

import threading
import time

import pytest
from fastapi.testclient import TestClient

from groupscore.environments import Sessions, Task, ToolCall
from groupscore.environments.sessions import SessionBusy, UnknownSession
from groupscore.service.app import create_app
from groupscore.service.settings import Settings

TOKEN = "red"


@pytest.fixture(scope="module")
def task_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("tasks")
    (d / "bad_turn.yaml").write_text(
        "- id: t\n  tools: [shell]\n  turns: [{messages: [{role: user, content: hi}], add_tools: [nonexistent]}]\n"
        "  checkers: [{kind: tests, files: {test.sh: 'true'}}]\n"
    )
    (d / "scalar.yaml").write_text("tasks: 5\n")
    (d / "five.yaml").write_text("5\n")
    (d / "turns5.yaml").write_text("- id: t\n  turns: 5\n")
    (d / "turnint.yaml").write_text("- id: t\n  system: s\n  turns: [5]\n")
    (d / "deep.yaml").write_text("- " * 20000 + "x\n")
    (d / "deep.jsonl").write_text("[" * 200000 + "\n")
    (d / "creds.yaml").write_text("secret_api_key: [hunter2-SECRET-VALUE\n")
    return d


@pytest.fixture(scope="module")
def http(task_dir):
    app = create_app(Settings(workers=1, token=TOKEN, max_sessions=4, task_dirs=str(task_dir)))
    with TestClient(app, headers={"Authorization": f"Bearer {TOKEN}"}, raise_server_exceptions=False) as client:
        yield client


@pytest.mark.parametrize("name", ["scalar", "five", "turns5", "turnint", "deep", "creds"])
def test_task_files_of_any_shape_are_a_422_that_quotes_nothing(http, task_dir, name):
    answer = http.post("/v1/sessions", json={"task": f"{task_dir / f'{name}.yaml'}:t"})
    assert answer.status_code == 422, answer.text
    assert "hunter2" not in answer.text


def test_a_deep_jsonl_task_file_is_a_422(http, task_dir):
    assert http.post("/v1/sessions", json={"task": f"{task_dir / 'deep.jsonl'}:t"}).status_code == 422


def test_a_turn_adding_a_tool_the_task_lacks_is_refused_and_holds_no_place(http, task_dir):
    """As found: a 500, and a jail left open that no client knew of, holding a place until the reaper took it."""
    answer = http.post("/v1/sessions", json={"task": f"{task_dir / 'bad_turn.yaml'}:t", "count": 4})
    assert answer.status_code == 422 and "nonexistent" in answer.text
    assert http.app.state.session_host.sessions.open_count() == 0


CLASS_ADDS = {
    "id": "adds",
    "turns": [{"messages": [{"role": "user", "content": "hi"}], "add_tools": ["missing"]}],
    "classes": [{"class_name": "C", "source": "class C:\n    def ok(self):\n        return 1\n"}],
    "checkers": [{"kind": "final_message", "item": {"verifier": "math", "answer": "1"}}],
}


def test_a_class_task_adding_a_method_it_lacks_is_lost_said_and_closed():
    sessions = Sessions(max_sessions=2)
    try:
        (opening,) = sessions.open_group(Task.model_validate(CLASS_ADDS), 1)
        verdict = sessions.score(opening.session_id)
        assert verdict.status == "infra_error" and "does not have: missing" in verdict.reason
    finally:
        sessions.close_all()
    assert sessions.open_count() == 0


SLEEPER = {
    "id": "sleeper",
    "turns": [{"messages": [{"role": "user", "content": "hi"}]}],
    "tools": ["shell"],
    "checkers": [{"kind": "tests", "files": {"test.sh": "echo 1 > /logs/verifier/reward.txt"}}],
}


def test_a_call_racing_a_close_is_unknown_never_a_500_or_a_false_0():
    """As found: a step that got its session just before a close took its lock failed on a jail already gone (500);
    a score in the same place scored the closed session 0 (no state), where a solved episode deserved 1."""
    sessions = Sessions(max_sessions=2)
    try:
        (opening,) = sessions.open_group(Task.model_validate(SLEEPER), 1)
        sid = opening.session_id
        session = sessions._open[sid]
        outcome: list[object] = []
        with session.lock:  # a call is under way: the close and the racing step both wait on it
            closer = threading.Thread(target=lambda: sessions.close(sid))
            closer.start()
            time.sleep(0.2)
        closer.join()
        for call in (lambda: sessions.step(sid, ToolCall(name="shell", arguments={"command": "true"})),
                     lambda: sessions.score(sid)):  # fmt: skip
            try:
                outcome.append(call())
            except UnknownSession:
                outcome.append("unknown")
        assert outcome == ["unknown", "unknown"]
    finally:
        sessions.close_all()


def test_a_second_call_on_a_busy_session_is_refused_at_once(http):
    """As found: calls queued on one session's lock held every worker thread, and other clients' opens waited for
    them (19 s with four threads). A second call while one runs is a 409 at once."""
    sessions = http.app.state.session_host.sessions
    opened = http.post("/v1/sessions", json={"task": "demo:count-errors"}).json()["sessions"][0]
    sid = opened["session_id"]
    try:
        with sessions._open[sid].lock:  # a call is under way
            started = time.perf_counter()
            busy = http.post(
                f"/v1/sessions/{sid}/step", json={"call": {"name": "shell", "arguments": {"command": "true"}}}
            )
            assert busy.status_code == 409 and busy.headers["retry-after"] == "1"
            assert http.post(f"/v1/sessions/{sid}/score", json={}).status_code == 409
            assert time.perf_counter() - started < 5
            with pytest.raises(SessionBusy):
                sessions.next_turn(sid, "done")
        assert (
            http.post(
                f"/v1/sessions/{sid}/step", json={"call": {"name": "shell", "arguments": {"command": "true"}}}
            ).status_code
            == 200
        )
    finally:
        http.delete(f"/v1/sessions/{sid}")


def test_what_a_session_records_is_bounded_whatever_the_client_sends(http):
    """As found: each step kept a client's 20 MB of arguments until the close, and every message after the last turn
    recorded another copy of the class tools' state."""
    sessions = http.app.state.session_host.sessions
    opened = http.post("/v1/sessions", json={"task": "demo:kv-rename"}).json()["sessions"][0]
    sid = opened["session_id"]
    try:
        big = {"name": "nonexistent", "arguments": {"blob": "x" * (2 << 20)}}
        assert http.post(f"/v1/sessions/{sid}/step", json={"call": big}).status_code == 200
        for _ in range(6):
            assert http.post(f"/v1/sessions/{sid}/step", json={"message": "x"}).json()["done"] is True
        record = sessions._open[sid].record
        assert record.calls[0][0]["arguments"] == {"<arguments cut>": (2 << 20) + len('{"blob": ""}')}
        assert len(record.states) <= len(sessions._open[sid].task.turns)
    finally:
        http.delete(f"/v1/sessions/{sid}")


class _Spy:
    """ASGI middleware that notes each request it sees (as the Ray deployment's session affinity would read it)."""

    def __init__(self, app, seen: list[str]) -> None:
        self.app, self.seen = app, seen

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            self.seen.append(scope["path"])
        await self.app(scope, receive, send)


def test_inner_middleware_sees_no_request_the_gatekeeper_refuses():
    """As found on the Ray deployment: its session affinity sat outside the Gatekeeper and read a 300 MB body whole
    before the 401. Middleware the app is built with runs inside the Gatekeeper's auth and body limit."""
    seen: list[str] = []
    app = create_app(Settings(workers=1, token=TOKEN, max_body_bytes=4096), inner=[(_Spy, {"seen": seen})])
    with TestClient(app, raise_server_exceptions=False) as client:
        assert client.post("/v1/sessions", content=b"x" * 100_000).status_code == 401
        authorised = {"Authorization": f"Bearer {TOKEN}"}
        assert client.post("/v1/sessions", content=b"x" * 100_000, headers=authorised).status_code == 413
        assert seen == []
        assert client.post("/v1/sessions", json={"task": "nope"}, headers=authorised).status_code == 422
        assert seen == ["/v1/sessions"]
