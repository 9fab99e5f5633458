"""The configured model: its folder or hub id checked before any other work, resolved to a loadable folder (the
bundled models built on first use), its tokenizer; and, once the run trains, its weights on the picked hardware."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from groupscore.train.config import ModelConfig
from groupscore.train.hardware import Hardware
from groupscore.train.localpaths import local_path, looks_local
from groupscore.train.task import TaskRow
from groupscore.train.tiny_model import ensure_tiny_model

if TYPE_CHECKING:
    from peft import LoraConfig
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


def hub_offline() -> bool:
    return any(
        os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")
        for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def hub_unreachable(timeout_s: float = 5.0) -> str | None:
    """Why the Hugging Face hub (HF_ENDPOINT, else huggingface.co) cannot be reached, or None when it answers."""
    import httpx

    endpoint = os.environ.get("HF_ENDPOINT", "").strip() or "https://huggingface.co"
    try:
        httpx.head(endpoint, timeout=timeout_s)
    except (httpx.HTTPError, httpx.InvalidURL, ImportError) as exc:  # ImportError: a SOCKS proxy without socksio
        return f"{endpoint}: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
    return None


def check_model_available(model: ModelConfig, config_dir: Path | None = None) -> None:
    """Before any other work: a folder that is not there is one line naming it; a hub id that cannot load offline is
    one line saying how to fetch it ahead, and naming the folder looked for first; online, an uncached hub id costs
    one request to the hub (is it there at all?) before anything else goes to the network.
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
    from huggingface_hub import try_to_load_from_cache

    cached = isinstance(try_to_load_from_cache(name, "config.json"), str)
    looked = " or ".join(dict.fromkeys(str(folder / name) for folder in (base, Path.cwd())))
    if not hub_offline():
        # a hub id: downloaded on first use, like any Hugging Face tool; but a hub that cannot be reached would cost
        # a minute of retries and a page of tracebacks before the same news
        unreachable = None if cached else hub_unreachable()
        if unreachable:
            raise FileNotFoundError(
                f"model.path: {name} is not a local folder (no {looked}), not in the local Hugging Face cache, and "
                f"the hub cannot be reached ({unreachable}); give a model folder, or fetch it ahead on a machine that "
                f"reaches the hub (`hf download {name}`)"
            )
        return
    if not cached:
        raise FileNotFoundError(
            f"model.path: {name} is not a local folder (no {looked}), and not in the local Hugging Face cache "
            f"while HF_HUB_OFFLINE is set; fetch it ahead with `hf download {name}` (older huggingface_hub: "
            f"`huggingface-cli download {name}`), or unset HF_HUB_OFFLINE"
        )


def task_corpus(tasks: list[TaskRow]) -> list[str]:
    return [t.prompt + (t.solution or "") for t in tasks]


def resolve_model(model: ModelConfig, tasks: list[TaskRow], cache_dir: Path, seed: int) -> str:
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
