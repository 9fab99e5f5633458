"""Multi-turn episodes against real sessions (train/episodes.py): the model's calls run in the jail, the results come
back as tool messages and are masked out of the loss, the verdict is the reward, and every session opened is closed,
on an error or an interrupt too. The policy is scripted (it plays each task's reference episode), so no weights load."""

from __future__ import annotations

import json
import threading
import time
from types import SimpleNamespace

import pytest
import torch

from groupscore.client.http import ServiceError
from groupscore.environments import load_source
from groupscore.schema.sessions import Observation, Opening
from groupscore.schema.verdict import Status, Verdict
from groupscore.train.demo import TASKSETS
from groupscore.train.env_config import EnvConfig
from groupscore.train.env_tasks import render_env_tasks
from groupscore.train.episodes import EpisodeRunner, LocalSessions
from groupscore.train.task import TaskRow
from groupscore.train.tiny_model import TOOL_MARKERS, TOOL_TEMPLATE, build_tokenizer

CALC = load_source(str(TASKSETS / "calc" / "heldout.yaml"))[:4]


@pytest.fixture(scope="module")
def tokenizer():
    corpus = [t.turns[0].messages[0]["content"] + json.dumps(t.metadata) for t in CALC]
    tok = build_tokenizer(corpus, 96)
    tok.add_tokens(TOOL_MARKERS)
    tok.chat_template = TOOL_TEMPLATE
    return tok


class ScriptedPolicy:
    """Plays each task's reference episode: the calls of turn 1, then the answer; `fail_on_turn` raises there."""

    def __init__(self, tokenizer, interrupt_on_turn: int | None = None, wrong: bool = False):
        self.tokenizer, self.interrupt_on_turn, self.wrong = tokenizer, interrupt_on_turn, wrong
        self.device, self.training, self.turn = torch.device("cpu"), False, 0
        self.generation_config = SimpleNamespace(eos_token_id=tokenizer.eos_token_id)

    def eval(self):
        self.training = False

    def train(self, mode=True):
        self.training = mode

    def generate(self, input_ids, attention_mask, **kwargs):
        self.turn += 1
        if self.turn == self.interrupt_on_turn:
            raise KeyboardInterrupt
        replies = []
        for row in input_ids.tolist():
            text = self.tokenizer.decode(row, skip_special_tokens=True)
            task = next(t for t in CALC if t.turns[0].messages[0]["content"] in text)
            meta = task.metadata
            reply = (
                meta["answer"]
                if "<|tool|>" in text
                else f"<tool_call>{json.dumps(meta['reference'][0][0])}</tool_call>"
            )
            if self.wrong and "<|tool|>" in text:
                reply = "\\boxed{1}"
            replies.append(self.tokenizer(reply, add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id])
        width = max(len(r) for r in replies)
        pad = self.tokenizer.pad_token_id
        return torch.cat([input_ids, torch.tensor([r + [pad] * (width - len(r)) for r in replies])], dim=1)


def runner_for(sessions, tokenizer, **env):
    tasks = render_env_tasks([TaskRow(t.id, "", None, {}, env=t) for t in CALC], tokenizer, "hermes")
    cfg = EnvConfig(**{"max_turns": 3, "max_tokens": 96, **env})
    return EpisodeRunner(sessions, CALC, tokenizer, "hermes", cfg, {t.id: t.prompt for t in tasks})


def test_a_reference_policy_scores_1_with_the_tool_results_masked_and_every_session_closed(tokenizer):
    sessions = LocalSessions()
    runner = runner_for(sessions, tokenizer)
    episodes = runner.run(ScriptedPolicy(tokenizer), [t.id for t in CALC for _ in range(2)], temperature=0.9)
    assert [e.reward for e in episodes] == [1.0] * 8
    assert runner.opened == runner.closed == 8 and sessions.open_count() == 0
    first = episodes[0]
    assert [m["role"] for m in first.messages] == ["assistant", "tool", "assistant"] and first.calls == 1
    assert first.messages[1]["content"] == CALC[0].metadata["outputs"][0][0]
    masked = tokenizer.decode([t for t, m in zip(first.completion_ids, first.env_mask) if m == 0])
    assert masked == f"<|tool|>{CALC[0].metadata['outputs'][0][0]}<|assistant|>"  # the tool's tokens, and only those
    assert first.ended == "answered" and runner.timing.sessions_s > 0 and runner.timing.generate_s > 0


