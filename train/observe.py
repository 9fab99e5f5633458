"""What a run shows while it trains: group logs, per-step metrics, health warnings, plots and the summary."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from groupscore.train.config import MonitorConfig
from groupscore.train.summary import EvalRecord, HealthWarning, StepMetrics


class JsonlWriter:
    """One JSON record a line. `enabled=False` (a process other than the main one) writes nothing and opens
    nothing."""

    def __init__(self, path: Path, append: bool = False, enabled: bool = True) -> None:
        self.path = Path(path)
        self._file = None
        if enabled:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # a rerun into the same folder starts its logs afresh; a resumed one goes on with them
            self._file = self.path.open("a" if append else "w")

    def write(self, record: dict[str, Any]) -> None:
        if self._file is not None:
            self._file.write(json.dumps(record, ensure_ascii=False) + "\n")
            self._file.flush()  # a crashed run still leaves every finished step on disk

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


def keep_steps_upto(path: Path, step: int, rewrite: bool = True) -> list[dict[str, Any]]:
    """The records of a JSONL log with `step` <= step (a resumed run's history), and the file cut back to them
    (`rewrite`): the steps after the checkpoint a run resumes from are run and logged again, so their first records
    go. A line cut short by the interruption goes too."""
    if not path.exists():
        return []
    kept, lines = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and isinstance(record.get("step"), int) and record["step"] <= step:
            kept.append(record)
            lines.append(line)
    if rewrite:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        tmp.replace(path)
    return kept


@dataclass
class Monitor:
    """Raises a warning when a failure mode starts (not on every step it lasts), and keeps them for the summary."""

    cfg: MonitorConfig
    emit: Callable[[str], object] = print
    warnings: list[HealthWarning] = field(default_factory=list)
    _active: set[str] = field(default_factory=set)

    def _flag(self, step: int, kind: str, on: bool, message: str) -> None:
        if on and kind not in self._active:
            self._active.add(kind)
            self.warnings.append({"step": step, "kind": kind, "message": message})
            self.emit(f"[warning] step {step}: {message}")
        elif not on:
            self._active.discard(kind)

    def replay(self, history: list[StepMetrics]) -> None:
        """The warnings of steps logged before a restart (resume), recorded again without being said again."""
        emit, self.emit = self.emit, lambda _message: None
        try:
            for metrics in history:
                self.check_step(metrics)
        finally:
            self.emit = emit

    def check_step(self, metrics: StepMetrics) -> None:
        """check() with what one GRPO step measured."""
        self.check(
            metrics.step,
            kl=metrics.kl,
            zero_variance_share=metrics.batch.zero_variance_share,
            infra_error_share=metrics.batch.infra_error_share,
            reward_mean=metrics.batch.reward_mean,
        )

    def check(
        self,
        step: int,
        *,
        kl: float | None = None,
        zero_variance_share: float | None = None,
        infra_error_share: float | None = None,
        reward_mean: float | None = None,
    ) -> None:
        """Flag what these measurements show (None: not measured this step, nothing changes)."""
        cfg = self.cfg
        if kl is not None and not math.isnan(kl):
            self._flag(
                step,
                "kl_spike",
                kl > cfg.kl_spike,
                f"KL to the reference is {kl:.3g} (> {cfg.kl_spike}): the policy is drifting fast",
            )
            self._flag(
                step,
                "kl_collapse",
                step > cfg.warmup_steps and kl < cfg.kl_floor,
                f"KL to the reference is {kl:.2g}: the policy has stopped moving",
            )
        share = zero_variance_share
        if share is not None:
            self._flag(
                step,
                "zero_variance",
                share >= cfg.zero_variance_share,
                f"{share:.0%} of groups have zero reward variance: no learning signal from them",
            )
        infra = infra_error_share
        if infra is not None:
            self._flag(
                step,
                "infra_errors",
                infra > cfg.infra_error_share,
                f"{infra:.0%} of completions could not be scored (infra_error: sandbox, dead worker or "
                f"deadline; > {cfg.infra_error_share:.0%}): they are masked, so the batch is thinner and may be "
                "biased; see the service's groupscore_infra_errors_total on /metrics",
            )
        reward = reward_mean
        if reward is not None and not math.isnan(reward):
            self._flag(
                step,
                "saturation",
                reward >= cfg.saturation,
                f"mean reward {reward:.3f} has saturated: the tasks are too easy now",
            )


def plot_run(run_dir: Path, metrics: list[StepMetrics], evals: list[EvalRecord]) -> dict[str, str]:
    """PNG plots of reward, KL and held-out pass@1 over steps; returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = {}
    series: dict[str, tuple[str, list[tuple[int, float | None]]]] = {
        "reward": ("mean reward (training groups)", [(m.step, m.batch.reward_mean) for m in metrics]),
        "kl": ("KL to reference", [(m.step, m.kl) for m in metrics]),
        "pass_at_1": ("held-out pass@1", [(e.step, e.result.pass_at.get(1)) for e in evals]),
    }
    for name, (label, measured) in series.items():
        points = [(step, value) for step, value in measured if value is not None]
        fig, ax = plt.subplots(figsize=(6, 3.5))
        if points:
            ax.plot(*zip(*points), marker="o" if name == "pass_at_1" else None, markersize=4)
        ax.set_xlabel("step")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        path = run_dir / f"{name}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths[name] = str(path)
    return paths
