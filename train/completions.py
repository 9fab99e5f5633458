"""Rollouts of one model turn per prompt, scored by the scoring service (the `Rollouts` of a plain taskset).

TRL generates each batch (its own single-turn generation, vLLM or transformers, called from our `rollout`); we cut the
batch back into its groups (prompts repeated num_generations times, in order) and send them to
`POST /v1/score/groups` as soon as the completions are decoded, so the service scores while TRL computes the
reference log-probs (`overlap`); TRL's reward call then only waits for what is left. The user's own reward functions
(`rewards.functions`) run on the same batch as extra components; with any of them, the reward trained on is the
weighted sum. Evaluation samples with `generate` and scores each prompt's samples as one group.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from groupscore.schema.wire import GroupResult
from groupscore.train.batch import ScoredBatch, check_rows
from groupscore.train.scoring import GroupScorer, WireGroup, component_rewards, unscored, wire_group
from groupscore.train.user_rewards import UserReward, combine

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from groupscore.train.task import TaskRow


@dataclass
class CompletionRollouts:
    scorer: GroupScorer
    num_generations: int
    overlap: bool = True  # start scoring right after generation (see `rollout`)
    extra: list[UserReward] = field(default_factory=list)  # the user's reward functions (rewards.functions)
    service_weight: float = 1.0
    task_columns: dict[str, dict[str, Any]] = field(default_factory=dict)  # per task id: the row's other columns
    _rows: Sequence[Mapping[str, Any]] | None = None  # the generation batch's dataset rows (TRL's inputs)
    _prefetch: tuple[list[str], Future[list[GroupResult]], float] | None = None
    _scored: ScoredBatch | None = None

    def __post_init__(self) -> None:
        self.__name__ = "service"  # TRL names reward functions (metrics, logs) by __name__

    def reward_funcs(self) -> list[Callable[..., Any]]:
        return [self]

    def begin(self, rows: Sequence[Mapping[str, Any]]) -> None:
        self._rows, self._prefetch, self._scored = rows, None, None

    def rollout(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        """TRL's own single-turn generation of the batch (the prompts are rendered text: tokenized as TRL does),
        then scoring started on TRL's reward event loop; the reward call picks it up."""
        rows = check_rows(self._rows, prompts)
        prompt_ids = trainer.processing_class(text=prompts)["input_ids"]
        completion_ids, logprobs = trainer._generate_single_turn(prompt_ids, None, {}, trainer.num_generations)
        completions = trainer.processing_class.batch_decode(completion_ids, skip_special_tokens=True)
        loop = getattr(trainer, "async_loop", None)
        if self.overlap and loop is not None:
            future = asyncio.run_coroutine_threadsafe(self.scorer.ascore_groups(self._groups(rows, completions)), loop)
            self._prefetch = (list(completions), future, time.perf_counter())
        return {"prompt_ids": prompt_ids, "completion_ids": completion_ids, "logprobs": logprobs}

    def scored(self) -> ScoredBatch:
        if self._scored is None:
            raise RuntimeError("no scored batch: TRL did not call the service's reward function for this rollout")
        batch, self._scored = self._scored, None
        return batch

    def _groups(self, rows: Sequence[Mapping[str, Any]], completions: list[str]) -> list[WireGroup]:
        g = self.num_generations
        if len(rows) % g:
            raise ValueError(f"generation batch of {len(rows)} rows is not made of whole groups of {g}")
        groups = []
        for start in range(0, len(rows), g):
            ids = {rows[i]["task_id"] for i in range(start, start + g)}
            if len(ids) != 1:  # TRL's RepeatSampler keeps each prompt's generations together; refuse to guess
                raise ValueError(f"rows {start}..{start + g - 1} mix tasks {sorted(ids)}: groups are not contiguous")
            groups.append(
                wire_group(rows[start]["task_id"], json.loads(rows[start]["item"]), completions[start : start + g])
            )
        return groups

    async def __call__(
        self,
        prompts: list[str],
        completions: list[str],
        task_id: list[str],
        item: list[str],
        log_metric: Callable[[str, float], None] | None = None,
        **_columns: Any,
    ) -> list[float | None]:
        """TRL's reward function: the service's verdicts (and the user's functions) for the batch, kept as the
        batch `scored()` returns; None where nothing judged a completion (TRL and the trainer mask it)."""
        entered = time.perf_counter()
        rows = [{"task_id": t, "item": i} for t, i in zip(task_id, item)]
        if self._prefetch is not None and self._prefetch[0] == list(completions):
            _, future, sent = self._prefetch
            groups = await asyncio.wrap_future(future)
        else:  # no prefetch (overlap off, or called directly): score now
            sent = entered
            groups = await self.scorer.ascore_groups(self._groups(rows, list(completions)))
        self._prefetch = None
        done = time.perf_counter()
        batch = scored_groups(groups, list(task_id), list(prompts), list(completions))
        batch.wait_s, batch.request_s = done - entered, done - sent
        if self.extra:
            extras = await self._user_rewards(prompts, completions, task_id, log_metric, _columns)
            weights = {u.name: u.weight for u in self.extra}
            combined = combine(batch.rewards, extras, weights, self.service_weight)
            # each group's log keeps the service's own rewards beside the weighted sum trained on
            batch.group_extra = [{"service_rewards": g.total.rewards} for g in groups]
            batch.rewards = combined
            batch.components.update(extras)
        self._scored = batch
        if log_metric is not None:
            for name in sorted({c for g in groups for c in g.components}):
                values = [v for g in groups for v, m in zip(component_rewards(g, name), unscored(g)) if not m]
                if values:
                    log_metric(f"service/{name}/mean", sum(values) / len(values))
            log_metric("service/zero_variance_share", sum(g.total.zero_variance for g in groups) / len(groups))
            log_metric("service/infra_error_share", sum(m for g in groups for m in unscored(g)) / len(completions))
            log_metric("service/reward_wait_s", done - entered)
            for name in [u.name for u in self.extra]:
                judged = [v for v in batch.components[name] if v is not None]
                if judged:
                    log_metric(f"rewards/{name}/mean", sum(judged) / len(judged))
        return list(batch.rewards)

    async def _user_rewards(
        self,
        prompts: list[str],
        completions: list[str],
        task_id: list[str],
        log_metric: Callable[[str, float], None] | None,
        trl_kwargs: dict[str, Any],
    ) -> dict[str, list[float | None]]:
        """Each function called as TRL calls one: the rows' columns as keyword lists, plus TRL's own arguments."""
        rows = [self.task_columns.get(t, {}) for t in task_id]
        names = sorted({k for row in rows for k in row} - {"prompt", "completion", "completions", "prompts"})
        columns = {k: [row.get(k) for row in rows] for k in names}
        passed = {k: v for k, v in trl_kwargs.items() if k in ("completion_ids", "trainer_state", "log_extra")}
        return {
            user.name: await user.score(
                len(completions),
                prompts=prompts,
                completions=completions,
                **{**columns, **passed, "task_id": task_id, "log_metric": log_metric or _ignore},
            )
            for user in self.extra
        }

    def sample(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        tasks: Sequence[TaskRow],
        *,
        n: int,
        temperature: float,
        max_new_tokens: int,
        seed: int,
        progress: str | None = None,
    ) -> ScoredBatch:
        """n sampled completions of each task, each task's scored as one group by the service (its own reward:
        the user's functions are a training signal, not what evaluation measures)."""
        texts = sample_completions(
            model, tokenizer, [t.prompt for t in tasks], n, temperature, max_new_tokens, seed, progress=progress
        )
        scored = self.scorer.score_groups([wire_group(t.id, t.item, cs) for t, cs in zip(tasks, texts)])
        task_ids = [t.id for t in tasks for _ in range(n)]
        prompts = [t.prompt for t in tasks for _ in range(n)]
        return scored_groups(scored, task_ids, prompts, [c for cs in texts for c in cs])


