"""`groupscore eval CONFIG.yaml`: run a model over a taskset (train/taskset_eval.py), registered on the command."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def add_eval_command(sub: Any) -> None:
    p = sub.add_parser(
        "eval",
        help="run a model over a taskset: pass@k, the reward distribution, which tasks GRPO can learn from",
        description="K rollouts of each task of a `groupscore train` config's taskset (environment tasks run whole "
        "episodes in sessions; single-turn tasks are scored by the service), with the config's model, --model, or "
        "the model behind an OpenAI-compatible --endpoint. Writes every rollout, a summary and the learnable tasks' "
        "ids to --out. Exit status 1 when any rollout was infra_error (left out of the numbers).",
    )
    p.add_argument("config", type=Path, help="a `groupscore train` config (its model, taskset, service, env)")
    p.add_argument(
        "--model",
        default=None,
        help="a model folder or hub id instead of the config's model; with --endpoint, the served model's name "
        "(default: the one the endpoint lists)",
    )
    p.add_argument(
        "--endpoint",
        default=None,
        metavar="URL",
        help="an OpenAI-compatible server's base URL (vLLM, SGLang, `transformers serve`, a hosted API: "
        "http://127.0.0.1:8000/v1); its key from OPENAI_API_KEY",
    )
    p.add_argument("--split", choices=("eval", "train", "all"), default="eval", help="which tasks (default: eval)")
    p.add_argument("-n", "--tasks", type=int, default=None, help="at most N tasks, drawn with the config's seed")
    p.add_argument("-k", "--rollouts", type=int, default=None, help="rollouts per task (default: eval.samples)")
    p.add_argument("--temperature", type=float, default=None, help="sampling temperature (default: eval's)")
    p.add_argument("--out", type=Path, default=None, help="where to write (default: RUN_DIR/eval-SPLIT)")
    p.add_argument("--set", action="append", default=[], metavar="KEY.PATH=VALUE", help="override a config value")
    p.set_defaults(func=_eval)


def _eval(args: argparse.Namespace) -> int:
    from groupscore.train.taskset_eval import eval_command

    for name in ("tasks", "rollouts"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise ValueError(f"--{name} must be at least 1 (got {value})")
    return eval_command(
        args.config,
        args.set,
        model=args.model,
        split=args.split,
        tasks=args.tasks,
        k=args.rollouts,
        temperature=args.temperature,
        out=args.out,
        endpoint=args.endpoint,
    )
