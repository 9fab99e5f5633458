"""`groupscore train CONFIG.yaml [--dry-run]`: run the pipeline, or check everything and estimate its cost first."""

from __future__ import annotations

import math
import shutil
import tempfile
import time
from pathlib import Path

from groupscore.train.config import TrainConfig, load_config
from groupscore.train.pipeline import run, say
from groupscore.train.prepare import Prepared, prepare
from groupscore.train.rollouts import open_rollouts
from groupscore.train.scoring import ServiceScorer, open_scorer, wire_group
from groupscore.train.summary import DryRunReport
from groupscore.train.task import TaskRow

MEASURED_GRPO_STEPS = 3  # the first step pays for warm-up; the estimate uses the ones after it
MEASURED_SFT_STEPS = 10


def train_command(
    config_path: Path,
    dry_run: bool = False,
    sets: list[str] | None = None,
    resume: bool = False,
    time_steps: bool = False,
) -> int:
    """`sets`: `--set key.path=value` overrides; `resume`: go on from the interrupted run in run_dir; `time_steps`
    (`--time`, with `dry_run`): also time a few real steps to estimate the run."""
    config = load_config(Path(config_path), sets=sets)
    if resume:
        config = config.model_copy(update={"resume": True})
    if dry_run:
        return 0 if dry_run_report(config, timing=time_steps).ok else 1
    if time_steps:
        raise ValueError("--time goes with --dry-run: it times a few steps instead of running the whole pipeline")
    run(config)
    return 0


def check_env(prepared: Prepared) -> list[str]:
    """An environment taskset: the template's tool format (found in prepare), each task's tools rendered into its
    prompt, and reference episodes replayed in sessions (each call's recorded result, a verdict of 1)."""
    from groupscore.train.env_tasks import check_reference_episodes

    say(f"tool calls: the {prepared.tool_format} format, read from the chat template; prompts rendered with the tools")
    replayed, failures = check_reference_episodes(prepared.train_tasks + prepared.eval_tasks)
    if replayed:
        say(f"{replayed} reference episodes replayed in sessions" + (": each scores 1" if not failures else ""))
    else:
        say("no task has a reference episode to replay (metadata: reference, outputs, answer)")
    return failures


def check_references(tasks: list[TaskRow], scorer: ServiceScorer) -> list[str]:
    """Every task's worked solution must score 1 through the service (by its item's own verifier), or the taskset
    (or the verifier) is wrong."""
    with_solution = [(t, t.solution) for t in tasks if t.solution is not None]
    scored = scorer.score_references([wire_group(t.id, t.item, [solution]) for t, solution in with_solution])
    return [
        f"{t.id}: reference scored {g.total.rewards[0]} ({g.results[0].status})"
        for (t, _), g in zip(with_solution, scored)
        if g.total.rewards[0] < 1.0
    ]


def dry_run_report(config: TrainConfig, timing: bool = False) -> DryRunReport:
    """Validate config, taskset, rewards and service; count rollouts. `timing` (`--time`): also load the model and
    time a few real SFT and GRPO steps and two held-out evaluations in a scratch folder, to estimate the run."""
    prepared = prepare(config)
    hardware, train_tasks, eval_tasks = prepared.hardware, prepared.train_tasks, prepared.eval_tasks
    report = DryRunReport(device=hardware.device, precision=hardware.precision)
    say(
        f"config ok; {len(train_tasks)} train / {len(eval_tasks)} held-out tasks; {hardware.device} "
        f"({hardware.precision}, {hardware.threads} threads)"
    )
    with open_scorer(config.service) as scorer:
        say(f"service at {', '.join(scorer.urls)}")
        failures = check_env(prepared) if prepared.tool_format else check_references(train_tasks + eval_tasks, scorer)
        report.verifier_versions = scorer.versions.summary()
        say("verifier versions: " + (", ".join(f"{k}@{v}" for k, v in report.verifier_versions.items()) or "none"))
        total = len(train_tasks) + len(eval_tasks)
        missing = sum(t.solution is None for t in train_tasks + eval_tasks)
        report.reference_failures = failures
        if failures:
            report.ok = False
            say(f"[error] {len(failures)} reference solutions do not score 1:\n  " + "\n  ".join(failures[:20]))
        elif prepared.tool_format:
            pass  # an environment taskset's references are its episodes, replayed above
        elif missing == total:
            say(
                f"no reference solutions to check: none of the {total} tasks has one (a `solution` field, or "
                "taskset.columns.solution for mapped rows); the verifier items are checked, the answers are not"
            )
        else:
            say(
                f"{total - missing} of {total} tasks have a reference solution, and each scores 1 through the service"
                if missing
                else f"all {total} reference solutions score 1 through the service"
            )
        for problem in check_reward_functions(prepared, train_tasks + eval_tasks):
            report.ok = False
            say(f"[error] {problem}")
        if config.sft is not None and not any(t.solution for t in train_tasks):
            report.ok = False
            say("[error] sft is configured but no train task has a `solution`")
        if config.grpo is not None:
            g = config.grpo
            epochs = g.max_steps * g.prompts_per_step / len(train_tasks)
            rollouts = g.max_steps * g.prompts_per_step * g.num_generations
            report.rollouts = rollouts
            say(
                f"rollouts: {g.max_steps * g.prompts_per_step} prompts x {g.num_generations} generations "
                f"= {rollouts} ({epochs:.2f} epochs over {len(train_tasks)} train prompts)"
            )
        if report.ok and timing:
            report.estimate_s = estimate = estimate_run_time(config, prepared, scorer)
            say(f"estimated run time: {estimate / 60:.1f} min (from measured steps; see above)")
        elif report.ok:
            say(f"run time: not measured; add --time to measure it ({timing_plan(config)})")
    return report


