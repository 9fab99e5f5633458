"""Stage 3, GRPO: TRL's GRPOTrainer on the run's rollouts (rollouts.py), and checkpoints chosen by held-out pass@1.

TRL does generation, the clipped objective and the KL to the reference model. The one trainer (trainer.py) takes the
rollouts (completions scored by the service, or episodes scored by sessions) through TRL's rollout function and
trains on the groups' advantages as the service computes them, with what nothing judged masked (so training uses
exactly what the group log shows). Here: TRL's arguments from the config, and a callback that logs, warns,
evaluates on the held-out split and keeps the best checkpoint.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tqdm.auto import tqdm
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments
from transformers.trainer_callback import PrinterCallback
from trl import GRPOConfig

from groupscore.train.checkpoints import (
    BEST_FILE,
    EVALS_FILE,
    FINISHED_FILE,
    Checkpoint,
    RunHistory,
    checkpoint_step,
    drop_resumable_checkpoints,
    last_checkpoint,
    restored_best,
)
from groupscore.train.config import EvalConfig, GrpoConfig
from groupscore.train.evaluate import evaluate
from groupscore.train.hardware import Hardware
from groupscore.train.observe import JsonlWriter, Monitor
from groupscore.train.rollouts import Rollouts
from groupscore.train.summary import EvalRecord, StepMetrics
from groupscore.train.task import TaskRow
from groupscore.train.trainer import GroupGRPOTrainer

if TYPE_CHECKING:
    from datasets import Dataset
    from peft import PeftConfig
    from transformers import PreTrainedTokenizerBase


def grpo_dataset(tasks: list[TaskRow]) -> Dataset:
    from datasets import Dataset

    # Items differ in shape between kinds, so they travel as JSON text; the reward function parses them back.
    return Dataset.from_list([{"prompt": t.prompt, "task_id": t.id, "item": json.dumps(t.item)} for t in tasks])


def grpo_args(
    cfg: GrpoConfig,
    hardware: Hardware,
    out_dir: Path,
    seed: int,
    world_size: int = 1,
    report_to: Sequence[str] | None = None,
) -> GRPOConfig:
    rollouts = cfg.prompts_per_step * cfg.num_generations  # one generation batch per optimizer step
    if cfg.prompts_per_step % world_size:
        raise ValueError(
            f"grpo.prompts_per_step ({cfg.prompts_per_step}) must be a multiple of the process count "
            f"({world_size}) so that every process holds whole groups"
        )
    per_process = rollouts // world_size
    micro = cfg.micro_batch_size or per_process
    if per_process % micro:
        raise ValueError(f"grpo.micro_batch_size ({micro}) must divide the rollouts per process ({per_process})")
    return GRPOConfig(
        output_dir=str(out_dir),
        seed=seed,
        data_seed=seed,
        max_steps=cfg.max_steps,
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=per_process // micro,
        num_generations=cfg.num_generations,
        max_completion_length=cfg.max_completion_length,
        temperature=cfg.temperature,
        top_p=1.0,
        top_k=0,
        beta=cfg.beta,
        epsilon=cfg.epsilon,
        loss_type=cfg.loss_type,
        learning_rate=cfg.learning_rate,
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.0,
        logging_steps=1,
        # resumable checkpoints (weights, optimizer, RNG, data order); the newest keep_checkpoints are kept, and
        # `resume` starts from the newest
        save_strategy="steps",
        save_steps=cfg.save_every or cfg.eval_every,
        save_total_limit=cfg.keep_checkpoints,
        report_to=list(report_to or []) or "none",
        disable_tqdm=True,
        dataloader_num_workers=0,
        use_vllm=hardware.use_vllm,
        vllm_mode="colocate",
        model_init_kwargs={"dtype": hardware.torch_dtype},
        **hardware.trainer_flags(),
    )


@dataclass
class RunCallback(TrainerCallback):
    """Per-step metrics and warnings, a progress bar, held-out evaluations and the best-so-far checkpoint.

    `metrics` and `evals` start with what a resumed run had logged before its restart (`RunHistory`), so the plots
    and the summary of a resumed run are those of an uninterrupted one."""

    trainer: GroupGRPOTrainer
    tokenizer: PreTrainedTokenizerBase
    eval_tasks: list[TaskRow]
    eval_cfg: EvalConfig
    grpo_cfg: GrpoConfig
    rollouts: Rollouts
    run_dir: Path
    seed: int
    monitor: Monitor
    start_model: str = ""  # the model GRPO starts from: step 0's candidate, never copied
    metrics: list[StepMetrics] = field(default_factory=list)
    evals: list[EvalRecord] = field(default_factory=list)
    best: Checkpoint | None = None
    _bar: tqdm | None = None
    _step_started: float = 0.0
    _writer: JsonlWriter | None = None
    _eval_log: JsonlWriter | None = None

    def _evaluate(self, step: int) -> None:
        model = self.trainer.accelerator.unwrap_model(self.trainer.model)
        result = evaluate(
            model,
            self.tokenizer,
            self.eval_tasks,
            self.rollouts,
            n=self.eval_cfg.samples,
            ks=self.eval_cfg.k,
            temperature=self.eval_cfg.temperature,
            max_new_tokens=self.eval_cfg.max_completion_length or self.grpo_cfg.max_completion_length,
            seed=self.seed,
            max_prompts=self.eval_cfg.max_prompts,
            progress=f"eval @ step {step}",
        )
        record = EvalRecord(step, result)
        self.evals.append(record)
        main = self.trainer.accelerator.is_main_process
        if main and self._eval_log is not None:
            self._eval_log.write(record.as_json())
        if self.best is None or record.selection_key() > self.best.record.selection_key():  # SELECTION_RULE
            checkpoints = self.run_dir / "checkpoints"
            # step 0 is the starting model itself: its folder is the candidate, no copy of it is written
            path = Path(self.start_model) if step == 0 and self.start_model else checkpoints / f"step-{step:05d}"
            if main:
                if path.is_relative_to(checkpoints):
                    model.save_pretrained(path)
                    self.tokenizer.save_pretrained(path)
                if self.best is not None and self.best.path != path and self.best.path.is_relative_to(checkpoints):
                    shutil.rmtree(self.best.path, ignore_errors=True)  # keep one full copy: the best so far
                checkpoints.mkdir(parents=True, exist_ok=True)
                # what a resumed run must beat, and where it is
                (checkpoints / BEST_FILE).write_text(json.dumps({**record.as_json(), "path": str(path)}))
            self.best = Checkpoint(step, path, record)
        if self._bar is not None:
            self._bar.write(
                f"[eval] step {step}: held-out pass@1 {result.pass_at_1:.3f}"
                f" (best {self.best.record.result.pass_at_1:.3f} at step {self.best.step})"
            )

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        resumed = state.global_step > 0
        main = self.trainer.accelerator.is_main_process
        self._writer = JsonlWriter(self.run_dir / "metrics.jsonl", append=resumed, enabled=main)
        self._eval_log = JsonlWriter(self.run_dir / EVALS_FILE, append=resumed, enabled=main)
        self._bar = tqdm(
            total=state.max_steps,
            initial=state.global_step,
            desc="grpo",
            unit="step",
            dynamic_ncols=True,
            disable=not main,
        )
        if resumed:
            self.best = restored_best(self.run_dir)
            self.monitor.replay(self.metrics)  # the warnings of the steps before the restart, said once already
        if self.best is None:
            # the starting point is a candidate too: GRPO must beat it to be selected
            self._evaluate(state.global_step)

    def on_step_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self._step_started = time.perf_counter()

    def on_log(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        logs: dict[str, float] | None = None,
        **kwargs: Any,
    ) -> None:
        logs = logs or {}
        if "loss" not in logs:  # the end-of-training summary log, not a step
            return
        batch = self.trainer.last_batch_stats
        if batch is None or self._writer is None or self._bar is None:
            raise RuntimeError("TRL logged a training step before the run began or any batch was scored")
        record = StepMetrics(
            step=state.global_step,
            step_time_s=time.perf_counter() - self._step_started,
            batch=batch,
            kl=logs.get("kl"),
            completion_length=logs.get("completions/mean_length"),
            entropy=logs.get("entropy"),
            loss=logs.get("loss"),
            grad_norm=logs.get("grad_norm"),
            clip_ratio=logs.get("clip_ratio/region_mean"),
        )
        self.metrics.append(record)
        if self.trainer.accelerator.is_main_process:
            self._writer.write(record.as_json())
        self.monitor.check_step(record)
        self._bar.set_postfix(
            reward=f"{batch.reward_mean:.3f}",
            kl=f"{record.kl:.4f}" if record.kl is not None else "-",
            flat=f"{batch.zero_variance_share:.0%}",
            refresh=False,
        )
        self._bar.update(1)

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        if state.global_step % self.grpo_cfg.eval_every == 0 or state.global_step == state.max_steps:
            self._evaluate(state.global_step)

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if self._bar is not None:
            self._bar.close()
        for writer in (self._writer, self._eval_log):
            if writer is not None:
                writer.close()


@dataclass
class GrpoOutcome:
    best: Checkpoint
    metrics: list[StepMetrics]
    evals: list[EvalRecord]
    train_s: float


def run_grpo(
    model_path: str,
    train_tasks: list[TaskRow],
    eval_tasks: list[TaskRow],
    cfg: GrpoConfig,
    eval_cfg: EvalConfig,
    hardware: Hardware,
    rollouts: Rollouts,
    run_dir: Path,
    seed: int,
    monitor: Monitor,
    peft_config: PeftConfig | None = None,
    max_steps: int | None = None,
    *,
    report_to: Sequence[str] | None = None,
    resume: bool = False,
) -> GrpoOutcome:
    """Train, evaluating every `eval_every` steps; the best checkpoint by held-out pass@1 is the outcome.
    `resume`: go on from the newest checkpoint under run_dir/grpo, if there is one."""
    from transformers import AutoTokenizer

    from groupscore.train.hardware import is_main_process

    if max_steps is not None:
        cfg = cfg.model_copy(update={"max_steps": max_steps})
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    tokenizer.padding_side = "left"
    out_dir = run_dir / "grpo"
    main = is_main_process()
    resume_from = last_checkpoint(out_dir) if resume else None
    if resume and resume_from is None and (out_dir / FINISHED_FILE).exists():
        raise ValueError(
            f"--resume: the GRPO stage in {run_dir} ran all its steps and kept no resumable checkpoint "
            "(grpo.keep_checkpoints_after_run: false); its selected model and logs are there; to train on, start a "
            "new run_dir (e.g. from that model)"
        )
    history = RunHistory([], [])
    if resume_from is not None:
        history = RunHistory.reload(run_dir, checkpoint_step(resume_from), main=main)
    if main:
        (out_dir / FINISHED_FILE).unlink(missing_ok=True)
    group_log = JsonlWriter(run_dir / "groups.jsonl", append=resume_from is not None, enabled=main)
    trainer = GroupGRPOTrainer(
        model=model_path,
        args=grpo_args(cfg, hardware, out_dir, seed, hardware.num_processes, report_to),
        train_dataset=grpo_dataset(train_tasks),
        processing_class=tokenizer,
        peft_config=peft_config,
        rollouts=rollouts,
        group_log=group_log,
    )
    trainer.remove_callback(PrinterCallback)  # our progress bar and metrics.jsonl replace its raw dict dumps
    callback = RunCallback(
        trainer,
        tokenizer,
        eval_tasks,
        eval_cfg,
        cfg,
        rollouts,
        run_dir,
        seed,
        monitor,
        start_model=model_path,
        metrics=list(history.metrics),
        evals=list(history.evals),
    )
    trainer.add_callback(callback)
    started = time.perf_counter()
    try:
        trainer.train(resume_from_checkpoint=resume_from)
    finally:
        group_log.close()
    if callback.best is None:  # on_train_begin evaluates step 0: a trained run always has a best checkpoint
        raise RuntimeError("GRPO ended without evaluating any checkpoint")
    if main:  # every step ran: what resume needed is no longer needed, unless asked for
        freed = 0 if cfg.keep_checkpoints_after_run else drop_resumable_checkpoints(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / FINISHED_FILE).write_text(
            json.dumps({"steps": cfg.max_steps, "resumable_checkpoints_kept": cfg.keep_checkpoints_after_run})
        )
        if freed:
            size = f"{freed / 1e9:.2f} GB" if freed >= 1e9 else f"{freed / 1e6:.1f} MB"
            monitor.emit(
                f"deleted the resumable checkpoints ({size} of weights and optimizer state) now that every step ran; "
                "grpo.keep_checkpoints_after_run: true keeps them"
            )
    return GrpoOutcome(callback.best, callback.metrics, callback.evals, time.perf_counter() - started)


def materialize(checkpoint: Path, base_model: str) -> Path:
    """A full model folder for a checkpoint: itself, or (LoRA) the base with the adapter merged in."""
    checkpoint = Path(checkpoint)
    if not (checkpoint / "adapter_config.json").exists():
        return checkpoint
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from groupscore.train.hardware import barrier, is_main_process

    merged_dir = checkpoint / "merged"
    if is_main_process():
        model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base_model), checkpoint)
        model.merge_and_unload().save_pretrained(merged_dir)
        AutoTokenizer.from_pretrained(checkpoint).save_pretrained(merged_dir)
    barrier()
    return merged_dir