def scored_groups(groups: list[GroupResult], task_ids: list[str], prompts: list[str], texts: list[str]) -> ScoredBatch:
    """The service's answer as a `ScoredBatch`: its total reward per completion (None where it judged nothing) and
    each component's."""
    size = len(groups[0].total.rewards) if groups else 1
    names = sorted({c for g in groups for c in g.components})
    return ScoredBatch(
        task_ids,
        prompts,
        texts,
        rewards=[None if m else r for g in groups for r, m in zip(g.total.rewards, unscored(g))],
        group_size=size,
        statuses=[v.status.value for g in groups for v in g.results],
        components={name: [v for g in groups for v in _component(g, name)] for name in names},
    )


def _component(group: GroupResult, name: str) -> list[float | None]:
    """A component's value per completion; None where nothing judged it (its value is a placeholder) or where the
    group's reward has no such component."""
    if name not in group.components:
        return [None] * len(group.results)
    return [None if m else v for v, m in zip(component_rewards(group, name), unscored(group))]


def sample_completions(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: list[str],
    n: int,
    temperature: float,
    max_new_tokens: int,
    seed: int,
    batch_prompts: int = 32,
    progress: str | None = None,
) -> list[list[str]]:
    """n sampled completions per prompt (greedy when temperature is 0), seeded, in prompt order; `progress` names a
    bar counting the prompts done (None: no bar)."""
    import torch
    from tqdm.auto import tqdm

    was_training = model.training
    model.eval()
    out: list[list[str]] = []
    devices = [model.device] if model.device.type == "cuda" else []
    bar = tqdm(
        total=len(prompts), desc=progress, unit="prompt", leave=False, dynamic_ncols=True, disable=progress is None
    )
    with torch.random.fork_rng(devices=devices):  # seeded sampling that leaves the training RNG stream alone
        torch.manual_seed(seed)
        for start in range(0, len(prompts), batch_prompts):
            chunk = prompts[start : start + batch_prompts]
            out.extend(_sample_chunk(model, tokenizer, chunk, n, temperature, max_new_tokens))
            bar.update(len(chunk))
    bar.close()
    model.train(was_training)
    return out


def _sample_chunk(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    chunk: list[str],
    n: int,
    temperature: float,
    max_new_tokens: int,
) -> list[list[str]]:
    import torch

    enc = tokenizer(chunk, return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
    sampling: dict[str, bool | float] = {"do_sample": False}  # greedy at temperature 0
    if temperature > 0:
        sampling = {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0}
    # PreTrainedModel's type leaves out GenerationMixin, which every causal LM class mixes in.
    generate: Callable[..., torch.Tensor] = model.generate  # type: ignore[assignment]
    with torch.no_grad():
        generated = generate(
            **enc,
            max_new_tokens=max_new_tokens,
            num_return_sequences=n,
            pad_token_id=tokenizer.pad_token_id,
            **sampling,
        )
    texts = tokenizer.batch_decode(generated[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
    return [texts[i * n : (i + 1) * n] for i in range(len(chunk))]


def _ignore(*_args: Any, **_kwargs: Any) -> None:
    """log_metric / log_extra for a call made outside TRL."""
