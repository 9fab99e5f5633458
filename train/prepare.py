"""Everything a run needs before any model weights load, in one pass from the config: the model and the taskset's
files checked, the user's reward functions loaded, each source's rows read (data.py) and made tasks (taskset.py),
the reward functions checked against the rows' columns, the hardware picked, the model resolved, each prompt rendered
(prompts.py); all of it handed on as `Prepared`. The dry run and the run both start here.

The order is the order of the checks, each failure one line (exit code 2): first what needs nothing but this machine
(the model's folder, report_to, the reward functions import, the taskset's files exist), then what may need the
network (a hub model's tokenizer before a hub dataset is read, the rows, the reward functions' signatures against the
rows' columns, the chat template).
"""

from __future__ import annotations

import importlib.util
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

from groupscore.train.config import TrainConfig
from groupscore.train.data import all_local, check_local_sources
from groupscore.train.hardware import Hardware, pick_hardware
from groupscore.train.models import check_model_available, load_tokenizer, resolve_model
from groupscore.train.prompts import render_prompts
from groupscore.train.task import TaskRow
from groupscore.train.taskset import load_taskset
from groupscore.train.user_rewards import UserReward, check_signatures, load_reward_functions


@dataclass
class Prepared:
    """Everything checked before any model weights load: the hardware, the tasks (rendered prompts), the model's
    local folder or hub id, and the user's reward functions."""

    hardware: Hardware
    train_tasks: list[TaskRow]
    eval_tasks: list[TaskRow]
    model_path: str
    reward_functions: list[UserReward]
    tool_format: str | None = None  # an environment taskset: how the model writes tool calls (toolcalls.py)


def prepare(config: TrainConfig) -> Prepared:
    quiet_libraries()
    # 1. on this machine alone: the model's folder, report_to, the reward functions (they import), the taskset's files
    check_model_available(config.model, config.config_dir)
    check_report_to(config.report_to)
    spec = config.service.reward
    reward_functions = load_reward_functions(config.rewards, [c.name for c in spec.components] if spec else [])
    check_local_sources(config.taskset)
    # 2. the data: a hub model's tokenizer answers before a hub dataset is read; each source's rows made tasks
    tokenizer = None
    if config.model.path is not None and not all_local(config.taskset):
        tokenizer = load_tokenizer(config.model.path)
    train_tasks, eval_tasks = load_taskset(config.taskset, config.seed)
    # 3. the reward functions take what GRPO will pass them (the rows' columns); a step's prompts fit the taskset
    check_signatures(reward_functions, train_tasks)
    if config.grpo is not None and config.grpo.prompts_per_step > len(train_tasks):
        raise ValueError(
            f"grpo.prompts_per_step: {config.grpo.prompts_per_step} prompts a step, but the taskset has "
            f"{len(train_tasks)} train prompts; lower it or add rows"
        )
    # 4. the hardware, the model (the tiny one is built from the tasks' text), each prompt rendered once
    from transformers import set_seed

    set_seed(config.seed)
    grpo_vllm = config.grpo.use_vllm if config.grpo else False
    hardware = pick_hardware(config.device, config.precision, config.threads, grpo_vllm)
    model_path = resolve_model(config.model, train_tasks + eval_tasks, config.run_dir / "cache", config.seed)
    tokenizer = tokenizer or load_tokenizer(model_path)
    if config.taskset.train.env is not None:  # episodes with tools: the template must say how the model calls them
        from groupscore.train.env_tasks import render_env_tasks
        from groupscore.train.toolcalls import detect_format

        fmt = detect_format(tokenizer, config.env.tool_format)
        train_tasks, eval_tasks = (
            render_env_tasks(train_tasks, tokenizer, fmt),
            render_env_tasks(eval_tasks, tokenizer, fmt),
        )
        return Prepared(hardware, train_tasks, eval_tasks, model_path, reward_functions, fmt)
    system_prompt = config.taskset.system_prompt
    train_tasks = render_prompts(train_tasks, tokenizer, config.model.chat_template, system_prompt)
    eval_tasks = render_prompts(eval_tasks, tokenizer, config.model.chat_template, system_prompt)
    return Prepared(hardware, train_tasks, eval_tasks, model_path, reward_functions)


def quiet_libraries() -> None:
    """TRL's and transformers' chatter stays quiet. Whether anything downloads is the user's choice (HF_HUB_OFFLINE):
    nothing here sets it."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # else a warning at every fork after a tokenizer ran
    import datasets
    import transformers

    # Our progress bar and log lines say what happens; per-map and per-shard bars would bury them.
    datasets.disable_progress_bars()
    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    # TRL 1.x still calls the gradient_checkpointing_* names that transformers 5 renamed; nothing for a user to fix.
    warnings.filterwarnings("ignore", message=r".*gradient_checkpointing.*deprecated", category=FutureWarning)


def check_report_to(names: Sequence[str]) -> None:
    needs = {"tensorboard": ("tensorboard", "tensorboardX"), "wandb": ("wandb",)}
    for name in names:
        if not any(importlib.util.find_spec(module) for module in needs[name]):
            raise ValueError(f"report_to: {name} needs its package (pip install {name}); or leave it out of report_to")
