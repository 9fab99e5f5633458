"""`groupscore eval CONFIG.yaml`: run a model over a taskset before (or instead of) training on it.

It is the trainer's own evaluation (evaluate.py, over the run's rollouts: completions scored by the service, or whole
episodes scored by sessions), run on its own: `-k` rollouts of each of `-n` tasks of a split, then what says whether
GRPO can learn there. The policy is the config's model (or `--model`), or any model behind an OpenAI-compatible
endpoint (`--endpoint URL`: train/endpoint_rollouts.py), e.g. a frontier model to see whether a taskset is well
scoped. A task whose judged rollouts all earn the same reward (all 0, all 1) gives a GRPO group no signal; the
learnable ones (0 < p < 1) are the ones to train on. An `infra_error` rollout is never counted as a 0: it is left out
and counted apart.

Written to `--out` (default `<run_dir>/eval-<split>`): `rollouts.jsonl` (one line per rollout: the task, its prompt,
the completion or the trajectory, reward, status, components), `summary.json` (pass@k, mean reward, the shares,
per-task rewards), and `learnable.txt` (the learnable tasks' ids, one a line); for a single-turn taskset also
`learnable.jsonl` (those tasks as a taskset of groupscore's own rows, to train on) and `accepted.jsonl` (one row per
solved rollout, the completion as its `solution`: rejection sampling, read as it is by the trainer's SFT cold start).
"""

from __future__ import annotations

import json
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from groupscore.train.batch import ScoredBatch
from groupscore.train.config import EvalConfig, TrainConfig, load_config
from groupscore.train.evaluate import SOLVED, summarize
from groupscore.train.summary import EvalResult
from groupscore.train.task import TaskRow

if TYPE_CHECKING:
    from groupscore.train.chat_endpoint import ChatEndpoint

Split = Literal["eval", "train", "all"]


@dataclass(frozen=True)
class TasksetEval:
    result: EvalResult
    verdicts: dict[str, str]  # task id -> "all-0", "all-1", "flat" (all alike, between), "learnable", "unjudged"
    judged: list[float]  # every judged rollout's reward
    out: Path
    policy: str = ""  # the model folder, or "MODEL at URL" for an endpoint

    def shares(self) -> dict[str, float]:
        total = len(self.verdicts) or 1
        kinds = ("all-0", "all-1", "flat", "learnable", "unjudged")
        return {kind: sum(v == kind for v in self.verdicts.values()) / total for kind in kinds}


def task_verdict(rewards: Sequence[float | None]) -> str:
    """What a GRPO group of these rollouts would carry: a spread of rewards (learnable), or none."""
    judged = [r for r in rewards if r is not None]
    if not judged:
        return "unjudged"
    if max(judged) - min(judged) > 1e-9:
        return "learnable"
    if judged[0] >= SOLVED:
        return "all-1"
    return "all-0" if judged[0] <= 0 else "flat"


def eval_command(
    config_path: Path,
    sets: Sequence[str] = (),
    *,
    model: str | None = None,
    split: Split = "eval",
    tasks: int | None = None,
    k: int | None = None,
    temperature: float | None = None,
    out: Path | None = None,
    endpoint: str | None = None,
) -> int:
    """Print the report; 0 when every rollout was judged, 1 when some were infra_error (the numbers leave them out).
    With `endpoint`, `model` names the model it serves (default: the only one it lists)."""
    from groupscore.train.chat_endpoint import ChatEndpoint, EndpointError

    overrides = [*sets, *([f"model.path={model}"] if model is not None and endpoint is None else [])]
    config = load_config(Path(config_path), sets=overrides)
    chat = ChatEndpoint(endpoint, model=model) if endpoint is not None else None
    try:
        report = run_eval(config, split=split, tasks=tasks, k=k, temperature=temperature, out=out, endpoint=chat)
    except EndpointError as exc:  # the endpoint itself: unreachable, or a key, model or URL it refuses
        raise ValueError(f"--endpoint: {exc}") from None
    finally:
        if chat is not None:
            chat.close()
    print(report_text(report), flush=True)
    return 1 if report.result.infra_errors else 0


