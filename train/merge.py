"""The release blend: selected GRPO weights and cold-start weights mixed at a ratio, an easy step back from RL."""

from __future__ import annotations

from pathlib import Path


def merge_weights(selected: Path, cold_start: Path, ratio: float, out_dir: Path) -> Path:
    """out = ratio * selected + (1 - ratio) * cold_start, tensor by tensor; both must share one architecture."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    policy = AutoModelForCausalLM.from_pretrained(selected, dtype=torch.float32)
    base = AutoModelForCausalLM.from_pretrained(cold_start, dtype=torch.float32)
    base_state = base.state_dict()
    merged = {}
    for name, tensor in policy.state_dict().items():
        if name not in base_state or base_state[name].shape != tensor.shape:
            raise ValueError(f"merge: {name} differs between {selected} and {cold_start}; cannot blend")
        merged[name] = ratio * tensor + (1.0 - ratio) * base_state[name]
    policy.load_state_dict(merged)
    policy.save_pretrained(out_dir)
    AutoTokenizer.from_pretrained(selected).save_pretrained(out_dir)
    return out_dir
