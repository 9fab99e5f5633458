"""Multi-turn episodes: the policy against environment sessions, turn by turn, for GRPO's rollouts and evaluation.

One call runs a batch of episodes (a GRPO step's groups: G sessions of each task). Sessions open at once on a thread
pool; each turn, the model generates for every episode still going in one batch; the tool calls it wrote (read in
its template's format, toolcalls.py) run on the pool, so the calls of different episodes never wait on one another;
the results go back as tool messages rendered by the template. An episode ends when the model answers (a turn with
no call, and no user turn left), after `env.max_turns` turns, when its `env.max_tokens` are spent, or when the
session says it is over. Every session is scored (its verdict is the reward; `infra_error` masked) and closed, on
errors and interrupts too.

Sessions go through `SessionsAPI`: the environments' `Sessions` in this process (`LocalSessions`), or the service's
/v1/sessions through a client (`ServiceSessions`: a group's sessions open in one request).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from itertools import accumulate, groupby
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from groupscore.environments import Sessions
from groupscore.schema.sessions import Observation, Opening, ToolCall, Turn
from groupscore.schema.verdict import Status, Verdict
from groupscore.train.env_config import EnvConfig
from groupscore.train.toolcalls import ParsedTurn, assistant_message, parse_turn, suffix_after_turn

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from groupscore.environments import Task as EnvTask

T = TypeVar("T")


class SessionsAPI(Protocol):
    """The calls a batch of episodes makes of its sessions: a group's G opened at once, then each one's own."""

    def open_group(self, task: EnvTask, count: int, seed: int = 0) -> list[Opening]: ...

    def step(self, session_id: str, call: ToolCall) -> Observation: ...

    def next_turn(self, session_id: str, message: str | None = None) -> Turn: ...

    def score(self, session_id: str, final_message: str | None = None) -> Verdict: ...

    def close(self, session_id: str) -> bool: ...


@dataclass
class Episode:
    """One session's trajectory: the tokens trained on (the model's, mask 1; the tools', mask 0), the messages after
    the prompt, and the verdict."""

    task_id: str
    prompt: str
    prompt_ids: list[int]
    session_id: str | None = None
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    turns: int = 0
    calls: int = 0
    final_message: str | None = None
    ended: str = ""
    verdict: Verdict | None = None

    @property
    def reward(self) -> float | None:
        """The verdict's reward; None when nothing judged the episode (infra_error: masked)."""
        if self.verdict is None or self.verdict.status is Status.infra_error:
            return None
        return self.verdict.reward

    def log(self) -> dict[str, Any]:
        verdict = self.verdict
        return {
            "session_id": self.session_id,
            "messages": self.messages,
            "turns": self.turns,
            "tool_calls": self.calls,
            "ended": self.ended,
            "reward": None if verdict is None else verdict.reward,
            "status": None if verdict is None else verdict.status.value,
            "reason": None if verdict is None else verdict.reason,
            "components": None if verdict is None else verdict.components,
        }


@dataclass
class Timing:
    """Where a batch's wall time went: generating, and waiting on sessions (open, tool calls, scoring, closing)."""

    generate_s: float = 0.0
    sessions_s: float = 0.0