def test_a_wrong_answer_scores_0(tokenizer):
    sessions = LocalSessions()
    episodes = runner_for(sessions, tokenizer).run(ScriptedPolicy(tokenizer, wrong=True), [CALC[0].id], 0.9)
    assert episodes[0].reward == 0.0 and sessions.open_count() == 0


def test_an_interrupt_mid_episode_still_closes_every_session(tokenizer):
    sessions = LocalSessions()
    runner = runner_for(sessions, tokenizer)
    with pytest.raises(KeyboardInterrupt):
        runner.run(ScriptedPolicy(tokenizer, interrupt_on_turn=2), [t.id for t in CALC], temperature=0.9)
    assert runner.opened == runner.closed == 4 and sessions.open_count() == 0 and sessions.jails_alive() == 0


def test_the_token_budget_ends_an_episode(tokenizer):
    sessions = LocalSessions()
    episodes = runner_for(sessions, tokenizer, max_tokens=10).run(ScriptedPolicy(tokenizer), [CALC[0].id], 0.9)
    assert len(episodes[0].completion_ids) <= 10 and episodes[0].ended.startswith("max_tokens")
    assert sessions.open_count() == 0


class SlowSessions:
    """Sessions whose every tool call takes 0.3 s; the `broken`-th group's open fails (the server's fault)."""

    def __init__(self, broken: int | None = None):
        self.broken, self.resets, self.open, self.groups = broken, 0, set(), []
        self.failure: Exception = ServiceError("no room for 2 more sessions", status_code=503)
        self.lock = threading.Lock()

    def open_group(self, task, count, seed=0):
        with self.lock:
            self.resets += 1
            self.groups.append((task.id, count))
            if self.resets == self.broken:
                raise self.failure
            sids = [f"s{self.resets}.{i}" for i in range(count)]
            self.open.update(sids)
        return [Opening(session_id=sid, task_id=task.id, messages=[], tools=[], turns=1) for sid in sids]

    def step(self, session_id, call):
        time.sleep(0.3)
        return Observation(content="1665")

    def next_turn(self, session_id, message=None):
        return SimpleNamespace(done=True, messages=[])

    def score(self, session_id, final_message=None):
        return Verdict(id=session_id, reward=1.0, status=Status.correct)

    def close(self, session_id):
        with self.lock:
            self.open.discard(session_id)
        return True


def test_tool_calls_of_different_episodes_do_not_wait_on_one_another(tokenizer):
    sessions = SlowSessions()
    runner = runner_for(sessions, tokenizer)
    started = time.perf_counter()
    episodes = runner.run(ScriptedPolicy(tokenizer), [t.id for t in CALC for _ in range(2)], temperature=0.9)
    assert len(episodes) == 8 and all(e.calls == 1 for e in episodes)
    assert time.perf_counter() - started < 8 * 0.3 * 0.6  # one after another would take 2.4 s
    assert not sessions.open
    assert sorted(sessions.groups) == sorted((t.id, 2) for t in CALC)  # a group's G sessions opened in one call


def test_a_group_that_cannot_open_is_masked_whole_and_the_others_run(tokenizer):
    sessions = SlowSessions(broken=1)
    runner = runner_for(sessions, tokenizer)
    episodes = runner.run(ScriptedPolicy(tokenizer), [t.id for t in CALC[:2] for _ in range(3)], 0.9)
    rewards = [e.reward for e in episodes]
    assert rewards.count(None) == 3 and rewards.count(1.0) == 3, rewards
    assert len({e.task_id for e in episodes if e.reward is None}) == 1  # the one group whose open failed
    assert runner.opened == runner.closed == 3 and not sessions.open


def test_a_refused_open_stops_the_run_and_closes_what_opened(tokenizer):
    """A 4xx (a task folder the service may not open) is the run's mistake: said at once, never trained as masked."""
    sessions = SlowSessions(broken=2)
    sessions.failure = ServiceError("task: not inside any of its GROUPSCORE_TASK_DIRS", status_code=422)
    runner = runner_for(sessions, tokenizer)
    with pytest.raises(ServiceError, match="GROUPSCORE_TASK_DIRS"):
        runner.run(ScriptedPolicy(tokenizer), [t.id for t in CALC for _ in range(2)], 0.9)
    assert runner.opened == runner.closed == 6 and not sessions.open


