"""The sessions client (groupscore.client.sessions) against a real `groupscore serve`, and its retry rules (a step
never runs twice: resent only under its number) against a transport that answers what each test says."""

from __future__ import annotations

import json

import httpx
import pytest

from groupscore.client.http import RetryPolicy, ServiceError
from groupscore.client.sessions import SessionsClient

TOKEN = "client-sessions-token"
TASK = "demo:count-errors"
RIGHT = "grep -c ' ERROR ' app.log > errors.txt"

pytestmark = pytest.mark.service(workers=1, env={"GROUPSCORE_TOKEN": TOKEN, "GROUPSCORE_MAX_SESSIONS": "8"})


def sessions_open(http) -> float:
    text = http.get("/metrics", headers={"authorization": f"Bearer {TOKEN}"}).text
    return next(float(line.split()[-1]) for line in text.splitlines() if line.startswith("groupscore_sessions_open "))


def test_a_group_is_opened_stepped_scored_and_closed_on_leaving_the_block(url, http):
    with SessionsClient(url, token=TOKEN) as env:
        group = env.open_group(TASK, count=4)
        assert len({o.session_id for o in group}) == 4 and sessions_open(http) == 4
        assert "shell" in [tool["function"]["name"] for tool in group[0].tools]
        for opening in group[:2]:
            observation = env.step(opening.session_id, "shell", {"command": RIGHT})
            assert not observation.is_error and observation.steps == 1
        turn = env.end_turn(group[0].session_id, "I counted them.")
        assert turn.done and turn.messages == []
        assert [env.score(o.session_id).reward for o in group] == [1.0, 1.0, 0.0, 0.0]
        assert env.close(group[0].session_id) is True and env.close(group[0].session_id) is False
    assert sessions_open(http) == 0


def test_close_client_closes_a_holders_sessions(url, http):
    with SessionsClient(url, token=TOKEN, client="holder-1") as env:
        env.open_group(TASK, count=2)
        env.open_group(TASK, count=1, client="holder-2")
        assert env.close_client() == 2 and sessions_open(http) == 1
    assert sessions_open(http) == 0  # holder-2's session went with the block too


def test_a_final_message_reaches_the_verdict(url):
    with SessionsClient(url, token=TOKEN) as env:
        [opening] = env.open_group("demo:sum-python")
        assert env.score(opening.session_id, final_message="The sum is \\boxed{338350}.").reward == 1.0


