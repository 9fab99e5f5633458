"""The checks behind `groupscore check` and `check_reward_fn`: return values, determinism, edge inputs, latency
and reward-hacking probes, each reported as a PASS/FAIL/ERROR/SKIP row.

`CheckRun` runs them in order: the return values (here) first, because the other checks compare against their scores,
then each family, held by its own module (determinism_checks.py, edge_checks.py, latency_checks.py, probe_checks.py)
on the shared state and helpers of check_base.py."""

from __future__ import annotations

import math

from groupscore.testing.call_result import CallResult
from groupscore.testing.calls import make_caller
from groupscore.testing.check_base import CHECK_GROUPS, FAIL, PASS, SKIP, value_problem
from groupscore.testing.determinism_checks import DeterminismChecks
from groupscore.testing.edge_checks import EdgeChecks
from groupscore.testing.latency_checks import LatencyChecks
from groupscore.testing.probe_checks import ProbeChecks
from groupscore.testing.report import Report


class CheckRun(DeterminismChecks, EdgeChecks, LatencyChecks, ProbeChecks):
    """One run of every check on one target; `run()` returns the Report."""

    # -- the run -------------------------------------------------------------------------------------------------
    def run(self) -> Report:
        wanted = set(self.config.checks)
        unknown = wanted - set(CHECK_GROUPS)
        if unknown:
            raise ValueError(f"unknown check group(s) {sorted(unknown)}; known: {', '.join(CHECK_GROUPS)}")
        self.target.validate(self.cases)
        self.caller = make_caller(self.target, self.config.isolation)
        try:
            reason = getattr(self.caller, "fallback_reason", "")
            if reason:
                self.report.notes.append(
                    f"calls run in threads because {reason}: a hang is still reported on time, but one that holds "
                    "the GIL would stall the checker"
                )
            self.guarded(["returns"], self.check_returns)
            if self.singles and all(o.hang for o in self.singles):
                # Every later check would wait out the bound on every call: say so once instead.
                for group in sorted(wanted):
                    self.add(
                        group,
                        SKIP,
                        "not run: the reward gave no answer on any ordinary case within "
                        f"{self.config.timeout_s:g} s (see returns)",
                    )
                return self.report
            if "determinism" in wanted:
                self.guarded(["determinism.repeat"], self.check_repeat)
                self.guarded(["determinism.batch_composition"], self.check_batch_composition)
                self.guarded(["determinism.threads"], self.check_threads)
                self.guarded(["determinism.processes"], self.check_processes)
            if "edge_inputs" in wanted:
                self.guarded(
                    ["edge_inputs.no_crash", "edge_inputs.no_hang", "edge_inputs.valid_rewards"], self.check_edges
                )
            if "fuzz" in wanted:
                self.guarded(["edge_inputs.fuzz"], self.check_fuzz)
            if "latency" in wanted:
                self.guarded(["latency"], self.check_latency)
            if "probes" in wanted:
                self.guarded(["probe.reference"], self.check_probes)
        finally:
            self.caller.close()
            self.target.close()
            if self.infra_errors:
                self.report.notes.append(
                    f"{len(self.infra_errors)} completion(s) were not scored because the infrastructure failed "
                    f"(infra_error, e.g. {self.infra_errors[0][:120]!r}); no check counted them against the reward, "
                    "and the comparisons they were part of were left out"
                )
        return self.report

    # -- return values -------------------------------------------------------------------------------------------
    def check_returns(self) -> None:
        self.singles = [self.call([case]) for case in self.cases]
        # A batch of cases that each hang alone would only wait out its longer bound.
        self.batch = self.singles[0] if all(o.hang for o in self.singles) else self.call(self.cases)
        problems: list[str] = []
        for i, outcome in enumerate(self.singles):
            problems += [f"{self.label(i)}: {p}" for p in self._problems(outcome)]
        problems += [f"whole batch: {p}" for p in self._problems(self.batch)]
        values = [v for o in self.singles if o.ok for v in (o.values or ())]
        numbers = [v.number for v in values if v.kind == "number" and v.number is not None and not math.isnan(v.number)]
        nones = sum(v.kind == "none" for v in values)
        if values and nones == len(values):
            problems.append("returned None for every case (TRL turns None into NaN; this reward never applies)")
        if problems:
            self.add("returns", FAIL, f"{len(problems)} problem(s): " + "; ".join(problems[:4]), problems=problems)
            return
        lo, hi = self.config.reward_range
        shown = f"values {min(numbers):g}..{max(numbers):g}" if numbers else "no numbers"
        self.add(
            "returns",
            PASS,
            f"{len(self.cases)} cases, singly and as one batch: a list of one reward each, "
            f"{shown} within [{lo:g}, {hi:g}], {nones} None, no NaN",
        )

    def _problems(self, outcome: CallResult) -> list[str]:
        if not outcome.ok:
            return ["hang: " + (outcome.error or "") if outcome.hang else f"raised {outcome.error}"]
        assert outcome.values is not None
        out = []
        for j, value in enumerate(outcome.values):
            problem = value_problem(value, self.config)
            if problem:
                out.append(problem if len(outcome.values) == 1 else f"item {j}: {problem}")
        return out
