"""Stage 1, the cold start: supervised fine-tuning on the taskset's worked solutions with TRL's SFTTrainer."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from groupscore.train.config import SftConfig
from groupscore.train.hardware import Hardware
from groupscore.train.task import TaskRow

if TYPE_CHECKING:
    from peft import PeftConfig
    from transformers import PreTrainedTokenizerBase


def cold_start(
    model_path: str,
    tasks: list[TaskRow],
    cfg: SftConfig,
    hardware: Hardware,
    out_dir: Path,
    seed: int,
    peft_config: PeftConfig | None = None,
    report_to: Sequence[str] | None = None,
    progress: bool = True,
) -> Path:
    """Train on prompt -> worked solution (loss on the solution only; on an episode's, the model's turns only);
    returns the saved model folder."""
    from datasets import Dataset
    from transformers.trainer_callback import PrinterCallback
    from trl import SFTConfig, SFTTrainer

    from groupscore.train.models import load_model
    from groupscore.train.progress import ProgressBar

    solved = [t for t in tasks if t.solution]
    if not solved:
        raise ValueError("sft: the train split has no `solution` fields to cold-start on")
    model, tokenizer = load_model(model_path, hardware)
    rows = sft_rows(tokenizer, solved)
    args = SFTConfig(
        output_dir=str(out_dir),
        max_steps=cfg.max_steps,
        per_device_train_batch_size=cfg.batch_size,
        learning_rate=cfg.learning_rate,
        lr_scheduler_type="constant",
        warmup_steps=0,
        seed=seed,
        data_seed=seed,
        logging_steps=max(1, cfg.max_steps // 10),
        save_strategy="no",
        report_to=list(report_to or []) or "none",
        disable_tqdm=True,
        dataloader_num_workers=0,
        **hardware.trainer_flags(),
    )
    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        peft_config=peft_config,
    )
    trainer.remove_callback(PrinterCallback)  # one summary line below instead of a dict per logging step
    if progress:
        trainer.add_callback(ProgressBar("sft", trainer.accelerator.is_main_process))
    result = trainer.train()
    losses = [e["loss"] for e in trainer.state.log_history if "loss" in e]
    print(
        f"[train] sft: {result.global_step} steps in {result.metrics['train_runtime']:.1f} s, loss "
        f"{losses[0]:.3f} -> {losses[-1]:.3f}",
        flush=True,
    )
    final = out_dir / "final"
    if trainer.accelerator.is_main_process:
        merged = trainer.accelerator.unwrap_model(trainer.model)
        merged = merged.merge_and_unload() if peft_config is not None else merged
        merged.save_pretrained(final)
        tokenizer.save_pretrained(final)
    trainer.accelerator.wait_for_everyone()  # other processes read the folder next
    return final


def sft_rows(tokenizer: PreTrainedTokenizerBase, solved: list[TaskRow]) -> list[dict[str, Any]]:
    """The cold start's rows: prompt and completion (TRL tokenizes them), or, for episodes, tokenized rows whose loss
    covers the model's own turns only. An episode whose parts could not be cut trains on its whole text (said)."""
    if not any(t.solution_parts for t in solved):
        return [{"prompt": t.prompt, "completion": t.solution} for t in solved]
    whole = [t for t in solved if not t.solution_parts]
    if whole:
        print(
            f"[train] sft: {len(whole)} of {len(solved)} episodes train on their whole text (their template renders "
            "them so that the tools' part cannot be cut out)",
            flush=True,
        )
    eos = tokenizer.eos_token if isinstance(tokenizer.eos_token, str) else ""

    def parts(task: TaskRow) -> tuple[tuple[str, bool], ...]:
        text = task.solution or ""
        return task.solution_parts or ((text if text.endswith(eos) else text + eos, True),)

    return [episode_row(tokenizer, t.prompt, parts(t)) for t in solved]


def episode_row(
    tokenizer: PreTrainedTokenizerBase, prompt: str, parts: tuple[tuple[str, bool], ...]
) -> dict[str, list[int]]:
    """A tokenized row whose labels are -100 but on the trained parts: each piece tokenized on its own, as a rollout's
    prompt, turns and tool suffixes are."""

    def ids(text: str) -> list[int]:
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])

    input_ids, labels = ids(prompt), [-100] * len(ids(prompt))
    for text, trained in parts:
        piece = ids(text)
        input_ids += piece
        labels += piece if trained else [-100] * len(piece)
    return {"input_ids": input_ids, "labels": labels}
