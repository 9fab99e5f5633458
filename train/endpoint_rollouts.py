"""A model behind an OpenAI-compatible chat endpoint (vLLM, SGLang, `transformers serve`, a hosted API) as the policy
of `groupscore eval --endpoint URL`: any model, run over a taskset, scored as the trainer's own evaluation scores.

Single-turn tasks: k chat completions of each task's prompt (its messages, or its text as the user's turn after the
taskset's system prompt), each task's scored by the service as one group.

Environment tasks: whole episodes in the run's sessions. The session's opening (its messages and tools, OpenAI's
function format) goes to the endpoint; every tool call of a reply runs in the session, in order, and goes back as a
`tool` message with its call id; a reply without calls ends the turn (its text is the model's message: the next user
turn, or the episode's end). `env.max_turns` bounds the replies and `env.max_tokens` the tokens the endpoint reports
having generated. Every session is scored and closed, however the episode ended.

Whose fault an ending is: an endpoint that cannot answer (no connection, 5xx, 408, 409, 425 and 429 after retries)
judged nothing, so the episode is infra_error (masked, counted apart: exit 1), as is a refusal of anything but the
conversation (a 4xx before the model's first reply: its settings, tools it cannot take). A call the model wrote badly
(arguments that are not a JSON object, a name or value the sessions refuse) is the model's: an error observation it
reads, as with a local model. A 400 after the model has replied (past the context, say) ends the episode, which is
scored. 401, 403 and 404 are the run's own mistake (a key, a model name, a URL): the eval stops with one line.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import groupby
from typing import TYPE_CHECKING, Any

from groupscore.schema.sessions import ToolCall
from groupscore.train.batch import ScoredBatch
from groupscore.train.chat_endpoint import ChatEndpoint, EndpointError, EndpointRefused
from groupscore.train.episodes import Episode, SessionsAPI, lose, open_group, run_call, score

if TYPE_CHECKING:
    from groupscore.environments import Task as EnvTask
    from groupscore.train.config import TrainConfig
    from groupscore.train.env_config import EnvConfig
    from groupscore.train.scoring import ServiceScorer
    from groupscore.train.task import TaskRow


def stops_the_run(exc: EndpointRefused) -> bool:
    """A refusal that no sample will get past: the key (401, 403), or the model or URL (404)."""
    return exc.status in (401, 403, 404)


# -- single-turn tasks ---------------------------------------------------------------------------------------------


def prompt_messages(task: TaskRow, system_prompt: str | None) -> list[dict[str, Any]]:
    """A single-turn task as the endpoint's messages: its own conversation, or its text as the user's turn; the
    system prompt first unless the conversation has its own."""
    turns = [{"role": m.role, "content": m.content} for m in task.messages or ()]
    turns = turns or [{"role": "user", "content": task.prompt}]
    if system_prompt is not None and turns[0]["role"] != "system":  # as the trainer renders it (prompts.py)
        turns.insert(0, {"role": "system", "content": system_prompt})
    return turns


def sample_replies(
    endpoint: ChatEndpoint,
    tasks: Sequence[TaskRow],
    system_prompt: str | None,
    *,
    n: int,
    temperature: float,
    max_tokens: int,
    seed: int,
    workers: int,
) -> list[list[str | None]]:
    """n replies to each task's prompt, in task order; None where the endpoint did not answer (nothing to judge)."""

    def one(index: int) -> str | None:
        task = tasks[index // n]
        try:
            message, _ = endpoint.chat(
                prompt_messages(task, system_prompt), temperature=temperature, max_tokens=max_tokens, seed=seed + index
            )
        except EndpointRefused as exc:
            if stops_the_run(exc):
                raise
            return None
        except EndpointError:
            return None
        content = message.get("content")
        return content if isinstance(content, str) else ""

    with ThreadPoolExecutor(max(1, min(workers, len(tasks) * n))) as pool:
        flat = list(pool.map(one, range(len(tasks) * n)))
    return [flat[i : i + n] for i in range(0, len(flat), n)]


# -- environment tasks -----------------------------------------------------------------------------------------------


@dataclass
class ChatEpisodes:
    """Whole episodes of environment tasks with the endpoint as the policy, against `sessions`."""

    endpoint: ChatEndpoint
    sessions: SessionsAPI
    tasks: dict[str, EnvTask]
    cfg: EnvConfig
    sessions_s: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def run(self, task_ids: Sequence[str], temperature: float, seed: int = 0) -> list[Episode]:
        """One episode per entry (a task repeated G times, one after another, is a group opened in one call); every
        session scored and closed."""
        episodes = [Episode(task_id, "", []) for task_id in task_ids]
        groups = [list(g) for _, g in groupby(episodes, key=lambda e: e.task_id)]
        with ThreadPoolExecutor(self.cfg.workers, thread_name_prefix="groupscore-endpoint") as pool:
            try:
                starts, first = [], 0
                for group in groups:
                    starts.append(pool.submit(self._open, group, seed + first))
                    first += len(group)
                openings = [opening for future in starts for opening in future.result()]
                plays = [
                    pool.submit(self._play, episode, opening, temperature, seed + index)
                    for index, (episode, opening) in enumerate(zip(episodes, openings))
                ]
                for play in plays:
                    play.result()
            finally:
                closing = [pool.submit(self.sessions.close, e.session_id) for e in episodes if e.session_id]
                for close in closing:
                    close.exception()
        return episodes

    def _open(self, group: list[Episode], seed: int) -> list[Any]:
        """The group's openings, one per episode (None where none opened: that episode is infra_error)."""
        started = time.perf_counter()
        try:
            opened, surplus = open_group(self.sessions, self.tasks[group[0].task_id], group, seed)
        finally:
            self._spent(started)
        for extra in surplus:
            self.sessions.close(extra.session_id)
        return [*opened, *[None] * (len(group) - len(opened))]

    def _play(self, episode: Episode, opening: Any, temperature: float, seed: int) -> None:
        if opening is None:
            return
        conversation = [dict(m) for m in opening.messages]
        episode.prompt = "\n\n".join(str(m.get("content") or "") for m in conversation)
        tools = list(opening.tools)
        tokens = 0
        try:
            while not episode.ended:
                if episode.turns >= self.cfg.max_turns:
                    episode.ended = f"max_turns ({self.cfg.max_turns})"
                    break
                try:
                    reply, used = self.endpoint.chat(
                        conversation,
                        tools=tools,
                        temperature=temperature,
                        max_tokens=self.cfg.max_tokens - tokens,
                        seed=seed,
                    )
                except EndpointRefused as exc:
                    if stops_the_run(exc):
                        raise
                    if exc.status != 400 or not episode.turns:  # its settings, not what the model wrote: nothing judged
                        lose(episode, f"the endpoint refused the request: {exc}", "endpoint")
                        break
                    episode.ended = f"the endpoint refused the conversation: {exc}"  # past its context, say
                    break
                tokens += used
                episode.turns += 1
                message = _assistant(reply, episode.turns)
                conversation.append(message)
                episode.messages.append(message)
                calls = message.get("tool_calls") or []
                if not calls:
                    episode.final_message = message.get("content") or ""
                    self._end_turn(episode, conversation, tools)
                elif self._run_calls(episode, calls, conversation):
                    episode.ended = episode.ended or "the session ended the episode"
                if tokens >= self.cfg.max_tokens and not episode.ended:
                    episode.ended = f"max_tokens ({self.cfg.max_tokens})"
        except EndpointRefused:
            raise  # a key, a model or a URL it refuses (stops_the_run): the run's own mistake
        except EndpointError as exc:  # nothing judged what the model would have done
            lose(episode, f"the endpoint failed: {exc}", "endpoint")
        self._score(episode)

    def _run_calls(self, episode: Episode, calls: list[dict[str, Any]], conversation: list[dict[str, Any]]) -> bool:
        """The reply's calls, in order; whether the session ended the episode (or lost it: then infra_error)."""
        assert episode.session_id is not None
        for call in calls:
            raw = call.get("function")
            function: dict[str, Any] = raw if isinstance(raw, dict) else {}
            name = function["name"] if isinstance(function.get("name"), str) else ""
            started = time.perf_counter()
            try:
                observation = run_call(self.sessions, episode, _tool_call(name, function.get("arguments")))
            finally:
                self._spent(started)
            if observation is None:  # the server lost the session: infra_error, set by run_call
                return True
            result = {"role": "tool", "tool_call_id": call["id"], "content": observation.content}
            conversation.append(result)
            episode.messages.append(result)
            if observation.done:
                return True
        return False

    def _end_turn(self, episode: Episode, conversation: list[dict[str, Any]], tools: list[dict[str, Any]]) -> None:
        assert episode.session_id is not None
        started = time.perf_counter()
        try:
            following = self.sessions.next_turn(episode.session_id, episode.final_message)
        except Exception as exc:  # noqa: BLE001 - a session lost or reaped under the server: nothing judged
            lose(episode, f"the turn's end was lost: {exc}")
            return
        finally:
            self._spent(started)
        if following.done:
            episode.ended = "answered"
            return
        users = [dict(m) for m in following.messages]
        conversation += users
        episode.messages += users
        if following.tools is not None:
            tools[:] = following.tools

    def _score(self, episode: Episode) -> None:
        started = time.perf_counter()
        try:
            score(self.sessions, episode)
        finally:
            self._spent(started)

    def _spent(self, started: float) -> None:
        with self._lock:
            self.sessions_s += time.perf_counter() - started


def _assistant(reply: dict[str, Any], turn: int) -> dict[str, Any]:
    """The reply as the conversation keeps it and sends it back: its text, and its calls in OpenAI's form (an id, the
    function's name, the arguments as a JSON string), whatever shape the server gave them in."""
    content = reply.get("content")
    message: dict[str, Any] = {"role": "assistant", "content": content if isinstance(content, str) else ""}
    given = reply.get("tool_calls")
    calls = []
    for index, call in enumerate(given if isinstance(given, list) else []):
        raw = call.get("function") if isinstance(call, dict) else None
        function: dict[str, Any] = raw if isinstance(raw, dict) else {}
        arguments = function.get("arguments")
        if not isinstance(arguments, str):  # an object: sent back as the string OpenAI's wire has
            arguments = json.dumps(arguments if arguments is not None else {})
        name = function.get("name")
        call_id = call.get("id") if isinstance(call, dict) else None
        calls.append(
            {
                "id": call_id if isinstance(call_id, str) and call_id else f"call-{turn}-{index}",
                "type": "function",
                "function": {"name": name if isinstance(name, str) else "", "arguments": arguments},
            }
        )
    if calls:
        message["tool_calls"] = calls
    return message


def _tool_call(name: str, arguments: Any) -> ToolCall | str:
    """The call as the sessions take it, or why it is not one (the model's error, shown to it)."""
    try:
        parsed = json.loads(arguments) if isinstance(arguments, str) and arguments.strip() else {}
    except ValueError as exc:
        return f"the arguments are not JSON: {exc}"
    if not isinstance(parsed, dict):
        return "the arguments are not a JSON object"
    try:
        return ToolCall(name=name, arguments=parsed)
    except ValueError as exc:  # pydantic's ValidationError: a name or arguments the schema refuses
        return " ".join(str(exc).split())[:500]


# -- a taskset's scored batch ----------------------------------------------------------------------------------------


def endpoint_tasks(config: TrainConfig) -> tuple[list[TaskRow], list[TaskRow]]:
    """The taskset's (train, eval) tasks as the endpoint takes them: no local model, so no prompt is templated."""
    from groupscore.train.data import check_local_sources
    from groupscore.train.taskset import load_taskset

    check_local_sources(config.taskset)
    return load_taskset(config.taskset, config.seed)


def sample_batch(
    endpoint: ChatEndpoint,
    config: TrainConfig,
    tasks: Sequence[TaskRow],
    *,
    n: int,
    temperature: float,
    max_tokens: int,
    seed: int,
) -> ScoredBatch:
    """n rollouts of each task with the endpoint as the policy, judged as the trainer's evaluation judges: whole
    episodes by their sessions (env tasks), or each task's replies as one group by the service."""
    from groupscore.train.scoring import open_scorer

    env = [t.env for t in tasks if t.env is not None]
    if env and len(env) != len(tasks):
        raise ValueError("a taskset is all environment tasks or none")
    if not env:
        replies = sample_replies(
            endpoint,
            tasks,
            config.taskset.system_prompt,
            n=n,
            temperature=temperature,
            max_tokens=max_tokens,
            seed=seed,
            workers=config.env.workers,
        )
        with open_scorer(config.service) as scorer:
            return replies_batch(scorer, tasks, replies)
    from groupscore.train.env_tasks import task_dirs
    from groupscore.train.episode_rollouts import episodes_batch
    from groupscore.train.episodes import LocalSessions, ServiceSessions

    local = config.env.sessions == "local"
    with open_scorer(config.service, None if local else task_dirs(list(tasks))) as scorer:
        sessions = LocalSessions() if local else ServiceSessions(scorer.urls, token=config.service.token)
        try:
            runner = ChatEpisodes(endpoint, sessions, {t.id: t.env for t in tasks}, config.env)
            started = time.perf_counter()
            episodes = runner.run([t.id for t in tasks for _ in range(n)], temperature, seed=seed)
            return episodes_batch(episodes, n, wait_s=runner.sessions_s, request_s=time.perf_counter() - started)
        finally:
            sessions.close_all()


def replies_batch(scorer: ServiceScorer, tasks: Sequence[TaskRow], replies: list[list[str | None]]) -> ScoredBatch:
    """Each task's replies scored as one group; a reply the endpoint never gave is infra_error, not an empty 0."""
    from groupscore.train.completions import scored_groups
    from groupscore.train.scoring import wire_group

    n = len(replies[0]) if replies else 1
    scored = scorer.score_groups([wire_group(t.id, t.item, [r or "" for r in rs]) for t, rs in zip(tasks, replies)])
    flat = [r for rs in replies for r in rs]
    batch = scored_groups(
        scored, [t.id for t in tasks for _ in range(n)], [t.prompt for t in tasks for _ in range(n)],
        [r or "" for r in flat],
    )  # fmt: skip
    for index, reply in enumerate(flat):
        if reply is None:
            batch.rewards[index] = None
            batch.statuses[index] = "infra_error"
            for values in batch.components.values():
                values[index] = None
    return batch
