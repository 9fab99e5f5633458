"""The whole run, top to bottom: everything checked and prepared (prepare.py), then cold start, preflight, GRPO,
evaluation, selection, merge, report.

Each stage is optional (its config section left out) and hands the next one a model folder.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from groupscore.train.config import TrainConfig
from groupscore.train.evaluate import evaluate
from groupscore.train.hardware import Hardware, barrier, is_main_process
from groupscore.train.models import load_model, lora_config
from groupscore.train.observe import Monitor, plot_run
from groupscore.train.prepare import prepare
from groupscore.train.rollouts import Rollouts, open_rollouts, session_task_dirs
from groupscore.train.scoring import open_scorer
from groupscore.train.summary import (
    EvalRecord,
    EvalResult,
    FinalEval,
    GrpoStage,
    MergeStage,
    PreflightReport,
    RunSummary,
    SftStage,
    StepMetrics,
)
from groupscore.train.task import TaskRow

FINAL_EVAL_SEED_OFFSET = 1000  # before/after are re-measured on fresh samples, not the ones selection looked at


def say(message: str) -> None:
    if is_main_process():  # one voice under `accelerate launch`
        print(f"[train] {message}", flush=True)


def evaluate_folder(
    path: str | Path,
    tasks: list[TaskRow],
    config: TrainConfig,
    hardware: Hardware,
    rollouts: Rollouts,
    seed: int,
    progress: str = "eval",
) -> EvalResult:
    eval_cfg = config.eval
    if eval_cfg is None:
        raise ValueError("evaluate_folder needs the config's eval section")
    model, tokenizer = load_model(str(path), hardware)
    max_new = eval_cfg.max_completion_length or (config.grpo.max_completion_length if config.grpo else 256)
    return evaluate(
        model,
        tokenizer,
        tasks,
        rollouts,
        n=eval_cfg.samples,
        ks=eval_cfg.k,
        temperature=eval_cfg.temperature,
        max_new_tokens=max_new,
        seed=seed,
        max_prompts=eval_cfg.max_prompts,
        progress=progress,
    )


def preflight(
    model_path: str,
    tasks: list[TaskRow],
    config: TrainConfig,
    hardware: Hardware,
    rollouts: Rollouts,
) -> PreflightReport:
    """Can GRPO learn from this model? Groups with no positive reward give it nothing to work with."""
    cfg = config.preflight
    if cfg is None:
        raise ValueError("preflight needs the config's preflight section")
    model, tokenizer = load_model(model_path, hardware)
    temperature = config.grpo.temperature if config.grpo else 0.9
    max_new = config.grpo.max_completion_length if config.grpo else 256
    result = evaluate(
        model,
        tokenizer,
        tasks,
        rollouts,
        n=cfg.generations,
        ks=[1, cfg.generations],
        temperature=temperature,
        max_new_tokens=max_new,
        seed=config.seed,
        max_prompts=cfg.max_prompts,
        progress="preflight",
    )
    report = PreflightReport(result, threshold=cfg.min_solvable_share)
    say(
        f"preflight on {len(result.per_task)} train prompts x {cfg.generations}: pass@1 {result.pass_at[1]:.3f}, "
        f"pass@{cfg.generations} {result.pass_at[cfg.generations]:.3f}, groups with a positive reward "
        f"{result.solvable_share:.0%} (need {cfg.min_solvable_share:.0%})"
    )
    if not report.ok:
        message = (
            f"only {result.solvable_share:.0%} of groups have any positive reward: GRPO will see mostly flat "
            f"groups. Cold-start longer, pick easier tasks or a stronger model."
        )
        if cfg.on_fail == "stop":
            raise ValueError(f"preflight failed: {message}")
        say(f"[warning] preflight: {message}")
    return report


def run(config: TrainConfig) -> RunSummary:
    started = time.perf_counter()
    run_dir = config.run_dir
    prepared = prepare(config)
    hardware, train_tasks, eval_tasks = prepared.hardware, prepared.train_tasks, prepared.eval_tasks
    if hardware.is_main:
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "config.json").write_text(config.model_dump_json(indent=2))
    say(
        f"{hardware.device} ({hardware.precision}, {hardware.threads} threads); {len(train_tasks)} train / "
        f"{len(eval_tasks)} held-out tasks; run folder {run_dir}"
    )
    summary = RunSummary(run_dir=str(run_dir), device=hardware.device, precision=hardware.precision, seed=config.seed)
    stages = summary.stages
    peft_config = lora_config(config.model)
    monitor = Monitor(config.monitor, emit=say)
    # The embedded service may open the run's task files (added to the user's GROUPSCORE_TASK_DIRS for it alone).
    dirs = session_task_dirs(config, prepared, train_tasks + eval_tasks)
    with open_scorer(config.service, dirs) as scorer, open_rollouts(config, prepared, scorer) as rollouts:
        say(f"scoring service at {', '.join(scorer.urls)}")
        model_path = cold_start_path = prepared.model_path
        sft_done = run_dir / "sft" / "final"
        if config.sft is not None and config.resume and (sft_done / "config.json").exists():
            say(f"resume: the cold start of the interrupted run, {sft_done}")
            model_path = cold_start_path = str(sft_done)
            stages.sft = SftStage(model=model_path, seconds=0.0)
        elif config.sft is not None:
            from groupscore.train.sft import cold_start

            t0 = time.perf_counter()
            say(f"cold start: SFT for {config.sft.max_steps} steps on {len(train_tasks)} worked solutions")
            model_path = cold_start_path = str(
                cold_start(
                    model_path,
                    train_tasks,
                    config.sft,
                    hardware,
                    run_dir / "sft",
                    config.seed,
                    peft_config,
                    report_to=config.report_to,
                )
            )
            stages.sft = SftStage(model=model_path, seconds=round(time.perf_counter() - t0, 1))
        if config.preflight is not None:
            stages.preflight = preflight(model_path, train_tasks, config, hardware, rollouts)

        selected = model_path
        evals: list[EvalRecord] = []
        metrics: list[StepMetrics] = []
        if config.grpo is not None and config.eval is not None:  # the config refuses grpo without eval
            from groupscore.train.grpo import materialize, run_grpo

            g = config.grpo
            say(
                f"GRPO: {g.max_steps} steps x {g.prompts_per_step} prompts x {g.num_generations} generations, "
                f"beta {g.beta}, temperature {g.temperature}, lr {g.learning_rate}"
            )
            outcome = run_grpo(
                model_path,
                train_tasks,
                eval_tasks,
                g,
                config.eval,
                hardware,
                rollouts,
                run_dir,
                config.seed,
                monitor,
                peft_config,
                report_to=config.report_to,
                resume=config.resume,
            )
            selected = str(materialize(outcome.best.path, model_path))
            evals, metrics = outcome.evals, outcome.metrics
            stages.grpo = GrpoStage(
                seconds=round(outcome.train_s, 1),
                steps=len(metrics),
                selected_step=outcome.best.step,
                selected_checkpoint=selected,
                evals=evals,
                warnings=monitor.warnings,
            )
        if config.eval is not None:
            seed = config.seed + FINAL_EVAL_SEED_OFFSET
            before = evaluate_folder(model_path, eval_tasks, config, hardware, rollouts, seed, "eval (before)")
            after = (
                evaluate_folder(selected, eval_tasks, config, hardware, rollouts, seed, "eval (after)")
                if selected != model_path
                else before
            )
            summary.eval = FinalEval(before=before, after=after, seed=seed)
        if config.merge is not None:
            from groupscore.train.merge import merge_weights

            merged = run_dir / "merged"
            if hardware.is_main:
                merge_weights(Path(selected), Path(cold_start_path), config.merge.ratio, merged)
            barrier()
            merged_eval = None
            if config.eval is not None:
                merged_eval = evaluate_folder(
                    merged,
                    eval_tasks,
                    config,
                    hardware,
                    rollouts,
                    config.seed + FINAL_EVAL_SEED_OFFSET,
                )
            stages.merge = MergeStage(model=str(merged), ratio=config.merge.ratio, eval=merged_eval)
        summary.verifier_versions = scorer.versions.summary()  # every verdict of the run, one version per kind
    summary.selected_model = selected
    if not hardware.is_main:
        return summary
    summary.plots = plot_run(run_dir, metrics, evals) if config.grpo is not None else {}
    summary.logs = {
        name: str(run_dir / f"{name}.jsonl") for name in ("groups", "metrics") if (run_dir / f"{name}.jsonl").exists()
    }
    summary.seconds = round(time.perf_counter() - started, 1)
    (run_dir / "summary.json").write_text(json.dumps(summary.as_json(), indent=2))
    (run_dir / "summary.md").write_text(report_text(summary))
    print(report_text(summary), flush=True)
    return summary


def tie_note(stage: GrpoStage) -> str:
    """' (tied on held-out pass@1 with steps 0, 2)' when the rule broke a tie, else ''."""
    chosen = next((e for e in stage.evals if e.step == stage.selected_step), None)
    if chosen is None:
        return ""
    tied = [e.step for e in stage.evals if e.step != chosen.step and e.result.pass_at_1 == chosen.result.pass_at_1]
    return (
        f" (tied on held-out pass@1 with step{'s' if len(tied) > 1 else ''} {', '.join(map(str, tied))})"
        if tied
        else ""
    )


def report_text(summary: RunSummary) -> str:
    lines = [f"# Training run: {summary.run_dir}", ""]
    if summary.eval is not None:
        ev = summary.eval
        lines.append(
            f"held-out pass@1: {ev.before.pass_at_1:.3f} before -> {ev.after.pass_at_1:.3f} "
            f"after (n={ev.after.n} samples per prompt, fresh seed {ev.seed})"
        )
        for k in ev.after.pass_at:
            if k != 1:
                lines.append(f"held-out pass@{k}: {ev.before.pass_at[k]:.3f} -> {ev.after.pass_at[k]:.3f}")
    stages = summary.stages
    if stages.preflight is not None:
        p = stages.preflight
        lines.append(
            f"preflight: {p.result.solvable_share:.0%} of groups with a positive reward "
            f"({'ok' if p.ok else 'BELOW'} threshold {p.threshold:.0%})"
        )
    if stages.grpo is not None:
        g = stages.grpo
        lines.append(f"GRPO: {g.steps} steps in {g.seconds} s; {len(g.warnings)} warnings")
        lines.append(f"selected: step {g.selected_step}, by {g.selected_by}{tie_note(g)}")
        lines += [f"  - step {w['step']}: {w['message']}" for w in g.warnings]
    if stages.merge is not None:
        m = stages.merge
        extra = f", pass@1 {m.eval.pass_at_1:.3f}" if m.eval is not None else ""
        lines.append(f"merged release ({m.ratio:.2f} GRPO / {1 - m.ratio:.2f} cold start): {m.model}{extra}")
    lines.append(f"model: {summary.selected_model}")
    if summary.verifier_versions:
        tags = [
            f"{kind}@{v}" if isinstance(v, int) else " and ".join(f"{kind}@{x}" for x in v) + " (mixed)"
            for kind, v in summary.verifier_versions.items()
        ]
        lines.append(f"verifier versions: {', '.join(tags)}")
    for name, path in {**(summary.plots or {}), **(summary.logs or {})}.items():
        lines.append(f"{name}: {path}")
    lines.append(f"total time: {summary.seconds} s on {summary.device}")
    return "\n".join(lines) + "\n"
