"""examples/trl_env_grpo.py (shown in docs/integrations.md), as written but for the service's address: its episode
played the way GRPOTrainer drives the class, and --train on a tiny random Llama with Qwen2.5's chat template (TRL
parses tool calls in it), two GRPO steps on CPU, every session it opened closed (the service's /metrics)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_trl_env import sessions_metrics

ROOT = Path(__file__).resolve().parents[2]


def run_example(url: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    example = tmp_path / "trl_env_grpo.py"
    example.write_text((ROOT / "examples" / "trl_env_grpo.py").read_text().replace("http://127.0.0.1:8000", url))
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "TRL_EXPERIMENTAL_SILENCE": "1"}
    env.pop("GROUPSCORE_URL", None)
    return subprocess.run(
        [sys.executable, str(example), *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )


def test_the_example_plays_an_episode_and_closes_its_sessions(url, tmp_path):
    before = sessions_metrics(url)
    done = run_example(url, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == [
        "tools: ['list_files', 'read_file', 'shell', 'write_file']",
        "shell: 3",
        "reward: 1.0",
        "closed at the end: 0",
    ]
    after = sessions_metrics(url)
    assert after["open"] == before["open"]
    assert after["opened_total"] - before["opened_total"] == 1 + 4  # the probe, one group of GROUP
    assert after["closed_total"] - before["closed_total"] == 1 + 4


def test_the_example_trains_two_steps_with_trl_on_sessions(url, tmp_path):
    pytest.importorskip("trl")
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    from trl.chat_template_utils import qwen2_5_chat_template

    from groupscore.train.tiny_model import build_tokenizer

    tokenizer = build_tokenizer(['<tool_call>\n{"name": "shell", "arguments": {"command": "ls"}}\n</tool_call>'], 200)
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    tokenizer.eos_token = "<|im_end|>"
    tokenizer.chat_template = qwen2_5_chat_template
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=8192,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(0)
    model_dir = tmp_path / "tiny"
    LlamaForCausalLM(config).save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    before = sessions_metrics(url)
    done = run_example(url, tmp_path, "--train", str(model_dir))
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert "'rewards/GroupscoreEnv/mean'" in lines[-2], lines  # the first step's reward, read from the sessions
    assert lines[-1] == "closed at the end: 0"  # each batch closed its own
    after = sessions_metrics(url)
    assert after["open"] == before["open"]
    assert after["opened_total"] - before["opened_total"] == 1 + 2 * 4
    assert after["closed_total"] - before["closed_total"] == 1 + 2 * 4
