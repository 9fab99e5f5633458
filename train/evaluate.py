"""Sampling n completions per prompt and scoring them as groups: used by the preflight and the held-out evaluation."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TYPE_CHECKING

from groupscore.train.passk import pass_at_k
from groupscore.train.scoring import GroupScorer, unscored, wire_group
from groupscore.train.summary import EvalResult, TaskSamples
from groupscore.train.task import Task

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from groupscore.train.episodes import EpisodeRunner

SOLVED = 1.0 - 1e-9  # a sample counts as a pass only with full reward (all hidden tests, the exact answer)


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


def evaluate(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    tasks: list[Task],
    scorer: GroupScorer,
    *,
    n: int,
    ks: list[int],
    temperature: float,
    max_new_tokens: int,
    seed: int,
    max_prompts: int | None = None,
    progress: str | None = None,
    episodes: EpisodeRunner | None = None,
) -> EvalResult:
    """Sample, score every prompt's n samples as one group through the service, and summarise; with `episodes`
    (an environment taskset), n whole episodes of each task, each scored by its session's verdict."""
    if max_prompts is not None and max_prompts < len(tasks):
        tasks = random.Random(seed).sample(tasks, max_prompts)
    if episodes is not None:
        return evaluate_episodes(model, episodes, tasks, n=n, ks=ks, temperature=temperature, seed=seed)
    prompts = [t.prompt for t in tasks]
    completions = sample_completions(model, tokenizer, prompts, n, temperature, max_new_tokens, seed, progress=progress)
    groups = [wire_group(t.id, t.item, cs) for t, cs in zip(tasks, completions)]
    scored = scorer.score_groups(groups)
    counts: list[tuple[int, int]] = []  # (judged samples, correct ones) per task
    per_task: list[TaskSamples] = []
    for task, texts, group in zip(tasks, completions, scored):
        judged = [r for r, m in zip(group.total.rewards, unscored(group)) if not m]  # an infra_error is no failure
        correct = sum(r >= SOLVED for r in judged)
        counts.append((len(judged), correct))
        per_task.append(TaskSamples(task.id, correct, len(judged), group.total.rewards, texts))
    rewards = [r for g in scored for r, m in zip(g.total.rewards, unscored(g)) if not m]
    return EvalResult(
        n=n,
        pass_at={k: _pass_at(counts, k) for k in sorted(set(ks)) if k <= n},
        mean_reward=sum(rewards) / len(rewards) if rewards else float("nan"),
        infra_errors=n * len(tasks) - len(rewards),
        solvable_share=sum(any(r > 0 for r in g.total.rewards) for g in scored) / len(scored),
        zero_variance_share=sum(g.total.zero_variance for g in scored) / len(scored),
        per_task=per_task,
    )


def _pass_at(counts: list[tuple[int, int]], k: int) -> float:
    """Mean unbiased pass@k over the tasks with at least k judged samples (each from its own judged count)."""
    usable = [pass_at_k(judged, correct, k) for judged, correct in counts if judged >= k]
    return sum(usable) / len(usable) if usable else float("nan")


def evaluate_episodes(
    model: PreTrainedModel,
    runner: EpisodeRunner,
    tasks: list[Task],
    *,
    n: int,
    ks: list[int],
    temperature: float,
    seed: int,
) -> EvalResult:
    """n episodes of each task; pass@k over the judged ones (a reward of 1 is a pass)."""
    import statistics

    import torch

    with torch.random.fork_rng(devices=[model.device] if model.device.type == "cuda" else []):
        torch.manual_seed(seed)
        episodes = runner.run(model, [t.id for t in tasks for _ in range(n)], temperature, seed=seed)
    counts, per_task = [], []
    for i, task in enumerate(tasks):
        group = episodes[i * n : (i + 1) * n]
        judged = [e.reward for e in group if e.reward is not None]
        correct = sum(r >= SOLVED for r in judged)
        counts.append((len(judged), correct))
        texts = [str(e.messages) for e in group]
        per_task.append(TaskSamples(task.id, correct, len(judged), [e.reward or 0.0 for e in group], texts))
    rewards = [e.reward for e in episodes if e.reward is not None]
    groups = [[e.reward for e in episodes[i * n : (i + 1) * n]] for i in range(len(tasks))]
    return EvalResult(
        n=n,
        pass_at={k: _pass_at(counts, k) for k in sorted(set(ks)) if k <= n},
        mean_reward=statistics.fmean(rewards) if rewards else float("nan"),
        infra_errors=len(episodes) - len(rewards),
        solvable_share=sum(any((r or 0) > 0 for r in g) for g in groups) / len(groups),
        zero_variance_share=sum(len({r for r in g if r is not None}) <= 1 for g in groups) / len(groups),
        per_task=per_task,
    )