class LosesFirstStepAnswer(httpx.BaseTransport):
    """The server runs the first step sent, then the connection drops before its answer arrives."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner, self.lost = inner, 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if request.url.path.endswith("/step") and not self.lost:
            self.lost += 1
            response.read()
            response.close()
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.", request=request)
        return response


def test_a_step_whose_answer_was_lost_is_resent_under_its_number_and_runs_once(url):
    with SessionsClient(url, token=TOKEN, retry=RetryPolicy(max_retries=2, backoff_s=0)) as env:
        lossy = LosesFirstStepAnswer(env._http[0]._transport)
        env._http[0]._transport = lossy
        [opening] = env.open_group(TASK)
        observation = env.step(opening.session_id, "shell", {"command": "echo ran >> ran.log; wc -l < ran.log"})
        assert lossy.lost == 1 and observation.content.strip() == "1" and observation.steps == 1
        assert env.step(opening.session_id, "shell", {"command": "wc -l < ran.log"}).content.strip() == "1"
        assert env.end_turn(opening.session_id, "done").done


def test_an_unknown_session_is_a_404_service_error_at_once(url):
    with SessionsClient(url, token=TOKEN, retry=RetryPolicy(backoff_s=5)) as env:
        with pytest.raises(ServiceError) as raised:
            env.step("no-such-session", "shell", {"command": "true"})
        assert raised.value.status_code == 404 and "never opened" in str(raised.value)


def test_a_bad_task_or_token_is_a_service_error(url):
    with SessionsClient(url, token=TOKEN) as env, pytest.raises(ServiceError) as raised:
        env.open_group("demo:nope")
    assert raised.value.status_code == 422 and "demo has no task 'nope'" in str(raised.value)
    with SessionsClient(url) as env, pytest.raises(ServiceError) as raised:
        env.open_group(TASK)
    assert raised.value.status_code == 401


# -- retries, against a scripted transport -----------------------------------------------------------------------------

OPENING = {"session_id": "s1", "task_id": "t", "messages": [], "tools": [], "turns": 1}
VERDICT = {"id": "t", "reward": 1.0, "status": "correct"}


def scripted(answers: list[httpx.Response], sent: list[httpx.Request]) -> httpx.Client:
    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return answers.pop(0)

    return httpx.Client(base_url="http://scripted", transport=httpx.MockTransport(handle))


def client_with(*servers: httpx.Client) -> SessionsClient:
    env = SessionsClient(["http://a", "http://b"][: len(servers)], retry=RetryPolicy(max_retries=2, backoff_s=0))
    env._http = list(servers)
    return env


def test_a_step_of_a_session_opened_elsewhere_answered_with_a_5xx_is_not_sent_again():
    """Its count is not known here, so it goes unnumbered: the server could not tell a resend from a second step."""
    sent: list[httpx.Request] = []
    env = client_with(scripted([httpx.Response(502, json={"detail": "bad gateway"})], sent))
    with pytest.raises(ServiceError) as raised:
        env.step("s1", "shell", {"command": "echo once >> log"})
    assert raised.value.status_code == 502 and len(sent) == 1 and b'"seq"' not in sent[0].content


def test_a_numbered_step_is_resent_and_one_whose_fate_is_unknown_leaves_its_session_unnumbered():
    sent: list[httpx.Request] = []
    lost = httpx.Response(502, json={"detail": "bad gateway"})
    observation = httpx.Response(200, json={"content": "ok", "steps": 1})
    env = client_with(scripted([httpx.Response(200, json={"sessions": [OPENING]}), lost, observation], sent))
    env.open_group(TASK)
    assert env.step("s1", "shell", {"command": "true"}).content == "ok"
    assert [json.loads(r.content).get("seq") for r in sent[1:]] == [1, 1]  # the same call, under the same number
    env._http = [scripted([lost, lost, lost, observation], sent)]
    with pytest.raises(ServiceError):
        env.step("s1", "shell", {"command": "true"})
    assert [json.loads(r.content).get("seq") for r in sent[3:]] == [2, 2, 2]
    env.step("s1", "shell", {"command": "true"})  # it may have run: from here on unnumbered, never resent
    assert "seq" not in json.loads(sent[-1].content)


def test_a_numbered_step_still_busy_after_every_resend_leaves_its_session_unnumbered():
    """A 409 after the resends: the first send may still be running, and would answer the next call's number."""
    sent: list[httpx.Request] = []
    busy = httpx.Response(409, json={"detail": "busy"}, headers={"retry-after": "0"})
    observation = httpx.Response(200, json={"content": "ok", "steps": 2})
    env = client_with(
        scripted([httpx.Response(200, json={"sessions": [OPENING]}), busy, busy, busy, observation], sent)
    )
    env.open_group(TASK)
    with pytest.raises(ServiceError) as raised:
        env.step("s1", "shell", {"command": "true"})
    assert raised.value.status_code == 409
    assert env.step("s1", "shell", {"command": "echo next"}).content == "ok"
    assert "seq" not in json.loads(sent[-1].content)


def test_scoring_and_a_full_server_are_retried():
    sent: list[httpx.Request] = []
    full = httpx.Response(503, json={"detail": "full"}, headers={"retry-after": "0"})
    server = scripted([full, httpx.Response(200, json={"sessions": [OPENING]})], sent)
    env = client_with(server)
    assert [o.session_id for o in env.open_group(TASK)] == ["s1"]
    server_answers = [httpx.Response(500, json={"detail": "x"}), httpx.Response(200, json=VERDICT)]
    env._http = [scripted(server_answers, sent)]
    assert env.score("s1").reward == 1.0
    assert [r.url.path for r in sent] == ["/v1/sessions", "/v1/sessions", "/v1/sessions/s1/score"] + [
        "/v1/sessions/s1/score"
    ]


def test_each_group_goes_to_the_next_server_and_its_calls_follow_it():
    sent_a: list[httpx.Request] = []
    sent_b: list[httpx.Request] = []
    a = scripted([httpx.Response(200, json={"sessions": [{**OPENING, "session_id": "on-a"}]})], sent_a)
    b = scripted(
        [
            httpx.Response(200, json={"sessions": [{**OPENING, "session_id": "on-b"}]}),
            httpx.Response(200, json={"content": "hi", "steps": 1}),
        ],
        sent_b,
    )
    env = client_with(a, b)
    env.open_group(TASK)
    env.open_group(TASK)
    assert env.step("on-b", "shell", {"command": "echo hi"}).content == "hi"
    assert [r.url.path for r in sent_a] == ["/v1/sessions"]
    assert [r.url.path for r in sent_b] == ["/v1/sessions", "/v1/sessions/on-b/step"]
