"""The environment session endpoints (/v1/sessions) through the real FastAPI app: a GRPO group opened, stepped, scored
and closed; auth, 404s, 422s, the 503 of a full server, metrics, parallel steps, and no session or jail left behind."""

from __future__ import annotations

import threading
import time

import pytest
from fastapi.testclient import TestClient

from groupscore.sandbox import SandboxUnavailable
from groupscore.service.app import create_app
from groupscore.service.settings import Settings

TOKEN = "sessions-test-token"
MAX_SESSIONS = 6
TASK = "demo:count-errors"
RIGHT = {"name": "shell", "arguments": {"command": "grep -c ' ERROR ' app.log > errors.txt"}}
WRONG = {"name": "shell", "arguments": {"command": "echo 7 > errors.txt"}}


@pytest.fixture(scope="module")
def app():
    return create_app(Settings(workers=1, token=TOKEN, max_sessions=MAX_SESSIONS))


@pytest.fixture(scope="module")
def http(app):
    with TestClient(app, headers={"authorization": f"Bearer {TOKEN}"}) as client:
        yield client


@pytest.fixture(autouse=True)
def nothing_left_open(app, http):
    yield
    sessions = app.state.session_host.sessions
    assert sessions.open_count() == 0 and sessions.jails_alive() == 0


def open_group(http, count, task=TASK, client=None):
    answer = http.post("/v1/sessions", json={"task": task, "count": count, "client": client})
    assert answer.status_code == 200, answer.text
    return [opening["session_id"] for opening in answer.json()["sessions"]]


def step(http, session_id, call):
    answer = http.post(f"/v1/sessions/{session_id}/step", json={"call": call})
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_a_group_of_four_is_opened_stepped_scored_and_closed(app, http):
    answer = http.post("/v1/sessions", json={"task": TASK, "count": 4, "seed": 3})
    openings = answer.json()["sessions"]
    assert len({o["session_id"] for o in openings}) == 4
    assert all(o["task_id"] == "count-errors" and o["turns"] == 1 for o in openings)
    assert openings[0]["messages"][0]["role"] == "user" and "ERROR" in openings[0]["messages"][0]["content"]
    assert {t["function"]["name"] for t in openings[0]["tools"]} >= {"shell", "read_file"}
    assert app.state.session_host.sessions.open_count() == 4
    ids = [o["session_id"] for o in openings]
    for session_id, call in zip(ids, [RIGHT, RIGHT, WRONG]):
        observation = step(http, session_id, call)
        assert observation == {"content": "", "is_error": False, "done": False, "steps": 1}
    turn = http.post(f"/v1/sessions/{ids[0]}/step", json={"message": "I wrote it."}).json()
    assert turn["done"] is True and turn["messages"] == []
    verdicts = [http.post(f"/v1/sessions/{i}/score", json={}).json() for i in ids]
    assert [v["reward"] for v in verdicts] == [1.0, 1.0, 0.0, 0.0]
    assert [v["status"] for v in verdicts] == ["correct", "correct", "incorrect", "incorrect"]
    assert verdicts[0]["details"]["session_id"] == ids[0]
    assert http.post(f"/v1/sessions/{ids[0]}/score").json() == verdicts[0]  # the same verdict again, no body
    assert [http.delete(f"/v1/sessions/{i}").json() for i in ids] == [{"closed": True}] * 4
    assert http.delete(f"/v1/sessions/{ids[0]}").json() == {"closed": False}
    assert http.post(f"/v1/sessions/{ids[0]}/score").json() == verdicts[0]  # a scored session's verdict outlives it


