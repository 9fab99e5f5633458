"""What a run reports, as types: per-step metrics, held-out evaluations, stage results and the run summary.

Each record is read through its fields while the run goes on, and written by its `as_json()`: metrics.jsonl,
summary.json and the summary's parts keep the flat shapes they always had (`"pass@1"`, `"component/<name>/mean"`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypedDict

JsonDict = dict[str, Any]

# summary.json's verifier versions: kind -> its version, or the sorted versions when mixing was allowed and happened
VersionSummary = dict[str, int | list[int]]


class HealthWarning(TypedDict):
    """One warning of the run monitor (train/observe.Monitor), as the summary lists it."""

    step: int
    kind: str
    message: str


@dataclass(frozen=True)
class TaskSamples:
    """One held-out prompt's samples in an evaluation: how many were judged, how many fully correct."""

    id: str
    correct: int
    judged: int
    rewards: list[float]
    completions: list[str]


@dataclass(frozen=True)
class EvalResult:
    """n samples per prompt, scored as groups: pass@k, rewards and group shares over the judged samples."""

    n: int
    pass_at: dict[int, float]  # k -> mean unbiased pass@k
    mean_reward: float
    solvable_share: float  # share of prompts with at least one sample of positive reward
    zero_variance_share: float
    per_task: list[TaskSamples] = field(default_factory=list)
    infra_errors: int = 0  # samples the service could not score: left out of every number above

    @property
    def pass_at_1(self) -> float:
        return self.pass_at[1]

    def as_dict(self) -> JsonDict:
        return {
            "n": self.n,
            **{f"pass@{k}": v for k, v in self.pass_at.items()},
            "mean_reward": self.mean_reward,
            "solvable_share": self.solvable_share,
            "zero_variance_share": self.zero_variance_share,
            "infra_errors": self.infra_errors,
        }

    @classmethod
    def from_dict(cls, record: JsonDict) -> EvalResult:
        """as_dict() read back (per_task is not written, so it comes back empty)."""
        return cls(
            n=record["n"],
            pass_at={int(k.removeprefix("pass@")): v for k, v in record.items() if k.startswith("pass@")},
            mean_reward=record["mean_reward"],
            solvable_share=record["solvable_share"],
            zero_variance_share=record["zero_variance_share"],
            infra_errors=record.get("infra_errors", 0),
        )


# How GRPO picks its checkpoint among the held-out evaluations (the summary states it).
SELECTION_RULE = "held-out pass@1; a tie goes to the higher held-out mean reward, then to the later step"


@dataclass(frozen=True)
class EvalRecord:
    """A held-out evaluation during GRPO: the step it ran after (0: before training) and its result."""

    step: int
    result: EvalResult

    def as_json(self) -> JsonDict:
        return {"step": self.step, **self.result.as_dict()}

    @classmethod
    def from_json(cls, record: JsonDict) -> EvalRecord:
        return cls(record["step"], EvalResult.from_dict(record))

    def selection_key(self) -> tuple[float, float, int]:
        """SELECTION_RULE as a sort key: the highest key is selected."""
        mean = self.result.mean_reward
        return (self.result.pass_at_1, mean if mean == mean else float("-inf"), self.step)  # NaN: nothing judged


class Spread(NamedTuple):
    mean: float
    std: float


@dataclass(frozen=True)
class BatchStats:
    """One generation batch over its judged completions: reward mean/std in total and per component, the share of
    groups the service flagged zero-variance, and the completions masked because nothing judged them."""

    reward_mean: float
    reward_std: float
    zero_variance_share: float
    infra_errors: int
    infra_error_share: float
    reward_wait_s: float
    reward_request_s: float
    components: dict[str, Spread] = field(default_factory=dict)

    def as_json(self) -> JsonDict:
        out: JsonDict = {
            "reward_mean": self.reward_mean,
            "reward_std": self.reward_std,
            "zero_variance_share": self.zero_variance_share,
            "infra_errors": self.infra_errors,
            "infra_error_share": self.infra_error_share,
            "reward_wait_s": self.reward_wait_s,
            "reward_request_s": self.reward_request_s,
        }
        for name, spread in self.components.items():
            out[f"component/{name}/mean"] = spread.mean
            out[f"component/{name}/std"] = spread.std
        return out


