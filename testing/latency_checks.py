"""The latency check: percentiles of the time per completion over the ordinary cases (scored alone), with the
whole batch's per-completion time and the edge inputs' timings beside them; a p99 over the budget fails."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from groupscore.testing.check_base import FAIL, PASS, SKIP, CheckRunBase


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    rank = q / 100 * (len(sorted_values) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (rank - low)


def latency_profile(samples: Sequence[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "n": len(ordered),
        "p50_s": _percentile(ordered, 50),
        "p95_s": _percentile(ordered, 95),
        "p99_s": _percentile(ordered, 99),
        "max_s": ordered[-1] if ordered else float("nan"),
        "mean_s": statistics.fmean(ordered) if ordered else float("nan"),
    }


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 10 else f"{seconds:.1f} s"


class LatencyChecks(CheckRunBase):
    """latency."""

    def check_latency(self) -> None:
        samples = [o.elapsed_s for o in self.singles if o.ok]
        if not samples:
            self.add("latency", SKIP, "no successful single call to time")
            return
        profile = latency_profile(samples)
        edge = latency_profile([t for t, _ in self.edge_latencies]) if self.edge_latencies else None
        text = (
            f"per completion over {profile['n']} cases: p50 {_ms(profile['p50_s'])}, p95 {_ms(profile['p95_s'])}, "
            f"p99 {_ms(profile['p99_s'])}, max {_ms(profile['max_s'])}"
        )
        if self.batch is not None and self.batch.ok and self.cases:
            text += f"; as one batch of {len(self.cases)}: {_ms(self.batch.elapsed_s / len(self.cases))} per completion"
        if edge:
            slowest = max(self.edge_latencies)
            text += f"; edge inputs: p50 {_ms(edge['p50_s'])}, max {_ms(edge['max_s'])} ({slowest[1]})"
        budget = self.config.latency_budget_s
        status = FAIL if profile["p99_s"] > budget else PASS
        if status is FAIL:
            text = f"p99 above the {budget:g} s budget; " + text
        self.add("latency", status, text, cases=profile, edge_inputs=edge)
