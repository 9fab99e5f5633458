"""verl's agent loop over groupscore sessions: one session per `run()`, its tool calls stepped on the service, the
session's verdict the trajectory's reward.

verl (0.9.1, `verl.experimental.agent_loop`) runs one agent loop per sample and rollout; a row of the dataset picks
this one by its `agent_name` and names its task in `extra_info`:

    {"prompt": [{"role": "user", "content": "demo:count-errors"}], "agent_name": "groupscore",
     "extra_info": {"task": "demo:count-errors", "seed": 0}}

The loop is found by verl through a file of agent loops (actor_rollout_ref.rollout.agent.agent_loop_config_path,
examples/verl_agent_loop.yaml), whose entry also carries the settings, since environment variables often do not reach
verl's Ray workers:

    - name: groupscore
      _target_: groupscore.client.verl_agent.GroupscoreAgentLoop
      url: http://10.0.0.5:8000     # the service (several, comma-separated: sessions spread over them)
      token: null                   # its GROUPSCORE_TOKEN
      max_turns: 16                 # model turns per episode (default: rollout.multi_turn.max_assistant_turns)

Importing this module also registers it under `groupscore` (verl's `register`), with GROUPSCORE_URL and
GROUPSCORE_TOKEN for what an entry does not say.

One episode: the session's opening gives the messages and the tools (the dataset's prompt is used only when no
session opened); verl's server manager generates; verl's tool parser (rollout.multi_turn.format, e.g. hermes) reads
the calls; each call is a step of the session, its output appended as a tool message through verl's Continuous Token
builder with response mask 0; a turn without a call ends the model's turn and the service answers the next user
turn, or that the episode is done. Limits: max_turns, the response length (verl's token budget), the session's own
step budget. The session is closed when `run()` ends, however it ends.

A tool call the model got wrong (no JSON, an unknown tool, a call the service refuses as invalid) is answered to the
model as a tool message and costs it the reward it would lose. An infrastructure failure (no session could open, the
service is unreachable or lost the session, the verdict is infra_error) is never trained on: the response mask is
all zeros, the reward 0.0, and it is counted in the worker's log (`infra_count()`) and in the sample's
`reward_extra_info` (`groupscore_infra_error`: 1). GRPO still puts that sample's 0.0 in its group's mean and std: the
sample teaches nothing, but its group's advantages shift a little (verl has no per-sample exclusion there).

Requires verl in the same environment (this module imports it); groupscore-client needs nothing more. Async in
verl's event loop; the blocking session calls run on a thread pool of their own, so a slow tool in one episode holds
no other.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import logging
import os
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from uuid import uuid4

from pydantic import ValidationError
from verl.experimental.agent_loop.agent_loop import (  # type: ignore[import-not-found]
    AgentLoopBase,
    AgentLoopOutput,
    register,
)
from verl.experimental.agent_loop.tool_parser import ToolParser  # type: ignore[import-not-found]
from verl.tools.schemas import OpenAIFunctionToolSchema  # type: ignore[import-not-found]

from groupscore.client import settings
from groupscore.client.http import ServiceError
from groupscore.client.sessions import SessionsClient
from groupscore.client.settings import http_urls
from groupscore.schema.sessions import Message, ToolCall
from groupscore.schema.verdict import Status

__all__ = ["AGENT_NAME", "GroupscoreAgentLoop", "infra_count"]

AGENT_NAME = "groupscore"
# Threads that wait on session calls (a thread waits on a jail, not a core): verl runs every sample of a worker's
# batch at once, and a step blocks for up to the task's step limit.
SESSION_THREADS = 256
# What the service answers for a call it refused as invalid: the model's doing, answered to the model.
REFUSED = frozenset({400, 413, 422})
# reward_extra_info: verl takes its keys from a batch's first sample, so every sample carries all of them.
EXTRA_KEYS = ("groupscore_infra_error", "groupscore_tool_calls", "groupscore_turns")

logger = logging.getLogger(__name__)


class _Infra(Exception):
    """The episode failed for a reason that is not the model's: mask it."""