class EpisodeRunner:
    """Runs batches of episodes of the tasks it was given, against `sessions`."""

    def __init__(
        self,
        sessions: SessionsAPI,
        tasks: Sequence[EnvTask],
        tokenizer: PreTrainedTokenizerBase,
        fmt: str,
        cfg: EnvConfig,
        prompts: dict[str, str],
    ) -> None:
        self.sessions, self.tokenizer, self.fmt, self.cfg = sessions, tokenizer, fmt, cfg
        self.tasks = {t.id: t for t in tasks}
        self.prompts = prompts  # task id -> the rendered prompt (the same text SFT trained on)
        self.pool = ThreadPoolExecutor(cfg.workers, thread_name_prefix="groupscore-episode")
        self.timing = Timing()
        self.opened = self.closed = 0
        self._suffixes: dict[tuple[str, ...], list[int]] = {}
        self._tool_lists: dict[str, list[dict[str, Any]] | None] = {}
        self._tokenizing = threading.Lock()  # one tokenizer, called from the pool's threads
        self._counting = threading.Lock()

    def close(self) -> None:
        self.pool.shutdown(wait=True)

    # -- one batch -------------------------------------------------------------------------------------------------

    def run(self, model: PreTrainedModel, task_ids: Sequence[str], temperature: float, seed: int = 0) -> list[Episode]:
        """One episode per entry of `task_ids` (a task repeated G times is a group), every session closed after."""
        episodes = [self._episode(task_id) for task_id in task_ids]
        if not episodes:
            return []
        # the sessions open while the first turn is generated: a turn needs its session only once it calls a tool.
        # A group (the same task, one after another, as GRPO's sampler repeats it) opens in one call.
        groups: list[list[Episode]] = [list(g) for _, g in groupby(episodes, key=lambda e: e.task_id)]
        firsts = accumulate([0, *map(len, groups)])
        opening = [self.pool.submit(self._open, group, seed + first) for group, first in zip(groups, firsts)]
        try:
            active = list(episodes)
            for index in range(self.cfg.max_turns):
                turn = list(active)
                self._timed(lambda: self._generate(model, turn, temperature), generating=True)  # noqa: B023
                if index == 0:
                    self._timed(lambda: [future.result() for future in opening])
                    turn = [e for e in turn if e.session_id is not None]
                self._timed(lambda: self._map(self._act, turn))  # noqa: B023
                active = [e for e in turn if not e.ended]
                if not active:
                    break
            for episode in active:
                episode.ended = episode.ended or f"max_turns ({self.cfg.max_turns})"
            self._timed(lambda: self._map(self._score, episodes))
        finally:
            wait(opening)  # a session still opening is closed too
            self._map(self._close, [e for e in episodes if e.session_id is not None])
        return episodes

    def _episode(self, task_id: str) -> Episode:
        prompt = self.prompts[task_id]
        return Episode(task_id, prompt, self.tokenizer(prompt, add_special_tokens=False)["input_ids"])

    def _map(self, fn: Callable[..., T], items: Sequence[Any], *args: Any) -> list[T]:
        futures = [self.pool.submit(fn, item, *args) for item in items]
        return [f.result() for f in futures]

    def _timed(self, fn: Callable[[], Any], generating: bool = False) -> None:
        started = time.perf_counter()
        try:
            fn()
        finally:
            spent = time.perf_counter() - started
            if generating:
                self.timing.generate_s += spent
            else:
                self.timing.sessions_s += spent

    def _open(self, group: list[Episode], seed: int) -> None:
        opened, surplus = open_group(self.sessions, self.tasks[group[0].task_id], group, seed)
        with self._counting:
            self.opened += len(opened) + len(surplus)
        for extra in surplus:
            self._close_session(extra.session_id)

    def _close(self, episode: Episode) -> None:
        if episode.session_id is not None:
            self._close_session(episode.session_id)

    def _close_session(self, session_id: str) -> None:
        if self.sessions.close(session_id):
            with self._counting:
                self.closed += 1

    def _score(self, episode: Episode) -> None:
        score(self.sessions, episode)

    # -- turns -----------------------------------------------------------------------------------------------------

    def _generate(self, model: PreTrainedModel, active: list[Episode], temperature: float) -> None:
        """One model turn for every active episode, batched; each keeps its tokens up to its end-of-turn token."""
        import torch

        tokenizer = self.tokenizer
        budget = max(self.cfg.max_tokens - len(e.completion_ids) for e in active)
        rows = [e.prompt_ids + e.completion_ids for e in active]
        width = max(len(r) for r in rows)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows], device=model.device)
        mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows], device=model.device)
        sampling: dict[str, Any] = {"do_sample": False}
        if temperature > 0:
            sampling = {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0}
        generate: Callable[..., torch.Tensor] = model.generate  # type: ignore[assignment]
        was_training = model.training
        model.eval()
        with torch.no_grad():
            # use_cache: training turns the cache off (gradient checkpointing); generating without it is quadratic
            out = generate(
                input_ids=ids, attention_mask=mask, max_new_tokens=budget, pad_token_id=pad, use_cache=True, **sampling
            )
        model.train(was_training)
        stops = self._stop_ids(model)
        for episode, row in zip(active, out[:, width:].tolist()):
            left = self.cfg.max_tokens - len(episode.completion_ids)
            end = next((i + 1 for i, t in enumerate(row) if t in stops), None)
            new = row[: end if end is not None else len(row)][:left]
            episode.completion_ids += new
            episode.env_mask += [1] * len(new)
            episode.turns += 1
            if end is None or end > left:
                episode.ended = f"max_tokens ({self.cfg.max_tokens})"
            text = tokenizer.decode([t for t in new if t not in stops], skip_special_tokens=True)
            episode.messages.append({"role": "assistant", "raw": text})

    def _stop_ids(self, model: PreTrainedModel) -> set[int]:
        configured = getattr(model.generation_config, "eos_token_id", None)
        stops = set(configured if isinstance(configured, list) else [configured] if configured is not None else [])
        if self.tokenizer.eos_token_id is not None:
            stops.add(self.tokenizer.eos_token_id)
        return stops

    def _act(self, episode: Episode) -> None:
        """The turn the model just wrote: its calls run in the session, or its answer ends the episode."""
        raw = episode.messages[-1].pop("raw")
        turn = parse_turn(raw, self.fmt, self.tokenizer, self._tools(episode.task_id))
        episode.messages[-1] = assistant_message(turn)
        if turn.problem is not None or not turn.calls:
            self._answer(episode, turn, raw)
            return
        if episode.ended:  # cut off by the token budget: the calls are not run
            return
        results, done = [], False
        for call in turn.calls:
            try:
                parsed: ToolCall | str = ToolCall.model_validate(call)
            except ValueError as exc:  # pydantic's: a name or arguments the schema refuses, the model's error
                parsed = str(exc)
            observation = run_call(self.sessions, episode, parsed)
            if observation is None:  # the server lost the call: infra_error
                return
            results.append(observation.content)
            episode.messages.append({"role": "tool", "name": call["name"], "content": observation.content})
            done = done or observation.done
        if done:
            episode.ended = "the session ended the episode"
            return
        self._append(episode, self._suffix(tuple(results)), "the tool results overran max_tokens")

    def _tools(self, task_id: str) -> list[dict[str, Any]] | None:
        """The task's tools as the host reads them (they type the arguments the library parser reads as text)."""
        with self._counting:
            if task_id not in self._tool_lists:
                from groupscore.train.env_tasks import host_tools

                self._tool_lists[task_id] = host_tools(self.tasks[task_id])
            return self._tool_lists[task_id]

    def _answer(self, episode: Episode, turn: ParsedTurn, raw: str) -> None:
        episode.final_message = turn.content if turn.problem is None else raw
        if turn.problem is not None:  # a call cut short by the token budget keeps that reason
            episode.ended = episode.ended or f"unreadable tool call: {turn.problem}"
            return
        if episode.ended:
            return
        assert episode.session_id is not None
        following = self.sessions.next_turn(episode.session_id, episode.final_message)
        if following.done:
            episode.ended = "answered"
            return
        episode.messages += following.messages
        with self._tokenizing:
            text = suffix_after_turn(self.tokenizer, self.fmt, [], user=following.messages)
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        self._append(episode, ids, "a user turn overran")

    def _append(self, episode: Episode, ids: list[int], overran: str) -> None:
        if len(episode.completion_ids) + len(ids) >= self.cfg.max_tokens:
            episode.ended = f"max_tokens ({self.cfg.max_tokens}): {overran}"
            return
        episode.completion_ids += ids
        episode.env_mask += [0] * len(ids)

    def _suffix(self, results: tuple[str, ...]) -> list[int]:
        with self._tokenizing:
            cached = self._suffixes.get(results)
            if cached is None:
                text = suffix_after_turn(self.tokenizer, self.fmt, list(results))
                cached = self.tokenizer(text, add_special_tokens=False)["input_ids"]
                if len(self._suffixes) < 4096:
                    self._suffixes[results] = cached
        return list(cached)


