"""The one GRPO trainer: TRL's GRPOTrainer on our rollouts (rollouts.py: completions scored by the service, or
episodes scored by sessions), and the one place it reaches into TRL's internals, checked before any model loads."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import torch
from trl import GRPOTrainer

from groupscore.train.batch import ScoredBatch, batch_stats, group_records
from groupscore.train.observe import JsonlWriter
from groupscore.train.rollouts import Rollouts
from groupscore.train.summary import BatchStats


def mask_unscored(output: dict[str, Any], masked: list[bool], gather: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """Zero the loss mask of the samples nothing judged, and recount the tokens the loss is divided by.

    Their advantage is 0 already (left out of the group statistics); masking them also drops their KL and entropy
    terms, as if they had not been sampled. Every process recounts (a gather), masked or not.
    """
    mask = output["completion_mask"]
    if len(masked) != mask.shape[0]:
        raise ValueError(f"{len(masked)} scored samples for {mask.shape[0]} generated ones")
    keep = torch.tensor([0 if m else 1 for m in masked], dtype=mask.dtype, device=mask.device)
    output["completion_mask"] = mask * keep.unsqueeze(1)
    loss_mask = output["completion_mask"] * output["tool_mask"] if "tool_mask" in output else output["completion_mask"]
    output["num_items_in_batch"] = gather(loss_mask.sum()).sum()


# The TRL internals this trainer is written against: the one method it overrides, and the one it calls (TRL's own
# single-turn generation, from the completions' rollout function). `check_trl_internals` refuses a TRL whose
# signatures moved, in one line, before any model loads.
TRL_INTERNALS = {
    "_generate_and_score_completions": ["self", "inputs"],
    "_generate_single_turn": [
        "self",
        "prompt_ids",
        "images",
        "multimodal_fields",
        "num_generations",
        "has_tool_images",
    ],
}


def check_trl_internals(trainer_class: type = GRPOTrainer) -> None:
    import inspect

    import trl

    for name, expected in TRL_INTERNALS.items():
        method = getattr(trainer_class, name, None)
        found = list(inspect.signature(method).parameters) if callable(method) else None
        if found != expected:
            raise RuntimeError(
                f"TRL {trl.__version__}'s GRPOTrainer.{name} is {found or 'gone'}, not {expected}: groupscore's "
                "trainer is written against TRL 1.16 (pip install 'trl>=1.16,<1.17')"
            )
    if "rollout_func" not in inspect.signature(trainer_class).parameters:
        raise RuntimeError(f"TRL {trl.__version__}'s GRPOTrainer takes no rollout_func: pip install 'trl>=1.16,<1.17'")


class GroupGRPOTrainer(GRPOTrainer):
    """TRL's GRPOTrainer on our rollouts (completions scored by the service, or episodes scored by sessions).

    The rollouts come in through TRL's public `rollout_func` and reward functions. The one TRL internal overridden is
    `_generate_and_score_completions`: around TRL's own, it hands the rollouts the batch's rows, then trains on the
    scored batch's group advantages (the service's formula, schema/advantages.py) instead of TRL's, masks what nothing
    judged, writes the group log and keeps the step's statistics.
    """

    def __init__(self, *args: Any, rollouts: Rollouts, group_log: JsonlWriter, **kwargs: Any) -> None:
        check_trl_internals(GRPOTrainer)
        os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is TRL's experimental rollout hook
        # TRL's annotations leave out the async callables it accepts (and awaits) and bound methods as rollout_func
        super().__init__(*args, reward_funcs=rollouts.reward_funcs(), rollout_func=rollouts.rollout, **kwargs)  # type: ignore[misc, arg-type]
        self.rollouts = rollouts
        self.group_log = group_log
        self.last_batch_stats: BatchStats | None = None

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        self.rollouts.begin(inputs)
        output = super()._generate_and_score_completions(inputs)
        batch = self.rollouts.scored()
        # TRL normalised the rewards itself; train on the groups' advantages as the service computes them, so what
        # the group log shows is exactly what moved the policy.
        output["advantages"] = torch.tensor(
            batch.advantages(), dtype=output["advantages"].dtype, device=output["advantages"].device
        )
        mask_unscored(output, batch.masked(), self.accelerator.gather)
        # each process trained on its own whole groups; the log and the step's statistics are of all of them
        whole = batch
        if self.accelerator.num_processes > 1:
            from accelerate.utils import gather_object

            whole = ScoredBatch.joined(gather_object([batch]))
        if self.accelerator.is_main_process:
            for record in group_records(self.state.global_step + 1, whole):
                self.group_log.write(record)
        self.last_batch_stats = batch_stats(whole)
        return output