def timing_plan(config: TrainConfig) -> str:
    """What `--time` runs, in words."""
    parts = []
    if config.sft is not None:
        parts.append(f"{min(MEASURED_SFT_STEPS, config.sft.max_steps)} SFT steps")
    if config.grpo is not None:
        parts.append(f"{min(MEASURED_GRPO_STEPS, config.grpo.max_steps)} GRPO steps and 2 held-out evaluations")
    if not parts:
        return "nothing to time: the config has no sft or grpo stage"
    return "loads the model and runs " + " and ".join(parts) + " in a scratch folder, then extrapolates"


def check_reward_functions(prepared: Prepared, tasks: list[TaskRow]) -> list[str]:
    """Each user reward function called once, as GRPO will call it, on the tasks' worked solutions (or an empty
    completion): a wrong signature or return value shows here, not after the model has loaded."""
    import asyncio

    if not prepared.reward_functions or not tasks:
        return []
    sample = tasks[: min(8, len(tasks))]
    rows = [t.columns for t in sample]
    columns = {k: [row.get(k) for row in rows] for k in sorted({k for row in rows for k in row})}
    completions = [t.solution or "" for t in sample]
    problems = []
    for user in prepared.reward_functions:
        try:
            values = asyncio.run(
                user.score(
                    len(sample),
                    prompts=[t.prompt for t in sample],
                    completions=completions,
                    completion_ids=[[] for _ in sample],
                    **{**columns, "task_id": [t.id for t in sample], "log_metric": lambda *_a: None},
                    trainer_state=None,
                    log_extra=lambda *_a, **_k: None,
                )
            )
        except Exception as exc:  # noqa: BLE001 - the user's function: any failure is its finding
            problems.append(f"rewards: {user.ref} failed on the worked solutions: {type(exc).__name__}: {exc}")
            continue
        shown = ", ".join("None" if v is None else f"{v:g}" for v in values)
        say(f"reward function {user.name} ({user.ref}) on {len(sample)} worked solutions: {shown}")
    return problems


def estimate_run_time(config: TrainConfig, prepared: Prepared, scorer: ServiceScorer) -> float:
    """Run a few SFT and GRPO steps in a scratch folder and extrapolate; evaluations are timed once."""
    from groupscore.train.grpo import run_grpo
    from groupscore.train.models import lora_config
    from groupscore.train.observe import Monitor

    hardware, train_tasks, eval_tasks = prepared.hardware, prepared.train_tasks, prepared.eval_tasks
    scratch = Path(tempfile.mkdtemp(prefix="groupscore-dry-run-"))
    total = 0.0
    try:
        model_path = prepared.model_path
        if config.sft is not None:
            from groupscore.train.sft import cold_start

            steps = min(MEASURED_SFT_STEPS, config.sft.max_steps)
            t0 = time.perf_counter()
            cold_start(
                model_path,
                train_tasks,
                config.sft.model_copy(update={"max_steps": steps}),
                hardware,
                scratch / "sft",
                config.seed,
                lora_config(config.model),
                progress=False,
            )
            per_step = (time.perf_counter() - t0) / steps
            say(f"  sft: {per_step:.3f} s/step measured over {steps} steps -> {per_step * config.sft.max_steps:.0f} s")
            total += per_step * config.sft.max_steps
        if config.grpo is not None and config.eval is not None:  # the config refuses grpo without eval
            steps = min(MEASURED_GRPO_STEPS, config.grpo.max_steps)
            quiet = Monitor(config.monitor, emit=lambda _msg: None)
            # eval_every beyond the measured steps: the one evaluation at step 0 and at the end are timed apart
            cfg = config.grpo.model_copy(update={"eval_every": 10**6})
            with open_rollouts(config, prepared, scorer) as rollouts:
                outcome = run_grpo(
                    model_path,
                    train_tasks,
                    eval_tasks,
                    cfg,
                    config.eval,
                    hardware,
                    rollouts,
                    scratch,
                    config.seed,
                    quiet,
                    lora_config(config.model),
                    max_steps=steps,
                )
            step_times = [m.step_time_s for m in outcome.metrics]
            per_step = sum(step_times[1:]) / max(1, len(step_times) - 1) if len(step_times) > 1 else step_times[0]
            eval_s = max(0.0, (outcome.train_s - sum(step_times)) / 2)  # the step-0 and final evaluations
            # during GRPO (every eval_every, and step 0), final before/after, preflight and merged model if configured
            n_evals = (
                math.ceil(config.grpo.max_steps / config.grpo.eval_every)
                + 1
                + 2
                + (config.preflight is not None)
                + (config.merge is not None)
            )
            say(
                f"  grpo: {per_step:.2f} s/step measured over {steps} steps (untrained model: completions may be "
                f"longer than after SFT) -> {per_step * config.grpo.max_steps:.0f} s; "
                f"{n_evals} evaluations x {eval_s:.1f} s"
            )
            total += per_step * config.grpo.max_steps + n_evals * eval_s
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return total
