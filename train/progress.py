"""A progress bar for a transformers Trainer's steps (the SFT cold start): the step count and the latest loss."""

from __future__ import annotations

from typing import Any

from tqdm.auto import tqdm
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments


class ProgressBar(TrainerCallback):
    def __init__(self, desc: str, enabled: bool = True) -> None:
        self.desc, self.enabled = desc, enabled
        self._bar: tqdm | None = None

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self._bar = tqdm(
            total=state.max_steps,
            initial=state.global_step,
            desc=self.desc,
            unit="step",
            dynamic_ncols=True,
            disable=not self.enabled,
        )

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        if self._bar is not None:
            self._bar.update(state.global_step - self._bar.n)

    def on_log(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        logs: dict[str, float] | None = None,
        **kwargs: Any,
    ) -> None:
        if self._bar is not None and logs and "loss" in logs:
            self._bar.set_postfix(loss=f"{logs['loss']:.3f}", refresh=False)

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
