"""`groupscore eval --endpoint URL`: a model behind an OpenAI-compatible server as the policy over a taskset. A
scripted server here speaks the chat-completions wire (tool calls with ids, `tool` messages, usage); whose fault each
ending is (the endpoint's: infra_error; the model's bad call: an error it reads; the run's key or model: one line)."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from helpers import groupscore

from groupscore.environments import Sessions, load_task
from groupscore.train.chat_endpoint import ChatEndpoint, EndpointError, EndpointRefused
from groupscore.train.endpoint_rollouts import ChatEpisodes, sample_replies
from groupscore.train.env_config import EnvConfig
from groupscore.train.task import TaskRow

DEMO_ENV = str(Path(__file__).resolve().parents[2] / "train" / "demo_env.yaml")
CALC = str(Path(__file__).resolve().parents[2] / "train" / "tasks" / "calc" / "heldout.yaml")
Policy = Callable[[dict[str, Any]], tuple[int, dict[str, Any]]]


def calculator(wrong_on_odd_seeds: bool = False, arguments: Callable[[int, int], str] | None = None) -> Policy:
    """A model that calls the calculator's tool for "A+B=" / "A*B=", then answers the tool's result boxed."""

    def reply(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        last = body["messages"][-1]
        if last["role"] == "tool":
            value = int(last["content"]) if last["content"].strip().lstrip("-").isdigit() else 0
            if wrong_on_odd_seeds and body.get("seed", 0) % 2:
                value += 1
            return 200, completion({"role": "assistant", "content": f"The answer is \\boxed{{{value}}}."}, 9)
        a, op, b = re.fullmatch(r"(\d+)([+*])(\d+)=", last["content"].strip()).groups()
        name = "add" if op == "+" else "mul"
        args = arguments(int(a), int(b)) if arguments else json.dumps({"a": int(a), "b": int(b)})
        call = {"id": f"call-{name}", "type": "function", "function": {"name": name, "arguments": args}}
        return 200, completion({"role": "assistant", "content": None, "tool_calls": [call]}, 12)

    return reply


def completion(message: dict[str, Any], tokens: int) -> dict[str, Any]:
    return {
        "id": "x",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": tokens, "total_tokens": 5 + tokens},
    }


class Server:
    """An OpenAI-compatible server on a free port: /v1/models lists `models`, /v1/chat/completions asks `policy`."""

    def __init__(self, policy: Policy, models: tuple[str, ...] = ("scripted",)) -> None:
        self.policy, self.models, self.requests = policy, models, []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args: Any) -> None:
                pass

            def _send(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._send(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in outer.models]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                outer.requests.append({"body": body, "auth": self.headers.get("authorization")})
                self._send(*outer.policy(body))

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}/v1"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


@pytest.fixture
def serve() -> Iterator[Callable[..., Server]]:
    started: list[Server] = []

    def start(policy: Policy, models: tuple[str, ...] = ("scripted",)) -> Server:
        started.append(Server(policy, models))
        return started[-1]

    yield start
    for server in started:
        server.close()


def play(server: Server, task_ids: list[str], cfg: EnvConfig | None = None, **endpoint: Any) -> list[Any]:
    tasks = {task_id: load_task(f"{CALC}:{task_id}") for task_id in set(task_ids)}
    sessions = Sessions()
    try:
        runner = ChatEpisodes(
            ChatEndpoint(server.url, backoff_s=0, **endpoint), sessions, tasks, cfg or EnvConfig(max_tokens=64)
        )
        return runner.run(task_ids, temperature=0.7, seed=0)
    finally:
        assert sessions.open_count() == 0  # every session closed, however its episode ended
        sessions.close_all()


def test_an_episode_sends_the_tools_runs_the_call_and_is_scored_by_its_session(serve):
    server = serve(calculator(wrong_on_odd_seeds=True))
    episodes = play(server, ["add-58-84", "add-58-84"], api_key="k-1")
    assert [e.reward for e in episodes] == [1.0, 0.0]  # seeds 0 and 1: a GRPO group with a spread
    assert [e.ended for e in episodes] == ["answered", "answered"] and episodes[0].calls == 1
    first, second = [r["body"] for r in server.requests if r["body"]["seed"] == 0]
    assert first["model"] == "scripted" and {t["function"]["name"] for t in first["tools"]} == {"add", "mul"}
    assert first["messages"] == [{"role": "user", "content": "58+84="}]
    call, result = second["messages"][1:]
    assert call["tool_calls"][0]["id"] == "call-add" and call["role"] == "assistant"
    assert result == {"role": "tool", "tool_call_id": "call-add", "content": "142"}
    assert {r["auth"] for r in server.requests} == {"Bearer k-1"}
    assert episodes[0].messages[-1]["content"] == "The answer is \\boxed{142}."


def test_a_call_the_model_wrote_badly_is_an_error_it_reads_not_an_infra_error(serve):
    server = serve(calculator(arguments=lambda a, b: f'{{"a": {a}, "b": '))  # cut-off JSON
    (episode,) = play(server, ["mul-51-14"])
    assert episode.verdict.status.value == "incorrect" and episode.reward == 0.0
    tool = next(m for m in episode.messages if m["role"] == "tool")
    assert tool["content"].startswith("invalid tool call: the arguments are not JSON")
    server = serve(calculator(arguments=lambda a, b: json.dumps([a, b])))
    (episode,) = play(server, ["mul-51-14"])
    assert "not a JSON object" in next(m for m in episode.messages if m["role"] == "tool")["content"]


def test_calls_in_any_shape_go_back_in_openais(serve):
    """Arguments as an object and no call id (some servers): sent back as a JSON string under an id of our own."""

    def loose(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if body["messages"][-1]["role"] == "tool":
            return 200, completion({"role": "assistant", "content": "\\boxed{714}", "tool_calls": "none"}, 3)
        call = {"function": {"name": "mul", "arguments": {"a": 51, "b": 14}}}
        return 200, completion({"role": "assistant", "content": None, "tool_calls": [call]}, 5)

    server = serve(loose)
    (episode,) = play(server, ["mul-51-14"])
    assert episode.reward == 1.0 and episode.ended == "answered"
    sent = server.requests[1]["body"]["messages"]
    assert sent[1]["tool_calls"] == [
        {"id": "call-1-0", "type": "function", "function": {"name": "mul", "arguments": '{"a": 51, "b": 14}'}}
    ]
    assert sent[2] == {"role": "tool", "tool_call_id": "call-1-0", "content": "714"}


def test_an_endpoint_that_fails_is_infra_error_and_a_refused_key_or_model_stops_the_run(serve):
    down = serve(lambda body: (503, {"error": {"message": "overloaded"}}))
    (episode,) = play(down, ["add-92-71"])
    assert episode.reward is None and episode.verdict.status.value == "infra_error"
    assert "overloaded" in episode.verdict.reason and len(down.requests) == 5  # sent again 4 times
    assert episode.verdict.details["infra"] == "endpoint"
    refused = serve(lambda body: (401, {"error": {"message": "invalid api key"}}))
    with pytest.raises(EndpointRefused, match="HTTP 401: invalid api key"):
        play(refused, ["add-92-71"])
    no_tools = serve(
        lambda body: (400, {"error": {"message": '"auto" tool choice requires --enable-auto-tool-choice'}})
    )
    (episode,) = play(no_tools, ["add-92-71"])  # refused before the model wrote anything: its settings, masked
    assert episode.reward is None and "enable-auto-tool-choice" in episode.verdict.reason

    def overflows(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if body["messages"][-1]["role"] == "tool":
            return 400, {"error": {"message": "maximum context length is 8 tokens"}}
        return calculator()(body)

    (episode,) = play(serve(overflows), ["add-92-71"])  # past the context after the model's reply: it is scored
    assert episode.verdict.status.value == "incorrect" and "maximum context length" in episode.ended
    busy = serve(lambda body: (429, {"error": "slow down"}))
    (episode,) = play(busy, ["add-92-71"])
    assert episode.reward is None and len(busy.requests) == 5


def test_turns_tokens_and_the_sessions_step_budget_bound_an_episode(serve):
    def loops(calls: int) -> Policy:
        def reply(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
            call = {"type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 1}'}}
            made = [{**call, "id": f"c{i}"} for i in range(calls)]
            return 200, completion({"role": "assistant", "content": "", "tool_calls": made}, 30)

        return reply

    twice = serve(loops(2))
    (episode,) = play(twice, ["add-92-71"], EnvConfig(max_turns=3, max_tokens=1000))
    assert episode.ended == "the session ended the episode" and episode.calls == 4  # the task's max_steps: 4
    assert episode.turns == 2 and episode.reward == 0.0
    (episode,) = play(twice, ["add-92-71"], EnvConfig(max_turns=1, max_tokens=1000))
    assert episode.ended == "max_turns (1)" and episode.calls == 2
    once = serve(loops(1))
    (episode,) = play(once, ["add-92-71"], EnvConfig(max_turns=9, max_tokens=50))
    assert episode.ended == "max_tokens (50)" and episode.turns == 2 and episode.calls == 2
    assert [r["body"]["max_tokens"] for r in once.requests] == [50, 20]


def test_the_served_model_is_the_only_one_listed_or_must_be_named(serve):
    server = serve(calculator(), models=("a", "b"))
    with pytest.raises(ValueError, match="lists 2 models \\(a, b\\): name one with --model"):
        ChatEndpoint(server.url).served_model()
    assert ChatEndpoint(server.url, model="b").served_model() == "b"
    with pytest.raises(ValueError, match="not an http"):
        ChatEndpoint("localhost:8000")
    with pytest.raises(EndpointError, match="did not answer"):
        ChatEndpoint("http://127.0.0.1:9", backoff_s=0).served_model()
    with pytest.raises(EndpointError, match="did not answer"):  # named or not, it is reached before any task runs
        ChatEndpoint("http://127.0.0.1:9", model="named", backoff_s=0).served_model()


def test_single_turn_replies_come_back_per_task_and_a_lost_one_is_none(serve):
    count = iter(range(100))

    def answers(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if next(count) == 1:
            return 500, {"error": "boom"}
        return 200, completion({"role": "assistant", "content": body["messages"][-1]["content"][::-1]}, 3)

    server = serve(answers)
    tasks = [TaskRow("t", "abc", None, {}), TaskRow("u", "xyz", None, {})]
    replies = sample_replies(
        ChatEndpoint(server.url, backoff_s=0), tasks, "be brief", n=2, temperature=1, max_tokens=8, seed=0, workers=1
    )
    assert replies == [["cba", "cba"], ["zyx", "zyx"]]  # the 500 was sent again and answered
    assert server.requests[0]["body"]["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "abc"},
    ]


@pytest.mark.slow
def test_the_command_evaluates_an_endpoint_over_the_environment_demo_as_typed(serve, tmp_path):
    server = serve(calculator(wrong_on_odd_seeds=True))
    out = tmp_path / "eval"
    done = groupscore(
        "eval", DEMO_ENV, "--endpoint", server.url, "--set", f"run_dir={tmp_path}", "-n", "3", "-k", "2",
        "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "3 tasks x 2 rollouts: pass@1 0.500" in done.stdout and "learnable 100%" in done.stdout
    lines = [json.loads(line) for line in (out / "rollouts.jsonl").read_text().splitlines()]
    assert [line["reward"] for line in lines] == [1.0, 0.0] * 3
    assert all(line["trajectory"]["messages"][0]["tool_calls"] for line in lines)
    assert (out / "learnable.txt").read_text().count("\n") == 3
    shown = groupscore("env", "show", str(out / "rollouts.jsonl"), "--line", "2")  # the episode, readable
    assert shown.returncode == 0 and "rollout 1: incorrect, reward 0.0" in shown.stdout.splitlines()[0]
    assert "assistant calls " in shown.stdout and "tool result:" in shown.stdout and "(ended: answered" in shown.stdout
    down = serve(lambda body: (503, {"error": "down"}))
    done = groupscore("eval", DEMO_ENV, "--endpoint", down.url, "--set", f"run_dir={tmp_path}", "-n", "1", "-k", "1")
    assert done.returncode == 1 and "infra_error rollouts: 1" in done.stdout


@pytest.mark.slow
def test_the_command_evaluates_an_endpoint_over_a_single_turn_taskset_scored_by_the_service(serve, tmp_path):
    def adds(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        a, b = map(int, body["messages"][-1]["content"].rstrip("=").split("+"))
        return 200, completion({"role": "assistant", "content": f"\\boxed{{{a + b + body['seed'] % 2}}}"}, 4)

    server = serve(adds)
    demo = str(Path(DEMO_ENV).with_name("demo.yaml"))
    out = tmp_path / "eval"
    done = groupscore("eval", demo, "--endpoint", server.url, "--set", f"run_dir={tmp_path}", "-n", "4", "-k", "2",
                      "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "4 tasks x 2 rollouts: pass@1 0.500, pass@2 1.000" in done.stdout and "learnable 100%" in done.stdout
    lines = [json.loads(line) for line in (out / "rollouts.jsonl").read_text().splitlines()]
    assert [(line["reward"], line["status"]) for line in lines] == [(1.0, "correct"), (0.0, "incorrect")] * 4
    assert all(line["completion"].startswith("\\boxed{") for line in lines)
    from groupscore.train.taskset import load_tasks

    learnable = load_tasks(out / "learnable.jsonl")  # the trainer's own reader, as `taskset.train` would read them
    accepted = load_tasks(out / "accepted.jsonl")
    assert sorted(t.id for t in learnable) == sorted({line["task_id"] for line in lines})
    assert [t.id for t in accepted] == [f"{line['task_id']}/0" for line in lines[::2]]  # the solved rollouts
    assert all(t.solution == line["completion"] and t.item["answer"] for t, line in zip(accepted, lines[::2]))
    assert accepted[0].prompt == lines[0]["prompt"] and "accepted.jsonl" in done.stdout
    done = groupscore("eval", demo, "--endpoint", server.url, "--model", "nope", "-n", "1", "-k", "1",
                      "--set", f"run_dir={tmp_path}")  # fmt: skip
    assert done.returncode == 0  # the scripted server serves any name; a real one refuses it (404): see below
    refusing = serve(lambda body: (404, {"error": {"message": f"The model `{body['model']}` does not exist."}}))
    done = groupscore("eval", demo, "--endpoint", refusing.url, "--model", "nope", "-n", "1", "-k", "1",
                      "--set", f"run_dir={tmp_path}")  # fmt: skip
    assert done.returncode == 2 and done.stderr.strip().splitlines()[-1].endswith("The model `nope` does not exist.")
