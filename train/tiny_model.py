"""The bundled tiny model: a tokenizer trained on the task's text and a small random Llama, built once and cached."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

SPECIAL_TOKENS = ["<pad>", "<s>", "</s>", "<unk>"]


class TinyModelSpec(BaseModel):
    """Shape of the tiny Llama; its hash (with the corpus) names the cache folder."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    vocab_size: int = Field(default=96, ge=len(SPECIAL_TOKENS) + 8, le=4096)
    hidden_size: int = Field(default=64, ge=8, le=1024)
    intermediate_size: int = Field(default=192, ge=8, le=4096)
    num_layers: int = Field(default=2, ge=1, le=12)
    num_heads: int = Field(default=4, ge=1, le=32)
    max_positions: int = Field(default=128, ge=16, le=4096)
    tools: bool = Field(default=False, description="A chat template with tool calls (TOOL_TEMPLATE), for env tasks.")


# A compact template in Qwen2.5's tool-call format (`<tool_call>{json}</tool_call>`), its markers single tokens.
TOOL_MARKERS = ["<|system|>", "<|user|>", "<|assistant|>", "<|tool|>", "<tool_call>", "</tool_call>"]
TOOL_TEMPLATE = (
    "{%- for m in messages -%}"
    "{%- if m['role'] == 'assistant' -%}<|assistant|>{{ m['content'] }}"
    "{%- for c in (m['tool_calls'] if m['tool_calls'] is defined and m['tool_calls'] else []) -%}"
    "<tool_call>{{ {'name': c['function']['name'], 'arguments': c['function']['arguments']} | tojson }}</tool_call>"
    "{%- endfor -%}</s>"
    "{%- else -%}<|{{ m['role'] }}|>{{ m['content'] }}{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|assistant|>{%- endif -%}"
)


def build_tokenizer(corpus: list[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """A BPE tokenizer over the corpus that keeps every digit its own token, so numbers stay learnable."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    # Metaspace keeps spaces (decoding is exact); Digits splits numbers into single digits.
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Metaspace(prepend_scheme="never"), pre_tokenizers.Digits(individual_digits=True)]
    )
    tok.decoder = decoders.Metaspace(prepend_scheme="never")
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, show_progress=False, initial_alphabet=list("0123456789")
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        padding_side="left",
    )


def tiny_model_dir(spec: TinyModelSpec, corpus: list[str], cache_dir: Path, seed: int) -> Path:
    shape = spec.model_dump(exclude=set() if spec.tools else {"tools"})  # the same names as before `tools` existed
    key = json.dumps({"spec": shape, "seed": seed, "corpus": sorted(set(corpus))}, sort_keys=True)
    return cache_dir / f"tiny-llama-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def ensure_tiny_model(spec: TinyModelSpec, corpus: list[str], cache_dir: Path, seed: int) -> Path:
    """Build (first use) or reuse the tiny model for this corpus; returns a folder loadable by from_pretrained."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    out = tiny_model_dir(spec, corpus, cache_dir, seed)
    if (out / "config.json").exists() and (out / "tokenizer.json").exists():
        return out
    tokenizer = build_tokenizer(corpus, spec.vocab_size)
    if spec.tools:
        tokenizer.add_tokens(TOOL_MARKERS)
        tokenizer.chat_template = TOOL_TEMPLATE
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_heads,
        max_position_embeddings=spec.max_positions,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    tmp = out.with_name(out.name + ".tmp")
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    tmp.rename(out)  # atomic: a half-written cache is never picked up
    return out
