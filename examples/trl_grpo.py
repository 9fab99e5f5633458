"""TRL: three groupscore rewards as separate reward functions, one request per batch, weighted like the spec.

    python trl_grpo.py                         # score a sample batch the way GRPOTrainer calls the functions
    python trl_grpo.py --train MODEL_OR_PATH   # two GRPO steps (needs trl and the model; CPU when no GPU)

Needs a running service (`groupscore serve`): --url URL, else GROUPSCORE_URL, else http://127.0.0.1:8000.
"""

import argparse
import os
import sys

import httpx

from groupscore.client.adapters import trl_reward_funcs, trl_reward_weights

SPEC = {
    "components": [
        {"name": "correct", "weight": 1.0},
        {"name": "format", "weight": 0.2, "verifier": "format", "params": {"tags": ["think", "answer"]}},
        {"name": "short", "weight": 0.1, "verifier": "length", "params": {"unit": "chars", "max": 400}},
    ]
}
reward_weights = trl_reward_weights(SPEC)  # GRPOConfig(reward_weights=...): TRL's sum is the spec's weighted mean


def check_service(urls: list[str]) -> None:
    """Stop with one line when no service answers (not a traceback once the client's retries are spent)."""
    for url in urls:
        try:
            httpx.get(url.rstrip("/") + "/healthz", timeout=3.0).raise_for_status()
        except httpx.HTTPError as exc:
            sys.exit(
                f"trl_grpo.py: no groupscore service answers at {url} ({type(exc).__name__}); start one with "
                "`groupscore serve`, or give its address with --url or GROUPSCORE_URL"
            )


def sample_batch(reward_funcs: list) -> None:
    prompts = ["What is 6 * 7?", "What is 2 + 2?"]
    completions = ["<think>6*7</think><answer>\\boxed{42}</answer>", "<answer>\\boxed{5}</answer>"]
    for func, weight in zip(reward_funcs, reward_weights):
        print(func.__name__, weight, func(prompts=prompts, completions=completions, answer=["42", "4"]))


def train(model: str, reward_funcs: list) -> None:
    import torch
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    data = Dataset.from_list([{"prompt": "What is 6 * 7? Answer in \\boxed{}.", "answer": "42"}] * 8)
    on_gpu = torch.cuda.is_available()
    config = GRPOConfig(
        output_dir="grpo-out",
        max_steps=2,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=32,
        reward_weights=reward_weights,
        logging_steps=1,
        report_to=[],
        bf16=on_gpu,
        use_cpu=not on_gpu,
        save_strategy="no",
    )
    trainer = GRPOTrainer(model=model, reward_funcs=reward_funcs, args=config, train_dataset=data)
    trainer.train()
    print({k: v for k, v in trainer.state.log_history[0].items() if k.startswith("rewards/")})


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--url",
        default=os.environ.get("GROUPSCORE_URL") or "http://127.0.0.1:8000",
        help="the service's base URL, or several separated by commas (default: GROUPSCORE_URL, else "
        "http://127.0.0.1:8000)",
    )
    parser.add_argument("--train", metavar="MODEL", help="a model folder or hub id: run two GRPO steps with it")
    args = parser.parse_args()
    urls = [u.strip() for u in args.url.split(",") if u.strip()]
    check_service(urls)
    reward_funcs = trl_reward_funcs(urls, SPEC, verifier="math")  # groupscore_math_correct, _format, _short
    if args.train:
        train(args.train, reward_funcs)
    else:
        sample_batch(reward_funcs)