class _Counts:
    """Sessions this process ran, and how many were masked as infrastructure failures."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.episodes = 0
        self.infra = 0

    def add(self, infra: bool) -> tuple[int, int]:
        with self.lock:
            self.episodes += 1
            self.infra += infra
            return self.infra, self.episodes


_COUNTS = _Counts()
_CLIENTS: dict[tuple[tuple[str, ...], str | None], SessionsClient] = {}
_CLIENTS_LOCK = threading.Lock()
_OPENED: set[str] = set()  # the names of the clients that opened a session
_POOL = ThreadPoolExecutor(max_workers=SESSION_THREADS, thread_name_prefix="groupscore-session")


def infra_count() -> tuple[int, int]:
    """(episodes masked as infrastructure failures, episodes run) in this process."""
    with _COUNTS.lock:
        return _COUNTS.infra, _COUNTS.episodes


def _client(url: str | None, token: str | None) -> SessionsClient:
    """One client per service and token in a process, its connections pooled. GROUPSCORE_URL and GROUPSCORE_TOKEN
    stand in for what the entry does not say."""
    urls = tuple(http_urls(url).split(",") if url else settings.load().urls)
    token = token if token is not None else settings.token()
    with _CLIENTS_LOCK:
        if (urls, token) not in _CLIENTS:
            holder = f"verl-{socket.gethostname()}-{os.getpid()}-{uuid4().hex[:6]}"
            _CLIENTS[urls, token] = client = SessionsClient(list(urls), token=token, client=holder)
            atexit.register(_close_at_exit, client)
        return _CLIENTS[urls, token]


def _close_at_exit(client: SessionsClient) -> None:
    """Close what a `run()` left open (a worker that exits mid-episode): every session of the client's name, on each
    service it opened one on. A worker killed outright leaves them to the service's reaper."""
    if client.client not in _OPENED:  # no session ever opened (e.g. the service was never reachable): nothing to do
        return
    try:
        client.close_all()
    except ServiceError as exc:
        logger.warning("groupscore: closing this worker's sessions at exit failed (the service reaps them): %s", exc)


@dataclass
class _Episode:
    """What one `run()` builds: the chat so far, the token stream verl generates from, and what the trainer gets."""

    messages: list[Message]
    tools: list[dict[str, Any]]
    tokens: list[int] = field(default_factory=list)  # prompt, then every response token (verl's runtime stream)
    prompt_length: int = 0
    response_mask: list[int] = field(default_factory=list)
    logprobs: list[float] | None = None
    assistant_turns: int = 0
    user_turns: int = 0
    tool_calls: int = 0
    final_message: str | None = None
    metrics: dict[str, Any] = field(default_factory=dict)


