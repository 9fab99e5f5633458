"""What one GRPO optimizer step of each recipe under recipes/ holds in memory, counted without a GPU.

No GPU is available to this project's CI, and no published figure covers every recipe's set-up, so this counts the
bytes instead: each recipe's model is built from its published architecture (Qwen2.5-0.5B-Instruct and
Qwen2.5-Coder-0.5B-Instruct share one: hidden 896, 24 layers, 14 query / 2 KV heads, MLP 4864, vocabulary 151,936,
tied embeddings) with random weights, nothing downloaded, in bf16 (what the trainer loads on a GPU), and one
training step is run the way TRL's GRPOTrainer runs it at the recipe's settings: gradient checkpointing on (GRPOConfig's
default), TRL's fused LM head (log-probs and entropy in tiles, no full logits), the reference model's no-grad pass
(full weights: a second copy; LoRA: the base with adapters off), the policy's forward and backward on one
micro-batch, AdamW's step. The step runs on FakeTensors (shapes and dtypes, no arithmetic) under a dispatch mode that
counts the bytes of every tensor storage from the op that creates it until it is freed, and keeps the peak of the
sum. A first step, not counted, creates the optimizer state, so the counted second step is the steady state.

What this is and is not: the byte counts are exact for the ops this torch/transformers/TRL install runs on the CPU.
On a GPU two parts run other kernels: attention (the CPU trace uses the CPU flash kernel, which like the CUDA
flash/efficient kernels keeps no seq x seq matrix) and TRL's fused LM head (a Triton kernel on CUDA, tiles of the
valid positions; the CPU path traced here scores every position in 4096 x 32768 tiles). Not counted: the CUDA
context and libraries (~0.5-1 GB), allocator fragmentation and cache, and vLLM's reservation when vLLM generates
(TRL colocated: `vllm_gpu_memory_utilization`, default 0.3 of the card's memory, taken up front). Generation without
vLLM (HF `generate`) holds the KV cache given below (arithmetic from the architecture, not traced).

    flock /tmp/bench.lock .venv/bin/python bench/recipe_memory_bench.py [--prompt-tokens 256] [--micro 8] [--json out]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import warnings
import weakref
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.weak import WeakIdKeyDictionary

ROOT = Path(__file__).resolve().parent.parent
RECIPES = [
    "gsm8k-qwen2.5-0.5b",
    "deepmath-qwen2.5-0.5b",
    "mbpp-qwen2.5-coder-0.5b",
    "tutor-qwen2.5-0.5b",
    "bfcl-qwen2.5-0.5b",
]
# Prompts longer than --prompt-tokens: BFCL's tool list (32 functions, a median of ~15.8k characters of JSON) is in
# every prompt of the multi-turn recipe.
PROMPT_TOKENS = {"bfcl-qwen2.5-0.5b": 4096}
# Qwen2.5-0.5B-Instruct's and Qwen2.5-Coder-0.5B-Instruct's published config.json values (identical for memory).
QWEN25_05B = {
    "hidden_size": 896,
    "intermediate_size": 4864,
    "num_hidden_layers": 24,
    "num_attention_heads": 14,
    "num_key_value_heads": 2,
    "vocab_size": 151936,
    "tie_word_embeddings": True,
    "max_position_embeddings": 32768,
    "rope_theta": 1000000.0,
    "rms_norm_eps": 1e-6,
}
GIB = 1024**3


def build_model(lora: dict[str, Any] | None, temperature: float) -> torch.nn.Module:
    """The policy as TRL prepares it: fused LM head on the base model, then PEFT (if any), checkpointing on."""
    from transformers import Qwen2Config, Qwen2ForCausalLM
    from trl.trainer.utils import add_fused_lm_head

    model = Qwen2ForCausalLM(Qwen2Config(**QWEN25_05B))
    model.config.use_cache = False
    add_fused_lm_head(model, temperature=temperature, outputs=("log_probs", "entropy"))
    if lora is not None:
        from peft import LoraConfig, get_peft_model

        # PEFT moves each new adapter to its base layer's device and dtype (here already the same: CPU, bf16, the
        # default dtype while building); Module.to swaps FakeTensor parameters, which they refuse, so `to` is a
        # no-op while the adapters are added.
        module_to = torch.nn.Module.to
        torch.nn.Module.to = lambda self, *args, **kwargs: self  # type: ignore[method-assign]
        try:
            model = get_peft_model(
                model,
                LoraConfig(
                    r=lora["r"],
                    lora_alpha=lora["alpha"],
                    lora_dropout=lora["dropout"],
                    target_modules=lora["target_modules"],
                    task_type="CAUSAL_LM",
                ),
            )
        finally:
            torch.nn.Module.to = module_to  # type: ignore[method-assign]
    model.gradient_checkpointing_enable()  # GRPOConfig's default; transformers 5: use_reentrant=False
    if lora is not None:
        model.enable_input_require_grads()  # what GRPOTrainer does for PEFT with checkpointing
    model.train()
    return model


class LiveBytes(TorchDispatchMode):
    """The bytes of every tensor storage alive, followed op by op, and the peak of their sum. A storage is counted
    once (views share it) from the op that makes it until it is freed; `hold` counts what exists beforehand."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: WeakIdKeyDictionary = WeakIdKeyDictionary()
        self.current = 0
        self.peak = 0

    def hold(self, tensors: Iterable[torch.Tensor]) -> None:
        for tensor in tensors:
            self._count(tensor)
        self.peak = max(self.peak, self.current)

    def _count(self, tensor: torch.Tensor) -> None:
        storage = tensor.untyped_storage()
        if storage not in self.seen:
            size = storage.nbytes()
            self.seen[storage] = size
            self.current += size
            weakref.finalize(storage, self._free, size)

    def _free(self, size: int) -> None:
        self.current -= size

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for item in tree_flatten(out)[0]:
            if isinstance(item, torch.Tensor):
                self._count(item)
        self.peak = max(self.peak, self.current)
        return out