class ServiceSessions:
    """`SessionsAPI` over the scoring service's /v1/sessions (client/sessions.py): tasks go by address."""

    def __init__(self, urls: Sequence[str], token: str | None = None) -> None:
        from groupscore.client.sessions import SessionsClient

        self.client = SessionsClient(urls, token=token)

    def open_group(self, task: EnvTask, count: int, seed: int = 0) -> list[Opening]:
        return self.client.open_group(task_address(task), count=count, seed=seed)

    def step(self, session_id: str, call: ToolCall) -> Observation:
        return self.client.step(session_id, call.name, call.arguments)

    def next_turn(self, session_id: str, message: str | None = None) -> Turn:
        return self.client.end_turn(session_id, message)

    def score(self, session_id: str, final_message: str | None = None) -> Verdict:
        return self.client.score(session_id, final_message)

    def close(self, session_id: str) -> bool:
        return self.client.close(session_id)

    def close_all(self) -> None:
        self.client.close_all()


def open_group(
    sessions: SessionsAPI, task: EnvTask, group: list[Episode], seed: int
) -> tuple[list[Opening], list[Opening]]:
    """Open a group's sessions in one call and give each episode its own: (the group's openings, in its order; what
    the service opened beyond it, for the caller to close). Episodes left without one (the server failed, or opened
    fewer) are infra_error; a refusal of the request itself (the run's mistake) is raised, never masked."""
    try:
        openings = sessions.open_group(task, len(group), seed=seed)
    except Exception as exc:
        if not server_failure(exc):
            raise
        openings, reason = [], f"the session could not open: {exc}"
    else:
        reason = "the service opened fewer sessions than asked"
    for episode, opening in zip(group, openings, strict=False):
        episode.session_id = opening.session_id
    for episode in group[len(openings) :]:
        lose(episode, reason)
    return openings[: len(group)], openings[len(group) :]


