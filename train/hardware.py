"""Pick device, precision and thread count from the hardware actually present (TRL's bf16 default breaks on CPU)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING:
    import torch


class PrecisionFlags(TypedDict):
    """The precision flags transformers' TrainingArguments (and TRL's configs) expect."""

    bf16: bool
    fp16: bool
    use_cpu: bool


@dataclass(frozen=True)
class Hardware:
    device: str  # "cpu", or this process's GPU ("cuda:0", "cuda:1" under `accelerate launch`)
    precision: str  # "bf16", "fp16" or "fp32"
    threads: int
    use_vllm: bool
    num_processes: int = 1  # > 1 under `accelerate launch` on several GPUs
    is_main: bool = True  # the process that writes files and prints progress

    @property
    def torch_dtype(self) -> torch.dtype:
        import torch

        return {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[self.precision]

    def trainer_flags(self) -> PrecisionFlags:
        """The precision flags transformers' TrainingArguments (and TRL's configs) expect."""
        return {"bf16": self.precision == "bf16", "fp16": self.precision == "fp16", "use_cpu": self.device == "cpu"}


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def pick_hardware(
    device: str = "auto", precision: str = "auto", threads: int | None = None, use_vllm: bool | str = "auto"
) -> Hardware:
    import importlib.util

    import torch
    from accelerate import PartialState

    has_cuda = torch.cuda.is_available()
    if device == "cuda" and not has_cuda:
        raise ValueError("device: cuda was asked for but torch sees no GPU")
    device = ("cuda" if has_cuda else "cpu") if device == "auto" else device
    if precision == "auto":
        precision = "bf16" if device == "cuda" and torch.cuda.is_bf16_supported() else "fp32"
    if device == "cpu" and precision != "fp32":
        raise ValueError(f"precision: {precision} needs a GPU here; use fp32 (or auto) on the CPU")
    vllm_installed = importlib.util.find_spec("vllm") is not None
    if use_vllm is True and (device != "cuda" or not vllm_installed):
        raise ValueError("grpo.use_vllm: true needs a GPU and the vllm package")
    threads = threads or _cpu_count()
    torch.set_num_threads(threads)
    state = PartialState(cpu=device == "cpu")  # reads the process layout `accelerate launch` set up, if any
    return Hardware(
        str(state.device) if device == "cuda" else "cpu",
        precision,
        threads,
        use_vllm=bool(use_vllm) and device == "cuda" and vllm_installed,
        num_processes=state.num_processes,
        is_main=state.is_main_process,
    )


def barrier() -> None:
    """Wait for every process (a no-op in a single process), e.g. after the main one wrote a model folder."""
    from accelerate import PartialState

    PartialState().wait_for_everyone()


def is_main_process() -> bool:
    return int(os.environ.get("RANK", "0")) == 0