def test_a_numbered_call_sent_again_gets_its_answer_and_runs_once(http):
    """`seq` makes a step safe to resend: the same number again is the kept answer (the command ran once); a number
    that is neither the last nor the next is a 422 on `seq`; unnumbered calls count too."""
    [session_id] = open_group(http, 1)
    try:
        count = {"name": "shell", "arguments": {"command": "echo ran >> ran.log; wc -l < ran.log"}}
        path = f"/v1/sessions/{session_id}/step"
        first = http.post(path, json={"call": count, "seq": 1}).json()
        assert first["content"].strip() == "1" and first["steps"] == 1
        assert http.post(path, json={"call": count, "seq": 1}).json() == first  # resent: nothing ran
        other = {"name": "shell", "arguments": {"command": "echo another"}}
        refused = http.post(path, json={"call": other, "seq": 1})  # not a resend: another call under its number
        assert refused.status_code == 422 and "was another call; send 2" in refused.text
        assert step(http, session_id, count)["content"].strip() == "2"  # unnumbered: call 2
        for wrong in (1, 4):
            refused = http.post(path, json={"call": count, "seq": wrong})
            assert refused.status_code == 422, refused.text
            (error,) = refused.json()["detail"]
            assert error["loc"] == ["body", "seq"] and "send 3 for a new call, or 2" in error["msg"]
        turn = http.post(path, json={"message": "done", "seq": 3}).json()
        assert turn["done"] is True
        assert http.post(path, json={"message": "done", "seq": 3}).json() == turn
        # the last call was a turn's end: a step under its number is not its resend
        assert "was another call" in http.post(path, json={"call": count, "seq": 3}).text
        assert http.post(path, json={"call": count, "seq": 0}).status_code == 422  # numbers start at 1
    finally:
        http.delete(f"/v1/sessions/{session_id}")


def test_an_observation_shows_the_tools_output_and_errors(http):
    [session_id] = open_group(http, 1)
    try:
        listed = step(http, session_id, {"name": "shell", "arguments": {"command": "ls; exit 3"}})
        assert listed["content"].startswith("app.log") and "[exit code 3]" in listed["content"]
        assert listed["is_error"] is True and listed["steps"] == 1
        unknown = step(http, session_id, {"name": "rm_rf", "arguments": {}})
        assert unknown["is_error"] is True and "unknown tool 'rm_rf'" in unknown["content"]
    finally:
        http.delete(f"/v1/sessions/{session_id}")


def test_a_clients_sessions_are_closed_together(http):
    mine = open_group(http, 3, client="trainer-a")
    theirs = open_group(http, 1, client="trainer-b")
    assert http.delete("/v1/sessions", params={"client": "trainer-a"}).json() == {"closed": 3}
    assert http.post(f"/v1/sessions/{mine[0]}/step", json={"call": RIGHT}).status_code == 404
    assert step(http, theirs[0], RIGHT)["is_error"] is False
    assert http.delete("/v1/sessions", params={"client": "trainer-b"}).json() == {"closed": 1}
    assert http.delete("/v1/sessions").status_code == 422  # `client` is required: never "close everything"


def test_one_sessions_slow_step_does_not_hold_another(http):
    slow, fast = open_group(http, 2)
    try:
        started = threading.Event()
        slow_answer: dict = {}

        def slow_step():
            started.set()
            slow_answer.update(step(http, slow, {"name": "shell", "arguments": {"command": "sleep 2; echo slept"}}))

        thread = threading.Thread(target=slow_step)
        thread.start()
        started.wait()
        time.sleep(0.2)
        began = time.monotonic()
        assert step(http, fast, {"name": "shell", "arguments": {"command": "echo quick"}})["content"] == "quick\n"
        assert time.monotonic() - began < 1.0, "a step waited for another session's step"
        thread.join(10)
        assert slow_answer["content"] == "slept\n"
    finally:
        http.delete(f"/v1/sessions/{slow}")
        http.delete(f"/v1/sessions/{fast}")


def test_unknown_sessions_are_404_with_a_clear_message(http):
    for answer in (
        http.post("/v1/sessions/nope/step", json={"call": RIGHT}),
        http.post("/v1/sessions/nope/step", json={"message": "hi"}),
        http.post("/v1/sessions/nope/score", json={}),
    ):
        assert answer.status_code == 404
        assert answer.json()["detail"] == "no session 'nope': it was never opened, or it is closed"


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"task": "demo:no-such-task"}, "body.task", "demo has no task 'no-such-task'"),
        ({"task": "nowhere"}, "body.task", "SOURCE:TASK_ID"),
        ({"task": "/etc:passwd"}, "body.task", "GROUPSCORE_TASK_DIRS"),
        ({"task": TASK, "count": 0}, "body.count", "greater than or equal to 1"),
        ({"task": TASK, "surprise": 1}, "body.surprise", "Extra inputs"),
    ],
)
def test_a_bad_open_is_422_naming_its_field(app, http, body, field, words):
    answer = http.post("/v1/sessions", json=body)
    assert answer.status_code == 422
    [problem] = answer.json()["detail"]
    assert problem["field"] == field and words in problem["msg"]
    assert app.state.session_host.sessions.open_count() == 0