@register(AGENT_NAME)
class GroupscoreAgentLoop(AgentLoopBase):
    """One groupscore session per `run()` (module docstring). `url`, `token`, `max_turns`: the entry's settings."""

    def __init__(
        self,
        *args: Any,
        url: str | None = None,
        token: str | None = None,
        max_turns: int | None = None,
        tools: Any = None,  # verl's tools (ToolListWrap): unused, the session brings its own
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        multi_turn = self.rollout_config.multi_turn
        self.max_turns = int(max_turns or multi_turn.max_assistant_turns or 0)
        self.max_parallel_calls = int(multi_turn.max_parallel_calls or 1)
        self.max_tool_response_length = int(multi_turn.max_tool_response_length)
        self.response_length = int(self.rollout_config.response_length)
        self.tool_parser = ToolParser.get_tool_parser(multi_turn.format, self.tokenizer)
        self.sessions = _client(url, token)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        task, seed = _task_of(kwargs)
        if self.tool_parser.stop_token_ids:
            stops = set(sampling_params.get("stop_token_ids") or []) | set(self.tool_parser.stop_token_ids)
            sampling_params = {**sampling_params, "stop_token_ids": sorted(stops)}
        episode: _Episode | None = None
        session_id: str | None = None
        reward, status, why = 0.0, Status.infra_error.value, ""
        try:
            try:
                (opening,) = await self._blocking(self.sessions.open_group, task, 1, seed)
            except ServiceError as exc:
                if exc.status_code is not None and 400 <= exc.status_code < 500 and exc.status_code != 429:
                    raise ValueError(f"groupscore cannot open {task!r}: {exc} ({exc.detail})") from exc
                raise _Infra(f"no session opened: {exc}") from exc
            session_id = opening.session_id
            _OPENED.add(self.sessions.client)
            episode = _Episode(messages=list(opening.messages), tools=list(opening.tools))
            await self._play(episode, session_id, sampling_params)
            try:
                verdict = await self._blocking(self.sessions.score, session_id, episode.final_message)
            except ServiceError as exc:
                raise _Infra(f"no verdict: {exc}") from exc
            reward, status, why = verdict.reward, verdict.status.value, verdict.reason
        except _Infra as exc:
            why = str(exc)
        finally:
            if session_id is not None:
                await self._close(session_id)
        infra = status == Status.infra_error.value
        masked, episodes = _COUNTS.add(infra)
        if infra:
            logger.warning(
                "groupscore: %s session %s masked as infra_error (%d of %d episodes in this worker): %s",
                task, session_id, masked, episodes, why,
            )  # fmt: skip
        if episode is None:  # no session: the dataset's prompt stands in, so that the sample has a shape
            episode = _Episode(messages=list(kwargs.get("raw_prompt") or []), tools=[])
            episode.tokens = await self.ct_build_initial_tokens(episode.messages)
            episode.prompt_length = len(episode.tokens)
        logprobs_asked = bool(sampling_params.get("logprobs"))
        return self._output(episode, reward, infra, task, session_id, status, logprobs_asked)

    # -- the episode -------------------------------------------------------------------------------------------------

    async def _play(self, episode: _Episode, session_id: str, sampling_params: dict[str, Any]) -> None:
        episode.tokens = await self.ct_build_initial_tokens(episode.messages, tools=episode.tools or None)
        episode.prompt_length = len(episode.tokens)
        request_id = uuid4().hex  # one per episode: verl routes its turns to the same server (prefix cache)
        while not self.max_turns or episode.assistant_turns < self.max_turns:
            content, calls = await self._generate(episode, request_id, sampling_params)
            if len(episode.response_mask) >= self.response_length:
                episode.final_message = content if not calls else None
                return
            if calls:
                done = await self._call_tools(episode, session_id, calls)
            else:
                episode.final_message = content
                done = await self._next_turn(episode, session_id, content)
            if done or len(episode.response_mask) >= self.response_length:
                return

    async def _generate(
        self, episode: _Episode, request_id: str, sampling_params: dict[str, Any]
    ) -> tuple[str, list[Any]]:
        started = time.perf_counter()
        output = await self.server_manager.generate(
            request_id=request_id, prompt_ids=episode.tokens, sampling_params=sampling_params
        )
        _add_time(episode.metrics, "generate_sequences", started)
        # Log-probs are kept from the first turn the server gives them for (verl's rollout.calculate_log_probs).
        track = bool(episode.logprobs or output.log_probs)
        merged, episode.response_mask, logprobs = await self.ct_merge_assistant_token(
            episode.tokens,
            output.token_ids,
            episode.response_mask,
            (episode.logprobs or [0.0] * len(episode.response_mask)) if track else None,
            assistant_logprobs=output.log_probs or None,
        )
        episode.tokens = merged.token_ids
        if track:
            episode.logprobs = logprobs
        episode.assistant_turns += 1
        content, calls = await self.tool_parser.extract_tool_calls(output.token_ids, _schemas(episode.tools))
        calls = calls[: self.max_parallel_calls]
        message: Message = {"role": "assistant", "content": content or ""}
        if calls:
            message["tool_calls"] = [
                {"type": "function", "function": {"name": c.name, "arguments": _arguments(c.arguments)}} for c in calls
            ]
        episode.messages.append(message)
        return content or "", calls

    async def _call_tools(self, episode: _Episode, session_id: str, calls: list[Any]) -> bool:
        """Step each call in turn (one session's steps are serialised anyway); the episode is done when a step says
        so. Every output goes back to the model as a tool message, masked."""
        started = time.perf_counter()
        replies: list[Message] = []
        done = False
        for call in calls:
            text, done = await self._step(session_id, call.name, call.arguments)
            episode.tool_calls += 1
            reply: Message = {"role": "tool", "name": call.name, "content": self._truncated(text)}
            if call.tool_call_id is not None:
                reply["tool_call_id"] = call.tool_call_id
            replies.append(reply)
            if done:
                break
        _add_time(episode.metrics, "tool_calls", started)
        await self._append(episode, replies)
        return done

    async def _step(self, session_id: str, name: str, raw_arguments: str) -> tuple[str, bool]:
        """One tool call's output and whether the episode is over; a call the model got wrong is told so."""
        try:
            arguments = json.loads(raw_arguments)
            call = ToolCall(name=name, arguments=arguments)
        except (json.JSONDecodeError, TypeError, ValidationError) as exc:
            return f"error: the call to {name!r} is not a tool name with a JSON object of arguments: {exc}", False
        try:
            observation = await self._blocking(self.sessions.step, session_id, call.name, call.arguments)
        except ServiceError as exc:
            if exc.status_code in REFUSED:
                return f"error: the call was refused: {exc.detail or exc}", False
            if exc.status_code in (401, 403):
                raise  # the service's token: every sample would fail the same way
            raise _Infra(f"step failed: {exc}") from exc
        return observation.content, observation.done

    async def _next_turn(self, episode: _Episode, session_id: str, message: str) -> bool:
        """The model ended its turn with `message`: the next user turn joins the chat, or the episode is done."""
        try:
            turn = await self._blocking(self.sessions.end_turn, session_id, message)
        except ServiceError as exc:
            raise _Infra(f"the next turn failed: {exc}") from exc
        if turn.done or not turn.messages:
            return True
        if turn.tools is not None:
            episode.tools = list(turn.tools)
        await self._append(episode, list(turn.messages))
        episode.user_turns += 1
        return False

    async def _append(self, episode: _Episode, messages: list[Message]) -> None:
        """Messages not the model's (tool outputs, user turns) into the token stream, with response mask 0."""
        previous = list(episode.messages)
        episode.messages.extend(messages)
        merged, episode.response_mask, logprobs = await self.ct_merge_context_msg(
            previous,
            episode.messages,
            episode.tokens,
            episode.response_mask,
            episode.logprobs or None,
            tools=episode.tools or None,
        )
        episode.tokens = merged.token_ids
        if episode.logprobs:
            episode.logprobs = logprobs

    # -- plumbing ----------------------------------------------------------------------------------------------------

    async def _blocking(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(_POOL, fn, *args)

    async def _close(self, session_id: str) -> None:
        """Close the session, also when `run()` is cancelled (the close goes on in its thread); a failure to close is
        logged (the server reaps what it holds)."""
        try:
            await asyncio.shield(self._blocking(self.sessions.close, session_id))
        except ServiceError as exc:
            logger.warning("groupscore: closing session %s failed (the service reaps it): %s", session_id, exc)

    def _truncated(self, text: str) -> str:
        limit = self.max_tool_response_length
        if len(text) <= limit:
            return text
        half = limit // 2
        return text[:half] + "...(truncated)..." + text[-half:]

    def _output(
        self,
        episode: _Episode,
        reward: float,
        infra: bool,
        task: str,
        session_id: str | None,
        status: str,
        logprobs_asked: bool,
    ) -> AgentLoopOutput:
        response_ids = episode.tokens[episode.prompt_length :][: self.response_length]
        mask = episode.response_mask[: self.response_length]
        if not response_ids:  # verl puts the reward on the last response token: there must be one
            response_ids, mask = [self.tokenizer.eos_token_id or 0], [0]
        logprobs = None
        if logprobs_asked:  # verl stacks the batch's log-probs: every sample has them, zeros where none came
            logprobs = (episode.logprobs or [])[: len(response_ids)]
            logprobs += [0.0] * (len(response_ids) - len(logprobs))
        if infra:
            mask = [0] * len(response_ids)
        extra = dict(zip(EXTRA_KEYS, (int(infra), episode.tool_calls, episode.assistant_turns), strict=True))
        return AgentLoopOutput(
            prompt_ids=episode.tokens[: episode.prompt_length],
            response_ids=response_ids,
            response_mask=mask,
            response_logprobs=logprobs,
            reward_score=0.0 if infra else reward,
            num_turns=episode.user_turns + episode.assistant_turns + 1,
            metrics=episode.metrics,
            extra_fields={
                "reward_extra_info": extra,
                "groupscore_task": task,
                "groupscore_session": session_id,
                "groupscore_status": status,
            },
        )


def _task_of(sample: dict[str, Any]) -> tuple[str, int]:
    """The row's task (extra_info.task, SOURCE:TASK_ID) and seed (extra_info.seed, default 0)."""
    extra = sample.get("extra_info") or {}
    task = extra.get("task")
    if not isinstance(task, str) or ":" not in task:
        raise ValueError(
            f"a {AGENT_NAME!r} row names its task in extra_info['task'] as SOURCE:TASK_ID "
            f"(e.g. demo:count-errors), got {task!r}"
        )
    return task, int(extra.get("seed") or 0)


def _schemas(tools: list[dict[str, Any]]) -> list[Any] | None:
    """The session's tools as verl's tool parsers take them (some read argument types from them)."""
    try:
        return [OpenAIFunctionToolSchema.model_validate(tool) for tool in tools]
    except ValidationError:
        return None


def _arguments(raw: str) -> Any:
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, TypeError):
        return raw


def _add_time(metrics: dict[str, Any], key: str, started: float) -> None:
    metrics[key] = metrics.get(key, 0.0) + time.perf_counter() - started
