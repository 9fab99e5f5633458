"""Drop-in reward functions for trainers, backed by the scoring service: TRL's GRPOTrainer, and verl's (re-exported
from `groupscore.client.verl`).

TRL (sync or async; TRL awaits async reward functions itself):

    reward = trl_reward_func("http://127.0.0.1:8000", verifier="math")
    GRPOTrainer(..., reward_funcs=[reward])
    # inside a Ray cluster, the Ray Serve deployment through a handle (no HTTP hop; groupscore[ray]):
    reward = trl_reward_func("serve://groupscore", verifier="math")   # or ServeHandleClient("groupscore", shards=4)

    # each component of a composite reward as its own TRL reward function, one request per batch for all of them
    funcs = trl_reward_funcs("http://127.0.0.1:8000", spec)
    GRPOTrainer(..., reward_funcs=funcs, args=GRPOConfig(..., reward_weights=trl_reward_weights(spec)))

verl (`custom_reward_function.path=<this file>`, `name=compute_score`, the service's URL and the rest in
`custom_reward_function.reward_kwargs`): see `groupscore.client.verl`. OpenRLHF: `groupscore.client.openrlhf`
(`--remote_rm_url` pointed at a Python file), or the service's `/get_reward`; SandboxFusion's client speaks to the
service's `/run_code` directly.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Sequence
from typing import Any

from groupscore.client.http import AsyncScoreClient, ScoreClient
from groupscore.client.loops import LoopClients
from groupscore.client.serve_handle import ServeHandleClient, app_of, is_serve_url
from groupscore.schema.columns import KIND_FIELDS, MissingColumn, check_columns
from groupscore.schema.reward import KIND_NAMES, RewardSpec
from groupscore.schema.verdict import Status

__all__ = [
    "DATA_SOURCE_KINDS",
    "MissingColumn",
    "completion_text",
    "compute_score",
    "compute_score_batch",
    "trl_reward_func",
    "trl_reward_funcs",
    "trl_reward_weights",
    "verl_item",
]

INFRA_ERROR = Status.infra_error.value


def completion_text(completion: Any) -> str:
    """A TRL completion as text: a string as is; a chat completion (list of messages): its assistant content."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        completion = [completion]
    parts = []
    for message in completion or []:
        if not isinstance(message, dict) or message.get("role", "assistant") != "assistant":
            continue
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):  # multimodal content: keep the text parts
            parts.extend(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return "".join(parts)


class _ItemBuilder:
    """Turns one TRL batch (completions + dataset columns) into items of one verifier kind."""

    def __init__(
        self, verifier: str, columns: dict[str, str] | None, fixed: dict[str, Any] | None, kind_column: str | None
    ) -> None:
        if verifier not in KIND_NAMES:
            raise ValueError(f"unknown verifier kind {verifier!r}; known: {', '.join(sorted(KIND_NAMES))}")
        self.verifier = verifier
        self.kind_column = kind_column
        self.fixed = dict(fixed or {})
        # Item field -> dataset column: every field of the kind that a column of the same name holds, unless renamed.
        self.item_fields = list(KIND_FIELDS[verifier])
        self.columns = {f: f for f in self.item_fields}
        self.columns.update(columns or {})

    def build(self, completions: Sequence[Any], kwargs: dict[str, Any]) -> tuple[list[dict[str, Any]], list[int]]:
        """Items for the rows this kind applies to, and the row index of each."""
        items, rows = [], []
        kinds = kwargs.get(self.kind_column) if self.kind_column else None
        for row, completion in enumerate(completions):
            if isinstance(kinds, (list, tuple)) and kinds[row] is not None and kinds[row] != self.verifier:
                continue  # another kind's row: this reward does not apply (TRL takes None)
            item: dict[str, Any] = {
                "verifier": self.verifier,
                "id": row,
                "completion": completion_text(completion),
                **self.fixed,
            }
            for field, column in self.columns.items():
                values = kwargs.get(column)
                if isinstance(values, (list, tuple)) and len(values) == len(completions) and values[row] is not None:
                    value = values[row]
                    if field == "answer" and not isinstance(value, str):
                        value = str(value)  # numeric answer columns (GSM8K-style ints)
                    # Datasets often store structured references (tests) as JSON text.
                    if field not in ("answer",) and isinstance(value, str) and value[:1] in "[{":
                        try:
                            value = json.loads(value)
                        except json.JSONDecodeError:
                            pass
                    item[field] = value
            items.append(item)
            rows.append(row)
        return items, rows


def _fold(
    n_rows: int,
    rows: list[int],
    verdicts: list[dict[str, Any]],
    component: str | None,
    log_metric: Callable[[str, float], None] | None,
    name: str,
) -> list[float | None]:
    rewards: list[float | None] = [None] * n_rows
    for row, verdict in zip(rows, verdicts):
        if verdict["status"] == INFRA_ERROR:
            continue  # not judged: None, which TRL masks, never a fake 0 to learn from
        if component is None:
            rewards[row] = float(verdict["reward"])
        else:
            rewards[row] = float((verdict.get("components") or {}).get(component, 0.0))
    if log_metric is not None and verdicts:
        # Per-component means of the rows this reward applies to (TRL averages them over the logging step).
        names = sorted({c for v in verdicts for c in (v.get("components") or {})})
        for c in names:
            log_metric(f"{name}/{c}", sum((v.get("components") or {}).get(c, 0.0) for v in verdicts) / len(verdicts))
        log_metric(f"{name}/error_rate", sum(v["status"] == "error" for v in verdicts) / len(verdicts))
        log_metric(f"{name}/infra_error_rate", sum(v["status"] == INFRA_ERROR for v in verdicts) / len(verdicts))
    return rewards


class _BatchScorer:
    """Builds a TRL batch's items and scores them in one request; the reward functions made together share it.

    TRL calls each reward function in turn (or, async ones, concurrently) with the same batch: the first call sends
    the request, the others find its verdicts here. A batch is the same when its items are equal (same completions,
    same reference fields), so a repeat is always answered by the request that scored exactly it.
    """

    def __init__(
        self,
        service: str | Sequence[str] | ScoreClient | ServeHandleClient,
        builder: _ItemBuilder,
        spec: RewardSpec | None,
        token: str | None,
        deadline_s: float | None,
        label: str,
        asynchronous: bool,
    ) -> None:
        self.builder, self.spec, self.deadline_s, self.label = builder, spec, deadline_s, label
        self.checked = False  # the first batch with rows of this kind checks the columns; later ones do not pay for it
        self.lock = threading.Lock()
        self.last: tuple[list[dict[str, Any]], Any] | None = None  # (items, verdicts or their asyncio task)
        self.requests = 0  # requests sent, for tests and logs
        self.handle_client: ServeHandleClient | None = None  # a Ray Serve handle: one client, sync and async
        if isinstance(service, ServeHandleClient) or (isinstance(service, str) and is_serve_url(service)):
            handle = service if isinstance(service, ServeHandleClient) else ServeHandleClient(app_of(service))
            self.handle_client = handle
            self.client: ScoreClient | ServeHandleClient = self.handle_client
        elif asynchronous:
            urls = service.urls if isinstance(service, ScoreClient) else service
            if isinstance(service, ScoreClient) and token is None:
                token = service.token
            # httpx async clients belong to one event loop each: one per loop, closed when its loop shuts down
            self.clients = LoopClients(lambda: AsyncScoreClient(urls, token=token))
        else:
            self.client = service if isinstance(service, ScoreClient) else ScoreClient(service, token=token)

    def build(self, completions: Sequence[Any], kwargs: dict[str, Any]) -> tuple[list[dict[str, Any]], list[int]]:
        items, rows = self.builder.build(completions, kwargs)
        if items and not self.checked:
            seen = [k for k, v in kwargs.items() if isinstance(v, (list, tuple))]
            check_columns(self.label, items, seen, "trl_reward_func(..., columns={mapping})")
            self.checked = True
        return items, rows

    def score(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        with self.lock:  # TRL's sync reward functions run one after another; the lock covers threaded callers too
            if self.last is not None and self.last[0] == items:
                return self.last[1]
            self.requests += 1
            verdicts = self.client.score_raw(items, self.spec, self.deadline_s) if items else []
            self.last = (items, verdicts)
            return verdicts

    async def score_async(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        with self.lock:
            previous = self.last[1] if self.last is not None and self.last[0] == items else None
            if (
                isinstance(previous, asyncio.Task)
                and previous.get_loop() is asyncio.get_running_loop()
                and not (previous.done() and (previous.cancelled() or previous.exception() is not None))
            ):
                task: asyncio.Future[list[dict[str, Any]]] = previous
            else:
                self.requests += 1
                task = asyncio.ensure_future(self._request(items))
                self.last = (items, task)
        # TRL gathers async reward functions: the first starts the request, the others await the same task.
        return await asyncio.shield(task)

    async def _request(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if not items:
            return []
        if self.handle_client is not None:
            return await self.handle_client.ascore_raw(items, self.spec, self.deadline_s)
        return await (await self.clients.get()).score_raw(items, self.spec, self.deadline_s)

    def function(self, component: str | None, name: str, asynchronous: bool) -> Callable[..., Any]:
        """A reward function with GRPOTrainer's signature: the total, or one component's score."""
        if asynchronous:

            async def reward_async(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
                items, rows = self.build(completions, kwargs)
                verdicts = await self.score_async(items)
                return _fold(len(completions), rows, verdicts, component, kwargs.get("log_metric"), name)

            reward_async.__name__ = name
            return reward_async

        def reward_sync(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
            items, rows = self.build(completions, kwargs)
            return _fold(len(completions), rows, self.score(items), component, kwargs.get("log_metric"), name)

        reward_sync.__name__ = name
        return reward_sync


def trl_reward_func(
    service: str | Sequence[str] | ScoreClient | ServeHandleClient,
    *,
    verifier: str = "math",
    columns: dict[str, str] | None = None,
    fixed: dict[str, Any] | None = None,
    reward: RewardSpec | dict | None = None,
    component: str | None = None,
    kind_column: str | None = "verifier",
    name: str | None = None,
    token: str | None = None,
    asynchronous: bool = False,
    deadline_s: float | None = None,
) -> Callable[..., Any]:
    """A reward function with GRPOTrainer's signature: `f(prompts, completions, **dataset_columns) -> list`.

    - Items of kind `verifier` are built from each completion and the dataset columns named like the kind's fields
      (`answer` for math, `tests`/`hidden_tests` for code, ...); `columns` renames ({"answer": "solution"}),
      `fixed` sets constant fields ({"strict": True}).
    - Rows whose `kind_column` names another kind get None (the reward does not apply to them), and so do rows the
      service could not score (`infra_error`: a dead worker, the sandbox, the deadline), which TRL masks.
    - The first batch must have a column for every field the kind needs (`answer` for math): otherwise MissingColumn
      names the field, the columns seen, and the `columns={...}` mapping that fixes it.
    - `reward` makes it a composite; `component` returns that component's score instead of the total (for every
      component as its own TRL reward function, one request per batch for all: `trl_reward_funcs`).
    - With `log_metric` among the kwargs (TRL passes it), logs each component's mean, the error and infra error rates.
    - `asynchronous=True` returns a coroutine function (TRL runs async reward functions concurrently).
    """
    spec = RewardSpec.model_validate(reward) if isinstance(reward, dict) else reward
    if component is not None and (spec is None or component not in {c.name for c in spec.components}):
        raise ValueError(f"component {component!r} is not in the reward spec")
    label = name or (f"groupscore_{verifier}" + (f"_{component}" if component else ""))
    builder = _ItemBuilder(verifier, columns, fixed, kind_column)
    scorer = _BatchScorer(service, builder, spec, token, deadline_s, label, asynchronous)
    return scorer.function(component, label, asynchronous)


def trl_reward_funcs(
    service: str | Sequence[str] | ScoreClient | ServeHandleClient,
    reward: RewardSpec | dict,
    *,
    verifier: str = "math",
    columns: dict[str, str] | None = None,
    fixed: dict[str, Any] | None = None,
    kind_column: str | None = "verifier",
    prefix: str | None = None,
    token: str | None = None,
    asynchronous: bool = False,
    deadline_s: float | None = None,
) -> list[Callable[..., Any]]:
    """One TRL reward function per component of `reward`, in its order, named `<prefix>_<component>`: TRL logs
    each one's mean and std on its own, and all of them share one request per batch (the first called sends it).

    TRL adds them up as `sum(reward_weights[i] * f_i)`: `GRPOConfig(reward_weights=trl_reward_weights(reward))`
    gives the spec's weighted mean (docs/integrations.md, "TRL"). Arguments as for trl_reward_func.
    """
    spec = RewardSpec.model_validate(reward) if isinstance(reward, dict) else reward
    builder = _ItemBuilder(verifier, columns, fixed, kind_column)
    label = prefix or f"groupscore_{verifier}"
    scorer = _BatchScorer(service, builder, spec, token, deadline_s, label, asynchronous)
    return [scorer.function(c.name, f"{label}_{c.name}", asynchronous) for c in spec.components]


def trl_reward_weights(reward: RewardSpec | dict) -> list[float]:
    """GRPOConfig's `reward_weights` for `trl_reward_funcs(service, reward)`: TRL's weighted sum of the components
    then equals the spec's total (weighted mean: each weight over their sum; clipped_sum: the weights, unclipped).

    A gate has no TRL equivalent (TRL only adds): a spec with one is refused, with the one-function alternative."""
    spec = RewardSpec.model_validate(reward) if isinstance(reward, dict) else reward
    gated = [c.name for c in spec.components if c.gate]
    if gated:
        raise ValueError(
            f"component {gated[0]!r} is a gate, which TRL's weighted sum cannot express; give TRL the total as one "
            "reward function instead: trl_reward_func(url, reward=spec)"
        )
    weights = [c.weight for c in spec.components]
    if spec.normalize == "clipped_sum":
        return weights
    return [w / sum(weights) for w in weights]


# -- verl: client/verl.py (re-exported here, so `custom_reward_function.path` may name either file) ----------------

from groupscore.client.verl import (  # noqa: E402
    DATA_SOURCE_KINDS,
    compute_score,
    compute_score_batch,
    verl_item,
)