def test_a_step_gives_exactly_one_of_call_or_message(http):
    [session_id] = open_group(http, 1)
    try:
        for body in ({}, {"call": RIGHT, "message": "both"}):
            answer = http.post(f"/v1/sessions/{session_id}/step", json=body)
            assert answer.status_code == 422 and "exactly one of 'call' or 'message'" in answer.text
    finally:
        http.delete(f"/v1/sessions/{session_id}")


def test_a_full_server_answers_503_with_retry_after_and_opens_none_of_the_group(app, http):
    held = open_group(http, MAX_SESSIONS - 1)
    try:
        answer = http.post("/v1/sessions", json={"task": TASK, "count": 2})
        assert answer.status_code == 503 and answer.headers["retry-after"] == "2"
        assert "2 sessions asked for, room for 1" in answer.json()["detail"]
        assert app.state.session_host.sessions.open_count() == MAX_SESSIONS - 1
    finally:
        for session_id in held:
            http.delete(f"/v1/sessions/{session_id}")


def test_a_session_that_cannot_start_is_listed_and_scores_infra_error(http, monkeypatch):
    def no_jail(task):
        raise SandboxUnavailable("no jail here (the test says so)")

    monkeypatch.setattr("groupscore.environments.session.open_session_jail", no_jail)
    [session_id] = open_group(http, 1)
    try:
        observation = step(http, session_id, RIGHT)
        assert observation["is_error"] is True and "could not start" in observation["content"]
        verdict = http.post(f"/v1/sessions/{session_id}/score").json()
        assert verdict["status"] == "infra_error" and verdict["reward"] == 0.0
        assert "no jail here" in verdict["reason"]
    finally:
        http.delete(f"/v1/sessions/{session_id}")


def test_the_endpoints_need_the_token(http):
    for method, path in (("POST", "/v1/sessions"), ("POST", "/v1/sessions/x/step"), ("DELETE", "/v1/sessions/x")):
        answer = http.request(method, path, json={"task": TASK}, headers={"authorization": "Bearer wrong"})
        assert answer.status_code == 401


def test_metrics_count_sessions_and_time_steps(http):
    def metric(text, name):
        return next(float(line.split()[-1]) for line in text.splitlines() if line.startswith(name + " "))

    before = http.get("/metrics").text
    ids = open_group(http, 2)
    during = http.get("/metrics").text
    step(http, ids[0], RIGHT)
    step(http, ids[0], {"name": "list_files", "arguments": {}})
    for session_id in ids:
        http.delete(f"/v1/sessions/{session_id}")
    after = http.get("/metrics").text
    assert metric(during, "groupscore_sessions_open") == 2 and metric(after, "groupscore_sessions_open") == 0
    opened, closed = "groupscore_sessions_opened_total", "groupscore_sessions_closed_total"
    assert metric(after, opened) - metric(before, opened) == 2
    assert metric(after, closed) - metric(before, closed) == 2
    assert metric(after, "groupscore_sessions_reaped_total") == 0
    assert 'groupscore_session_step_seconds_count{tool="shell"}' in after
    assert 'groupscore_session_step_seconds_count{tool="list_files"}' in after
    # request metrics name the route, not each session's own path
    assert 'endpoint="/v1/sessions/{session_id}/step"' in after and ids[0] not in after


def test_the_openapi_docs_show_the_session_endpoints(http):
    paths = http.get("/openapi.json").json()["paths"]
    assert set(paths["/v1/sessions"]) == {"post", "delete"}
    assert set(paths["/v1/sessions/{session_id}"]) == {"delete"}
    assert "post" in paths["/v1/sessions/{session_id}/step"] and "post" in paths["/v1/sessions/{session_id}/score"]