def run_eval(
    config: TrainConfig,
    *,
    split: Split = "eval",
    tasks: int | None = None,
    k: int | None = None,
    temperature: float | None = None,
    out: Path | None = None,
    endpoint: ChatEndpoint | None = None,
) -> TasksetEval:
    from groupscore.train.models import load_model
    from groupscore.train.pipeline import say
    from groupscore.train.prepare import prepare
    from groupscore.train.rollouts import open_rollouts, session_task_dirs
    from groupscore.train.scoring import open_scorer

    base = config.eval or EvalConfig()
    n = k or base.samples
    temp = base.temperature if temperature is None else temperature
    if temp == 0 and n != 1:
        raise ValueError("--temperature 0 is greedy decoding: every rollout of a task would be the same; use -k 1")
    max_new = base.max_completion_length or (config.grpo.max_completion_length if config.grpo else 256)
    if endpoint is None:
        prepared = prepare(config)
        train, held_out, policy = prepared.train_tasks, prepared.eval_tasks, str(prepared.model_path)
    else:
        from groupscore.train.endpoint_rollouts import endpoint_tasks

        train, held_out = endpoint_tasks(config)
        policy = f"{endpoint.served_model()} at {endpoint.url}"
    chosen = {"eval": held_out, "train": train}.get(split, train + held_out)
    if tasks is not None and tasks < len(chosen):
        chosen = random.Random(config.seed).sample(chosen, tasks)
    if not chosen:
        raise ValueError(f"the taskset's {split} split has no tasks")
    out_dir = Path(out) if out is not None else config.run_dir / f"eval-{split}"
    say(f"{len(chosen)} {split} tasks x {n} rollouts of {policy}, temperature {temp}")
    if endpoint is not None:
        from groupscore.train.endpoint_rollouts import sample_batch

        batch = sample_batch(endpoint, config, chosen, n=n, temperature=temp, max_tokens=max_new, seed=config.seed)
    else:
        dirs = session_task_dirs(config, prepared, chosen)
        with open_scorer(config.service, dirs) as scorer, open_rollouts(config, prepared, scorer) as rollouts:
            model, tokenizer = load_model(prepared.model_path, prepared.hardware)
            batch = rollouts.sample(
                model, tokenizer, chosen, n=n, temperature=temp, max_new_tokens=max_new, seed=config.seed,
                progress="eval",
            )  # fmt: skip
    result = summarize(batch, chosen, n, sorted({1, n}))
    verdicts = {task.id: task_verdict(batch.rewards[rows]) for task, rows in zip(chosen, batch.groups())}
    report = TasksetEval(result, verdicts, [r for r in batch.rewards if r is not None], out_dir, policy)
    write_outputs(report, batch, chosen)
    if batch.samples_key == "completions":  # the taskset's own rows, before any chat template rendered them
        from groupscore.train.endpoint_rollouts import endpoint_tasks

        raw = {t.id: t for part in (endpoint_tasks(config) if endpoint is None else (train, held_out)) for t in part}
        write_tasksets(report, batch, [raw[t.id] for t in chosen])
    return report


def own_row(task: TaskRow, solution: str | None = None, task_id: str | None = None) -> dict[str, Any]:
    """A task as one of groupscore's own JSONL rows (what `taskset.train: FILE.jsonl` reads back)."""
    prompt: Any = [{"role": m.role, "content": m.content} for m in task.messages] if task.messages else task.prompt
    row = {"id": task_id or task.id, "prompt": prompt, "item": task.item}
    solution = solution if solution is not None else task.solution
    return {**row, "solution": solution} if solution is not None else row


