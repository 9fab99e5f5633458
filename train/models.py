"""Resolve the configured model to a local folder and load it (model, tokenizer) on the picked hardware."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from groupscore.train.config import ModelConfig
from groupscore.train.hardware import Hardware
from groupscore.train.taskset import Task
from groupscore.train.tiny_model import ensure_tiny_model

if TYPE_CHECKING:
    from peft import LoraConfig
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


def set_offline() -> None:
    """Nothing downloads at run time, TRL/transformers skip their telemetry look-ups, and their chatter stays quiet."""
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY"):
        os.environ.setdefault(var, "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import datasets
    import transformers

    # Our progress bar and log lines say what happens; per-map and per-shard bars would bury them.
    datasets.disable_progress_bars()
    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    # TRL 1.x still calls the gradient_checkpointing_* names that transformers 5 renamed; nothing for a user to fix.
    warnings.filterwarnings("ignore", message=r".*gradient_checkpointing.*deprecated", category=FutureWarning)


def task_corpus(tasks: list[Task]) -> list[str]:
    return [t.prompt + (t.solution or "") for t in tasks]


def resolve_model(model: ModelConfig, tasks: list[Task], cache_dir: Path, seed: int) -> str:
    """A local folder (built on first use for the bundled models) or a hub id already in the local HF cache."""
    if model.tiny is not None:
        return str(ensure_tiny_model(model.tiny, task_corpus(tasks), cache_dir, seed))
    if model.smollm2:
        from groupscore.train.smollm2 import ensure_smollm2

        return str(ensure_smollm2(cache_dir))
    if model.path is None:  # ModelConfig refuses a config without a source
        raise ValueError("model: give one of path, tiny, smollm2")
    return model.path


def load_model(path: str, hardware: Hardware) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    tokenizer.padding_side = "left"  # generation pads on the left
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(path, dtype=hardware.torch_dtype)
    return model.to(hardware.device), tokenizer  # type: ignore[arg-type]  # transformers types .to() oddly


def lora_config(model: ModelConfig) -> LoraConfig | None:
    if model.lora is None:
        return None
    from peft import LoraConfig

    return LoraConfig(
        r=model.lora.r,
        lora_alpha=model.lora.alpha,
        lora_dropout=model.lora.dropout,
        target_modules=model.lora.target_modules,
        task_type="CAUSAL_LM",
    )


def apply_chat_template(model_path: str, tasks: list[Task]) -> list[Task]:
    """Prompts rendered once as a user turn plus the assistant header, so every stage sees the same text."""
    from dataclasses import replace

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    if not tokenizer.chat_template:
        raise ValueError(f"model.chat_template: the tokenizer at {model_path} has no chat template")
    return [replace(t, prompt=_rendered(tokenizer, t.prompt)) for t in tasks]


def _rendered(tokenizer: PreTrainedTokenizerBase, prompt: str) -> str:
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
    )
    if not isinstance(text, str):  # tokenize=False renders text; anything else is a transformers change to notice
        raise TypeError(f"apply_chat_template(tokenize=False) returned {type(text).__name__}, not text")
    return text