def test_shutting_the_service_down_closes_every_session():
    app = create_app(Settings(workers=1, max_sessions=MAX_SESSIONS))
    with TestClient(app) as client:
        ids = open_group(client, 3)
        step(client, ids[0], RIGHT)
        sessions = app.state.session_host.sessions
        assert sessions.open_count() == 3 and sessions.jails_alive() == 3
    assert sessions.open_count() == 0 and sessions.jails_alive() == 0 and sessions.closed_total == 3


def test_a_sources_tasks_are_listed_as_they_show_before_they_run(http, tmp_path):
    answer = http.get("/v1/tasks", params={"source": "demo"})
    assert answer.status_code == 200, answer.text
    listed = answer.json()
    first = listed["tasks"][0]
    assert listed["source"] == "demo" and listed["problems"] == []
    assert first["address"] == "demo:count-errors" and first["tools"] == [
        "shell",
        "read_file",
        "write_file",
        "list_files",
    ]
    assert first["checkers"] == ["tests"] and first["description"].startswith("The file app.log holds")
    kv = next(t for t in listed["tasks"] if t["id"] == "kv-rename")
    assert kv["tools"] == ["get", "put", "delete", "keys"]  # the class's methods, read from its source
    for source, problem in [("/etc", "GROUPSCORE_TASK_DIRS"), ("bfcl/nope", "nope"), ("", "at least 1")]:
        refused = http.get("/v1/tasks", params={"source": source})
        assert refused.status_code == 422 and problem in refused.text, refused.text
        assert refused.json()["detail"][0]["loc"][:2] == ["query", "source"]
    assert http.get("/v1/tasks").status_code == 422
    assert "/v1/tasks" in http.get("/openapi.json").json()["paths"]


def test_a_task_files_bad_tasks_are_named_and_its_good_ones_listed(tmp_path):
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(
        "- id: good\n  prompt: say hi\n  tools: [shell]\n  checkers: [{kind: final_message, item: {verifier: math, "
        "answer: '1'}}]\n- id: typo\n  promt: say hi\n"
    )
    app = create_app(Settings(workers=1, token=TOKEN, max_sessions=2, task_dirs=str(tmp_path)))
    with TestClient(app, headers={"authorization": f"Bearer {TOKEN}"}) as client:
        listed = client.get("/v1/tasks", params={"source": str(tasks)}).json()
    assert [t["address"] for t in listed["tasks"]] == [f"{tasks}:good"]
    assert listed["problems"] == [f"{tasks}: task 2: 'promt': not a task field (did you mean 'prompt'?)"]


def test_the_api_descriptions_schema_names_are_plain(http):
    """No two request models share a name, so none is shown by its module path (groupscore__schema__...)."""
    names = http.get("/openapi.json").json()["components"]["schemas"]
    assert "ScoreSessionRequest" in names and not [n for n in names if "__" in n]


def test_listing_harbor_tasks_builds_nothing_and_a_bad_file_is_a_422_not_a_500(http, tmp_path, monkeypatch):
    import sys

    replay = sys.modules["groupscore.environments.replay"]  # the module (the package exports its function `replay`)

    def refuse(*_args, **_kwargs):
        raise AssertionError("a Harbor image was built to list its task")

    monkeypatch.setattr(replay, "build_state", refuse)
    listed = http.get("/v1/tasks", params={"source": "harbor"}).json()
    assert len(listed["tasks"]) >= 20 and all(t["address"].startswith("harbor:") for t in listed["tasks"])
    binary = tmp_path / "tasks.yaml"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    app = create_app(Settings(workers=1, token=TOKEN, max_sessions=2, task_dirs=str(tmp_path)))
    with TestClient(app, headers={"authorization": f"Bearer {TOKEN}"}) as client:
        refused = client.get("/v1/tasks", params={"source": str(binary)})
    assert refused.status_code == 422 and "cannot be read as a task source" in refused.text