def write_tasksets(report: TasksetEval, batch: ScoredBatch, raw: list[TaskRow]) -> None:
    """Single-turn tasksets only: `learnable.jsonl`, the learnable tasks as a taskset to train on; `accepted.jsonl`,
    one row per solved rollout with the completion as its `solution` (rejection sampling: the trainer's SFT cold start
    reads it as it is, `taskset.train: accepted.jsonl`)."""
    with (report.out / "learnable.jsonl").open("w") as f:
        for task in raw:
            if report.verdicts.get(task.id) == "learnable":
                f.write(json.dumps(own_row(task), ensure_ascii=False) + "\n")
    with (report.out / "accepted.jsonl").open("w") as f:
        for task, rows in zip(raw, batch.groups()):
            for rollout, index in enumerate(range(rows.start, rows.stop)):
                reward = batch.rewards[index]
                if reward is not None and reward >= SOLVED:
                    row = own_row(task, str(batch.samples[index]), f"{task.id}/{rollout}")
                    f.write(json.dumps(row, ensure_ascii=False) + "\n")


def write_outputs(report: TasksetEval, batch: ScoredBatch, tasks: list[TaskRow]) -> None:
    out = report.out
    out.mkdir(parents=True, exist_ok=True)
    with (out / "rollouts.jsonl").open("w") as f:
        for index in range(len(batch.rewards)):
            record: dict[str, Any] = {
                "task_id": batch.task_ids[index],
                "rollout": index % batch.group_size,
                "prompt": batch.prompts[index],
                "trajectory" if batch.samples_key == "trajectories" else "completion": batch.samples[index],
                "reward": batch.rewards[index],
                "status": batch.statuses[index] if batch.statuses else None,
                "components": {name: values[index] for name, values in batch.components.items()},
            }
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    summary = {
        "policy": report.policy,
        **report.result.as_dict(),
        "tasks": len(tasks),
        "shares": report.shares(),
        "per_task": [
            {"id": t.id, "rewards": batch.rewards[rows], "verdict": report.verdicts[t.id]}
            for t, rows in zip(tasks, batch.groups())
        ],
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    learnable = [task_id for task_id, verdict in report.verdicts.items() if verdict == "learnable"]
    (out / "learnable.txt").write_text("".join(f"{task_id}\n" for task_id in learnable))


def histogram(values: list[float], bins: int = 5, width: int = 30) -> list[str]:
    """The reward distribution over [0, 1] as text bars."""
    counts = [0] * bins
    for value in values:
        counts[min(bins - 1, max(0, int(value * bins)))] += 1
    top = max(counts) or 1
    lines = []
    for i, count in enumerate(counts):
        bar = "#" * round(width * count / top)
        lines.append(f"  [{i / bins:.1f}, {(i + 1) / bins:.1f}{']' if i == bins - 1 else ')'} {bar:<{width}} {count}")
    return lines


def report_text(report: TasksetEval) -> str:
    result = report.result
    judged = report.judged
    shares = report.shares()
    lines = [
        f"{len(report.verdicts)} tasks x {result.n} rollouts: "
        + ", ".join(f"pass@{k} {v:.3f}" for k, v in result.pass_at.items())
        + f", mean reward {result.mean_reward:.3f}"
        + (f" (median {statistics.median(judged):.3f})" if judged else ""),
        f"for GRPO: learnable {shares['learnable']:.0%}, all-0 {shares['all-0']:.0%}, all-1 {shares['all-1']:.0%}"
        + (f", flat in between {shares['flat']:.0%}" if shares["flat"] else "")
        + (f", unjudged {shares['unjudged']:.0%}" if shares["unjudged"] else ""),
        f"infra_error rollouts: {result.infra_errors} (left out of every number, never counted as 0)",
        "reward distribution (judged rollouts):",
        *histogram(judged),
        f"rollouts: {report.out / 'rollouts.jsonl'}; summary: {report.out / 'summary.json'}; "
        f"learnable tasks: {report.out / 'learnable.txt'}",
    ]
    if (report.out / "accepted.jsonl").exists():
        lines.append(
            f"as tasksets: the learnable tasks {report.out / 'learnable.jsonl'}; the solved rollouts, each with its "
            f"completion as the solution (SFT rows) {report.out / 'accepted.jsonl'}"
        )
    return "\n".join(lines)
