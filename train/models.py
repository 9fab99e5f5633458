"""Resolve the configured model to a local folder and load it (model, tokenizer) on the picked hardware."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from groupscore.train.config import ModelConfig
from groupscore.train.hardware import Hardware
from groupscore.train.localpaths import local_path, looks_local
from groupscore.train.taskset import Task
from groupscore.train.tiny_model import ensure_tiny_model

if TYPE_CHECKING:
    from peft import LoraConfig
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


def quiet_libraries() -> None:
    """TRL's and transformers' chatter stays quiet. Whether anything downloads is the user's choice (HF_HUB_OFFLINE):
    nothing here sets it."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # else a warning at every fork after a tokenizer ran
    import datasets
    import transformers

    # Our progress bar and log lines say what happens; per-map and per-shard bars would bury them.
    datasets.disable_progress_bars()
    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    # TRL 1.x still calls the gradient_checkpointing_* names that transformers 5 renamed; nothing for a user to fix.
    warnings.filterwarnings("ignore", message=r".*gradient_checkpointing.*deprecated", category=FutureWarning)


def hub_offline() -> bool:
    return any(
        os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")
        for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def check_model_available(model: ModelConfig, config_dir: Path | None = None) -> None:
    """Before any other work, and before any network: a folder that is not there is one line naming it; a hub id
    that cannot load offline is one line saying how to fetch it ahead, and naming the folder looked for first.
    `config_dir`: the config file's folder (a relative path in the file starts there; else the current directory)."""
    if model.path is None:
        return
    base = config_dir or Path.cwd()
    name = model.path
    if looks_local(name, [base, Path.cwd()]):
        folder = local_path(name, base)
        if folder.is_dir():
            return
        if folder.exists():
            raise FileNotFoundError(f"model.path: {folder} is a file; give the folder holding config.json")
        raise FileNotFoundError(f"model.path: no model folder at {folder}")
    if (base / name).is_dir():
        return
    if not hub_offline():
        return  # a hub id: downloaded on first use, like any Hugging Face tool
    from huggingface_hub import try_to_load_from_cache

    if not isinstance(try_to_load_from_cache(name, "config.json"), str):
        looked = " or ".join(dict.fromkeys(str(folder / name) for folder in (base, Path.cwd())))
        raise FileNotFoundError(
            f"model.path: {name} is not a local folder (no {looked}), and not in the local Hugging Face cache "
            f"while HF_HUB_OFFLINE is set; fetch it ahead with `hf download {name}` (older huggingface_hub: "
            f"`huggingface-cli download {name}`), or unset HF_HUB_OFFLINE"
        )


def task_corpus(tasks: list[Task]) -> list[str]:
    return [t.prompt + (t.solution or "") for t in tasks]


def resolve_model(model: ModelConfig, tasks: list[Task], cache_dir: Path, seed: int) -> str:
    """A local folder (built on first use for the bundled models) or a hub id already in the local HF cache."""
    if model.tiny is not None:
        return str(ensure_tiny_model(model.tiny, task_corpus(tasks), cache_dir, seed))
    if model.smollm2:
        from groupscore.train.smollm2 import ensure_smollm2

        return str(ensure_smollm2())  # one conversion for every run (the shared cache), not one per run folder
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


def load_tokenizer(path: str) -> PreTrainedTokenizerBase:
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(path)
    except OSError as exc:  # a folder without tokenizer files, a hub id that does not exist
        raise ValueError(
            f"model.path: cannot load a tokenizer from {path} ({str(exc).splitlines()[0][:200]})"
        ) from None


def render_prompts(
    tasks: list[Task], tokenizer: PreTrainedTokenizerBase, chat_template: bool | str, system_prompt: str | None
) -> list[Task]:
    """Each prompt rendered once (the system prompt, the conversation or the user turn, the assistant header), so
    SFT, preflight, GRPO and evaluation all see the same text. Without a chat template: the system prompt and the
    user text, a blank line apart; a conversation then has nothing to render it."""
    from dataclasses import replace

    use_template = bool(tokenizer.chat_template) if chat_template == "auto" else bool(chat_template)
    if use_template and not tokenizer.chat_template:
        raise ValueError(
            f"model.chat_template: true, but the tokenizer of {tokenizer.name_or_path} has no chat template; use an "
            "instruct model or set model.chat_template: false"
        )
    out = []
    for task in tasks:
        if use_template:
            turns = [{"role": m.role, "content": m.content} for m in task.messages or ()] or [
                {"role": "user", "content": task.prompt}
            ]
            if system_prompt is not None and turns[0]["role"] != "system":
                turns.insert(0, {"role": "system", "content": system_prompt})
            out.append(replace(task, prompt=_rendered(tokenizer, turns)))
        elif task.messages is not None and len(task.messages) > 1:
            raise ValueError(
                f"task {task.id}: a conversational prompt needs a chat template, and {tokenizer.name_or_path} has none "
                "(model.chat_template); give plain-text prompts or an instruct model"
            )
        else:
            text = task.prompt if system_prompt is None else f"{system_prompt}\n\n{task.prompt}"
            out.append(replace(task, prompt=text))
    return out


def _rendered(tokenizer: PreTrainedTokenizerBase, turns: list[dict[str, str]]) -> str:
    text = tokenizer.apply_chat_template(turns, tokenize=False, add_generation_prompt=True)
    if not isinstance(text, str):  # tokenize=False renders text; anything else is a transformers change to notice
        raise TypeError(f"apply_chat_template(tokenize=False) returned {type(text).__name__}, not text")
    return text