def test_a_local_group_opens_whole_or_not_at_all(tokenizer):
    from groupscore.environments.sessions import SessionLimit

    sessions = LocalSessions()
    sessions.max_sessions = 3
    runner = runner_for(sessions, tokenizer)
    episodes = runner.run(ScriptedPolicy(tokenizer), [CALC[0].id] * 2 + [CALC[1].id] * 2, 0.9)
    rewards = sorted(e.reward is None for e in episodes)
    assert rewards == [False, False, True, True], [e.verdict for e in episodes]  # the group that did not fit: masked
    assert runner.opened == runner.closed == 2 and sessions.open_count() == 0
    with pytest.raises(SessionLimit):
        sessions.open_group(CALC[0], 4)
    assert sessions.open_count() == 0


class FailingStep(SlowSessions):
    """Sessions whose tool calls fail with `failure` (the server's, or a refusal of the call itself)."""

    def __init__(self, failure: Exception):
        super().__init__()
        self.step_failure = failure

    def step(self, session_id, call):
        raise self.step_failure


@pytest.mark.parametrize(
    "failure, masked",
    [
        (ServiceError("POST .../step: the connection was lost mid-request"), True),
        (ServiceError("internal error", status_code=500), True),
        (ServiceError("session x: never opened or closed", status_code=404), True),
        (ServiceError("seq: call 3 failed on the server", 422, [{"loc": ["body", "seq"], "msg": "m"}]), True),
        (ServiceError("call.arguments: 65 levels deep", 422, [{"loc": ["body", "call", "arguments"]}]), False),
        (ServiceError("body too large", status_code=413), False),
    ],
    ids=["lost", "5xx", "gone", "resend-unanswerable", "refused-call", "too-large"],
)
def test_a_tool_call_the_server_lost_is_masked_and_one_it_refused_is_the_models_error(tokenizer, failure, masked):
    """A lost step judged nothing: infra_error (masked), never an error observation the model is scored 0 after. A
    call the sessions refuse as a request (422) is the model's own: it reads why, and the episode goes on."""
    sessions = FailingStep(failure)
    (episode,) = runner_for(sessions, tokenizer).run(ScriptedPolicy(tokenizer), [CALC[0].id], 0.9)
    if masked:
        assert episode.reward is None and episode.verdict.status is Status.infra_error and episode.ended == "infra"
        assert "a tool call was lost" in episode.verdict.reason and episode.calls == 1
    else:
        assert episode.messages[1] == {"role": "tool", "name": "mul", "content": f"invalid tool call: {failure}"}
        assert episode.reward == 1.0  # scored as the sessions judge it (this fake's verdict)
    assert not sessions.open


def test_a_session_that_cannot_open_is_masked_not_scored_0(tokenizer):
    sessions = SlowSessions(broken=2)
    episodes = runner_for(sessions, tokenizer).run(ScriptedPolicy(tokenizer), [t.id for t in CALC], 0.9)
    assert [e.reward for e in episodes].count(None) == 1
    masked = next(e for e in episodes if e.reward is None)
    assert masked.verdict is not None and masked.verdict.status is Status.infra_error and not sessions.open


def test_the_same_episodes_through_the_services_sessions_endpoints(tokenizer):
    from groupscore.service.embedded import start_embedded
    from groupscore.train.episodes import ServiceSessions, task_address

    assert task_address(CALC[0]).endswith(f"heldout.yaml:{CALC[0].id}")
    with start_embedded(port=0, env={"GROUPSCORE_TASK_DIRS": str(TASKSETS / "calc")}) as url:
        sessions = ServiceSessions([url])
        runner = runner_for(sessions, tokenizer)
        try:
            episodes = runner.run(ScriptedPolicy(tokenizer), [t.id for t in CALC for _ in range(2)], temperature=0.9)
        finally:
            sessions.close_all()
    assert [e.reward for e in episodes] == [1.0] * 8 and runner.opened == runner.closed == 8


def test_vllm_is_refused_for_episodes_in_one_line_and_auto_leaves_it_off(tmp_path):
    """Episodes are generated by the runner, without the sampling log-probs TRL's vLLM correction needs: vLLM on an
    environment taskset would fail on the first step, so it is refused up front (true) or left off (auto)."""
    from pathlib import Path

    from groupscore.train.config import load_config
    from groupscore.train.prepare import prepare

    demo = Path(__file__).resolve().parents[2] / "train" / "demo_env.yaml"
    config = load_config(demo, sets=[f"run_dir={tmp_path}", "grpo.use_vllm=true"])
    with pytest.raises(ValueError, match=r"^grpo\.use_vllm: an environment taskset's episodes are generated by"):
        prepare(config)
    auto = load_config(demo, sets=[f"run_dir={tmp_path}"])
    assert prepare(auto).hardware.use_vllm is False