def token_logps(model: torch.nn.Module, ids: torch.Tensor, mask: torch.Tensor, completion: int, head: bool) -> Any:
    """Per-token log-probs of the completion as TRL asks for them (fused LM head, with the entropy), or with
    `head=False` a stand-in that stops at the backbone's last hidden states: the same backbone, none of the LM head's
    working memory (on a GPU the head is a Triton kernel this CPU trace cannot run)."""
    if head:
        labels = ids.clone()
        labels[:, :-completion] = -100
        out = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True)
        return out.log_probs[:, -completion:], out.entropy[:, -completion:]
    hidden = model.get_decoder()(input_ids=ids, attention_mask=mask).last_hidden_state[:, -completion:]
    return hidden.float().mean(-1), None


def grpo_step(
    model: torch.nn.Module,
    ref: torch.nn.Module | None,
    opt: torch.optim.Optimizer,
    rollouts: int,
    micro: int,
    prompt_tokens: int,
    completion_tokens: int,
    beta: float,
    head: bool = True,
) -> None:
    """One optimizer step: the reference pass over the generation batch (no grad, in micro-batches, as TRL does),
    then forward and backward per micro-batch (gradient accumulation), then AdamW. Every completion runs to the cap
    (TRL pads a micro-batch to its longest completion: one capped completion makes all of them that long)."""
    seq = prompt_tokens + completion_tokens
    ids = torch.randint(0, QWEN25_05B["vocab_size"], (micro, seq))
    mask = torch.ones(micro, seq, dtype=torch.long)
    ref_logps = []
    if beta > 0:
        with torch.no_grad():
            for _ in range(rollouts // micro):
                if ref is not None:
                    ref_logps.append(token_logps(ref, ids, mask, completion_tokens, head)[0])
                else:  # LoRA: the reference is the base model with the adapters off
                    with model.disable_adapter():  # type: ignore[operator]
                        ref_logps.append(token_logps(model, ids, mask, completion_tokens, head)[0])
    advantages = torch.randn(micro, 1)
    for i in range(rollouts // micro):
        logps, entropy = token_logps(model, ids, mask, completion_tokens, head)
        loss = -(torch.exp(logps - logps.detach()) * advantages).mean()
        if beta > 0:
            delta = ref_logps[i] - logps
            loss = loss + beta * (torch.exp(delta) - delta - 1).mean()
        if entropy is not None:
            loss = loss + 0.0 * entropy.mean()  # TRL computes the entropy on every pass
        loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def measure(recipe: str, prompt_tokens: int, micro_override: int | None, head: bool = True) -> dict[str, Any]:
    from torch._subclasses.fake_tensor import FakeTensorMode

    from groupscore.train.config import load_config

    cfg = load_config(ROOT / "recipes" / f"{recipe}.yaml")
    grpo = cfg.grpo
    prompt_tokens = PROMPT_TOKENS.get(recipe, prompt_tokens)
    if cfg.taskset.train.env is not None:  # episodes: the tokens after the prompt are the episode's budget
        grpo = grpo.model_copy(update={"max_completion_length": cfg.env.max_tokens})
    rollouts = grpo.prompts_per_step * grpo.num_generations
    micro = micro_override or grpo.micro_batch_size or rollouts
    lora = cfg.model.lora.model_dump() if cfg.model.lora is not None else None
    started = time.perf_counter()
    with FakeTensorMode():
        previous = torch.get_default_dtype()
        torch.set_default_dtype(torch.bfloat16)  # FakeTensor parameters cannot be cast in place: build them in bf16
        try:
            model = build_model(lora, grpo.temperature)
            ref = build_model(None, grpo.temperature).eval() if grpo.beta > 0 and lora is None else None
            if ref is not None:
                ref.requires_grad_(False)
        finally:
            torch.set_default_dtype(previous)
        trainable = [p for p in model.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(trainable, lr=grpo.learning_rate, foreach=False)
        args = (model, ref, opt, rollouts, micro, prompt_tokens, grpo.max_completion_length, grpo.beta, head)
        grpo_step(*args)  # creates the optimizer state; the tracked step below is the steady state
        weights = [*model.parameters(), *(ref.parameters() if ref is not None else [])]
        states = [t for state in opt.state.values() for t in state.values() if isinstance(t, torch.Tensor)]
        live = LiveBytes()
        live.hold(weights + states)
        held = live.current
        with live:
            grpo_step(*args)
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    ref_bytes = sum(p.numel() * p.element_size() for p in ref.parameters()) if ref is not None else 0
    state_bytes = sum(t.numel() * t.element_size() for t in states if t.dim() > 0)
    grad_bytes = sum(p.numel() * p.element_size() for p in trainable)
    n_params = sum(p.numel() for p in model.parameters())
    n_trainable = sum(p.numel() for p in trainable)
    layers, kv_heads = QWEN25_05B["num_hidden_layers"], QWEN25_05B["num_key_value_heads"]
    head_dim = QWEN25_05B["hidden_size"] // QWEN25_05B["num_attention_heads"]
    kv_bytes_per_token = 2 * layers * kv_heads * head_dim * 2  # K and V, bf16
    seq = prompt_tokens + grpo.max_completion_length
    return {
        "recipe": recipe,
        "model": cfg.model.path,
        "lora": lora,
        "rollouts_per_step": rollouts,
        "micro_batch": micro,
        "lm_head": "fused, CPU path" if head else "left out",
        "prompt_tokens": prompt_tokens,
        "completion_tokens": grpo.max_completion_length,
        "beta": grpo.beta,
        "params": n_params,
        "trainable_params": n_trainable,
        "reference_copy": ref is not None,
        "weight_bytes": weight_bytes,
        "reference_bytes": ref_bytes,
        "optimizer_state_bytes": state_bytes,
        "gradient_bytes": grad_bytes,
        "held_before_step_bytes": held,
        "peak_bytes": live.peak,
        "generate_kv_cache_bytes": rollouts * seq * kv_bytes_per_token,
        "seconds": round(time.perf_counter() - started, 1),
    }


def gib(n: float) -> str:
    return f"{n / GIB:.2f}"


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| recipe | micro-batch (rollouts/step) | tokens/seq | LM head | trainable params | weights (+ reference) "
        "| AdamW state | gradients | **peak of the step, GiB** | peak - weights - AdamW | HF-generate KV cache |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        weights = r["weight_bytes"] + r["reference_bytes"]
        ref = f" + {gib(r['reference_bytes'])}" if r["reference_bytes"] else ""
        lines.append(
            f"| {r['recipe']} | {r['micro_batch']} ({r['rollouts_per_step']}) "
            f"| {r['prompt_tokens']} + {r['completion_tokens']} | {r['lm_head']} | {r['trainable_params'] / 1e6:.1f} M "
            f"| {gib(r['weight_bytes'])}{ref} | {gib(r['optimizer_state_bytes'])} | {gib(r['gradient_bytes'])} "
            f"| **{gib(r['peak_bytes'])}** | {gib(r['peak_bytes'] - weights - r['optimizer_state_bytes'])} "
            f"| {gib(r['generate_kv_cache_bytes'])} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompt-tokens", type=int, default=256, help="prompt length assumed (chat template included)")
    parser.add_argument("--micro", type=int, nargs="*", default=[8], help="extra micro-batch sizes to count")
    parser.add_argument("--recipes", nargs="*", default=RECIPES)
    parser.add_argument("--head", choices=["fused", "none", "both"], default="both", help="LM head: traced, left out")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    warnings.filterwarnings("ignore", category=FutureWarning)
    import transformers
    import trl

    print(
        f"{platform.machine()}, Python {platform.python_version()}, torch {torch.__version__}, transformers "
        f"{transformers.__version__}, trl {trl.__version__}; prompt {args.prompt_tokens} tokens assumed",
        file=sys.stderr,
    )
    from groupscore.train.config import load_config

    rows = []
    for recipe in args.recipes:
        grpo = load_config(ROOT / "recipes" / f"{recipe}.yaml").grpo
        default = grpo.micro_batch_size or grpo.prompts_per_step * grpo.num_generations
        heads = {"fused": [True], "none": [False], "both": [True, False]}[args.head]
        for micro in [default, *[m for m in args.micro if m != default]]:
            for head in heads:
                row = measure(recipe, args.prompt_tokens, micro, head)
                rows.append(row)
                print(
                    f"{recipe} micro {row['micro_batch']}, LM head {row['lm_head']}: peak {gib(row['peak_bytes'])} "
                    f"GiB ({row['seconds']} s)",
                    file=sys.stderr,
                )
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