@dataclass(frozen=True)
class StepMetrics:
    """One GRPO step: its time, its batch's scores, and what TRL logged (None where it logged nothing)."""

    step: int
    step_time_s: float
    batch: BatchStats
    kl: float | None = None
    completion_length: float | None = None
    entropy: float | None = None
    loss: float | None = None
    grad_norm: float | None = None
    clip_ratio: float | None = None

    @classmethod
    def from_json(cls, record: JsonDict) -> StepMetrics:
        """A metrics.jsonl line read back (a resumed run reloads the steps before its restart)."""
        names = sorted({k.split("/")[1] for k in record if k.startswith("component/") and k.count("/") == 2})
        batch = BatchStats(
            reward_mean=record["reward_mean"],
            reward_std=record["reward_std"],
            zero_variance_share=record["zero_variance_share"],
            infra_errors=record.get("infra_errors", 0),
            infra_error_share=record.get("infra_error_share", 0.0),
            reward_wait_s=record.get("reward_wait_s", 0.0),
            reward_request_s=record.get("reward_request_s", 0.0),
            components={
                n: Spread(record.get(f"component/{n}/mean", math.nan), record.get(f"component/{n}/std", math.nan))
                for n in names
            },
        )
        return cls(
            step=record["step"],
            step_time_s=record["step_time_s"],
            batch=batch,
            **{k: record.get(k) for k in ("kl", "completion_length", "entropy", "loss", "grad_norm", "clip_ratio")},
        )

    def as_json(self) -> JsonDict:
        return {
            "step": self.step,
            "step_time_s": self.step_time_s,
            **self.batch.as_json(),
            "kl": self.kl,
            "completion_length": self.completion_length,
            "entropy": self.entropy,
            "loss": self.loss,
            "grad_norm": self.grad_norm,
            "clip_ratio": self.clip_ratio,
        }


@dataclass(frozen=True)
class PreflightReport:
    """Can GRPO learn from the starting model: the share of groups with a positive reward against the threshold."""

    result: EvalResult
    threshold: float

    @property
    def ok(self) -> bool:
        return self.result.solvable_share >= self.threshold

    def as_json(self) -> JsonDict:
        return {**self.result.as_dict(), "threshold": self.threshold, "ok": self.ok}


@dataclass(frozen=True)
class SftStage:
    model: str
    seconds: float

    def as_json(self) -> JsonDict:
        return {"model": self.model, "seconds": self.seconds}


@dataclass(frozen=True)
class GrpoStage:
    seconds: float
    steps: int
    selected_step: int
    selected_checkpoint: str
    evals: list[EvalRecord]
    warnings: list[HealthWarning]
    selected_by: str = SELECTION_RULE

    def as_json(self) -> JsonDict:
        return {
            "seconds": self.seconds,
            "steps": self.steps,
            "selected_step": self.selected_step,
            "selected_checkpoint": self.selected_checkpoint,
            "selected_by": self.selected_by,
            "evals": [e.as_json() for e in self.evals],
            "warnings": list(self.warnings),
        }


@dataclass(frozen=True)
class MergeStage:
    model: str
    ratio: float
    eval: EvalResult | None = None

    def as_json(self) -> JsonDict:
        out: JsonDict = {"model": self.model, "ratio": self.ratio}
        if self.eval is not None:
            out["eval"] = self.eval.as_dict()
        return out


@dataclass
class Stages:
    """The stages that ran, each with what it reports (summary.json lists them in this order)."""

    sft: SftStage | None = None
    preflight: PreflightReport | None = None
    grpo: GrpoStage | None = None
    merge: MergeStage | None = None

    def as_json(self) -> JsonDict:
        stages = {"sft": self.sft, "preflight": self.preflight, "grpo": self.grpo, "merge": self.merge}
        return {name: stage.as_json() for name, stage in stages.items() if stage is not None}


@dataclass(frozen=True)
class FinalEval:
    """The starting and the selected model, re-measured on fresh samples (`seed`)."""

    before: EvalResult
    after: EvalResult
    seed: int

    def as_json(self) -> JsonDict:
        return {"before": self.before.as_dict(), "after": self.after.as_dict(), "seed": self.seed}


@dataclass
class RunSummary:
    """The run's outcome (summary.json, summary.md and what `groupscore train` and the demo print).

    `plots`, `logs` and `seconds` are filled by the main process only, at the very end."""

    run_dir: str
    device: str
    precision: str
    seed: int
    stages: Stages = field(default_factory=Stages)
    eval: FinalEval | None = None
    verifier_versions: VersionSummary = field(default_factory=dict)
    selected_model: str = ""
    plots: dict[str, str] | None = None
    logs: dict[str, str] | None = None
    seconds: float | None = None

    @property
    def pass_at_1_before(self) -> float | None:
        return self.eval.before.pass_at_1 if self.eval is not None else None

    @property
    def pass_at_1_after(self) -> float | None:
        return self.eval.after.pass_at_1 if self.eval is not None else None

    def as_json(self) -> JsonDict:
        out: JsonDict = {
            "run_dir": self.run_dir,
            "device": self.device,
            "precision": self.precision,
            "seed": self.seed,
            "stages": self.stages.as_json(),
        }
        if self.eval is not None:
            out.update(
                eval=self.eval.as_json(), pass_at_1_before=self.pass_at_1_before, pass_at_1_after=self.pass_at_1_after
            )
        out.update(verifier_versions=self.verifier_versions, selected_model=self.selected_model)
        for name in ("plots", "logs", "seconds"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return out


@dataclass
class DryRunReport:
    """`groupscore train --dry-run`: whether the config, taskset and service check out, and the estimated cost."""

    device: str
    precision: str
    ok: bool = True
    verifier_versions: VersionSummary = field(default_factory=dict)
    reference_failures: list[str] = field(default_factory=list)
    rollouts: int | None = None
    estimate_s: float | None = None