def score(sessions: SessionsAPI, episode: Episode) -> None:
    """The episode's verdict from its session (nothing to do without one, or with a verdict already); a session lost
    under the server judged nothing: infra_error."""
    if episode.session_id is None or episode.verdict is not None:
        return
    try:
        episode.verdict = sessions.score(episode.session_id, final_message=episode.final_message)
    except Exception as exc:  # noqa: BLE001 - a session lost under the server: nothing judged it
        episode.verdict = Verdict.infra_error(episode.task_id, f"the session could not be scored: {exc}", "sandbox")


def run_call(sessions: SessionsAPI, episode: Episode, call: ToolCall | str) -> Observation | None:
    """One tool call the model wrote, run in its session: the observation. A call it wrote badly (`call` is then
    why), or one the service refuses for its own content (413: too large; 422 naming `call`), is the model's error,
    shown to it. Any other failure (a lost connection, a 5xx, a session the server no longer holds, a resend it could
    not answer) judged nothing: the episode is infra_error, and None comes back."""
    assert episode.session_id is not None
    episode.calls += 1
    if isinstance(call, str):
        return Observation(content=f"invalid tool call: {call}", is_error=True)
    try:
        return sessions.step(episode.session_id, call)
    except Exception as exc:  # noqa: BLE001 - whatever else failed is ours, never the model's 0
        if _refused_call(exc):
            return Observation(content=f"invalid tool call: {exc}", is_error=True)
        lose(episode, f"a tool call was lost: {exc}")
        return None


def _refused_call(exc: Exception) -> bool:
    """Whether the service refused the call for what the model wrote in it (not for the session or the request)."""
    from groupscore.client.http import ServiceError

    if not isinstance(exc, ServiceError):
        return False
    if exc.status_code == 413:
        return True
    errors = exc.detail if isinstance(exc.detail, list) else []
    return exc.status_code == 422 and any(
        isinstance(e, dict) and list(e.get("loc", []))[1:2] == ["call"] for e in errors
    )


def lose(episode: Episode, reason: str, cause: str = "sandbox") -> None:
    """The episode judged nothing (its session, the service or the policy's endpoint failed): infra_error."""
    episode.verdict = Verdict.infra_error(episode.task_id, reason, cause)
    episode.ended = "infra"


def server_failure(exc: Exception) -> bool:
    """Whether opening sessions failed for the server's reasons (full, gone, broken): the group is then masked. A
    refusal of the request itself (4xx but 429) is the run's mistake and stops it."""
    from groupscore.client.http import ServiceError
    from groupscore.environments.sessions import SessionLimit

    if isinstance(exc, ServiceError):
        return exc.status_code is None or exc.status_code >= 500 or exc.status_code == 429
    return isinstance(exc, SessionLimit | OSError)  # OSError: TimeoutError and the connection errors


# `SessionsAPI` in this process: the environments' own `Sessions` (open_group whole or none, jails side by side).
LocalSessions = Sessions


def task_address(task: EnvTask) -> str:
    """SOURCE:TASK_ID as a service resolves it (the task's own address: a bundled source by its name)."""
    return task.address
