"""TRL: multi-turn GRPO on groupscore environments, through TRL's own `environment_factory`.

    python trl_env_grpo.py                         # play one episode the way GRPOTrainer drives the environment
    python trl_env_grpo.py --train MODEL_OR_PATH   # two GRPO steps (trl; a model whose chat template takes tools)

Each rollout is a session on the service (its own jail): the model's tool calls run there, the task's checkers score
the state it leaves, and every session is closed at the end of its batch. Needs a running service (`groupscore
serve`): --url URL, else GROUPSCORE_URL, else http://127.0.0.1:8000.
"""

import argparse
import os
import sys

import httpx

from groupscore.client.trl_env import environment_factory

TASKS = ["demo:count-errors"]  # SOURCE:TASK_ID: `groupscore env list demo` lists the bundled ones
GROUP = 4  # GRPOConfig.num_generations: the sessions of one task, opened in one request


def check_service(url: str) -> None:
    """Stop with one line when no service answers (not a traceback once the client's retries are spent)."""
    try:
        httpx.get(url.rstrip("/") + "/healthz", timeout=3.0).raise_for_status()
    except httpx.HTTPError as exc:
        sys.exit(
            f"trl_env_grpo.py: no groupscore service answers at {url} ({type(exc).__name__}); start one with "
            "`groupscore serve`, or give its address with --url or GROUPSCORE_URL"
        )


def play(Env) -> None:
    """What GRPOTrainer does with the class: an instance per rollout, reset(**row), tool calls, get_reward()."""
    env = Env()
    env.reset(**Env.rows[0])
    print("tools:", sorted(s["function"]["name"] for s in Env.tool_schemas))
    print("shell:", env.shell(command="grep -c ' ERROR ' app.log > errors.txt && cat errors.txt").strip())
    print("reward:", env.get_reward())  # the session is scored and closed here


def train(model: str, Env) -> None:
    import torch
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    on_gpu = torch.cuda.is_available()
    config = GRPOConfig(
        output_dir="grpo-env-out",
        max_steps=2,
        per_device_train_batch_size=GROUP,
        num_generations=GROUP,
        max_completion_length=256,
        max_tool_calling_iterations=8,
        logging_steps=1,
        report_to=[],
        bf16=on_gpu,
        use_cpu=not on_gpu,
        save_strategy="no",
    )
    data = Dataset.from_list(Env.rows * GROUP)  # {"prompt": the task's messages, "task": "demo:count-errors"}
    trainer = GRPOTrainer(model=model, args=config, train_dataset=data, environment_factory=Env)
    trainer.train()
    print({k: v for k, v in trainer.state.log_history[0].items() if k.startswith(("rewards/", "tools/"))})


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("GROUPSCORE_URL") or "http://127.0.0.1:8000")
    parser.add_argument("--train", metavar="MODEL", help="a model folder or hub id: run two GRPO steps with it")
    args = parser.parse_args()
    check_service(args.url)
    # One method per tool of the tasks (typed and documented: TRL reads them with inspect); Env.rows are the dataset.
    Env = environment_factory(args.url, TASKS, group_size=GROUP)
    try:
        if args.train:
            train(args.train, Env)
        else:
            play(Env)
    finally:
        print("closed at the end:", Env.close_all())  # 0: every batch closed its own sessions
