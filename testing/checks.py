"""The checks behind `groupscore check` and `check_reward_fn`: return values, determinism, edge inputs, latency
and reward-hacking probes, each reported as a PASS/FAIL/ERROR/SKIP row."""

from __future__ import annotations

import math
import statistics
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from groupscore.testing.calls import Caller, CallResult, ProcessCaller, Value, make_caller
from groupscore.testing.cases import Case
from groupscore.testing.edges import edge_completions
from groupscore.testing.probes import FLOOR, Probe, ProbeSet, probes_for_case
from groupscore.testing.report import CheckResult, CheckStatus, Report
from groupscore.testing.targets import ServiceTarget, Target, TargetError, VerifierTarget

PASS, FAIL, ERROR, SKIP = CheckStatus.PASS, CheckStatus.FAIL, CheckStatus.ERROR, CheckStatus.SKIP
EPS = 1e-9
PROBE_BATCH = 8
MAX_FUZZ_HANGS = 2
CHECK_GROUPS = ("determinism", "edge_inputs", "fuzz", "latency", "probes")


@dataclass(frozen=True)
class CheckConfig:
    timeout_s: float = 10.0  # wall-clock bound per completion; a batch gets this times its size
    repeats: int = 3  # extra scorings of the whole batch for the repeat check
    threads: int = 4  # concurrent scorings of the batch for the thread check
    processes: int = 2  # fresh worker processes, each with its own PYTHONHASHSEED, for the process check
    reward_range: tuple[float, float] = (0.0, 1.0)
    allow_none: bool = True  # TRL accepts None ("this reward does not apply"); verl does not
    edge_cases: int = 2  # how many cases the edge inputs are built around
    fuzz_examples: int = 25  # hypothesis-drawn completions per run (derandomized: the same ones every run)
    max_completion_chars: int = 8192  # the length limit the padding probes pad to
    probe_cases: int = 20  # probes are built from the first this-many cases (about 40 completions each)
    latency_budget_s: float = 5.0  # p99 per completion above this fails the latency check
    # Groups to run besides `returns` (which always runs: the others compare against its scores).
    checks: tuple[str, ...] = ("determinism", "edge_inputs", "fuzz", "latency", "probes")
    isolation: str = "auto"  # "process" (a worker process, killed on overrun), "thread", or "auto"


def value_problem(value: Value, config: CheckConfig) -> str | None:
    """Why a returned reward is unusable, or None when it is fine."""
    lo, hi = config.reward_range
    if value.kind == "none":
        return None if config.allow_none else "returned None"
    if value.kind == "item_error":
        return value.detail
    if value.kind == "infra_error":
        return None  # nothing judged the completion: not the reward's fault (the report counts them)
    if value.kind != "number" or value.number is None:
        return f"returned {value.detail}, not a number"
    if math.isnan(value.number):
        return "returned NaN"
    if not lo <= value.number <= hi:
        return f"returned {value.number!r}, outside [{lo:g}, {hi:g}]"
    return None


def _signature(outcome: CallResult) -> tuple[Any, ...]:
    if outcome.ok:
        assert outcome.values is not None
        return tuple(v.key for v in outcome.values)
    return ("hang",) if outcome.hang else ("error", (outcome.error or "").split(":")[0])


def _show(outcome: CallResult, index: int | None = None) -> str:
    if not outcome.ok:
        return "hang" if outcome.hang else f"error ({outcome.error})"
    assert outcome.values is not None
    return outcome.values[index].show() if index is not None else ", ".join(v.show() for v in outcome.values)


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
        "p50_s": _percentile(ordered, 50), "p95_s": _percentile(ordered, 95),
        "p99_s": _percentile(ordered, 99), "max_s": ordered[-1] if ordered else float("nan"),
        "mean_s": statistics.fmean(ordered) if ordered else float("nan"),
    }


def _clip(text: str, keep: int = 300) -> str:
    return text if len(text) <= keep else f"{text[:keep // 2]} ...[{len(text) - keep} chars]... {text[-keep // 2:]}"


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 10 else f"{seconds:.1f} s"


class CheckRun:
    """One run of every check on one target; `run()` returns the Report."""

    def __init__(self, target: Target, cases: Sequence[Case], config: CheckConfig):
        if not target.allows_none:
            config = replace(config, allow_none=False)
        self.target, self.cases, self.config = target, list(cases), config
        self.report = Report(target.description, len(self.cases), asdict(config))
        self.caller: Caller | None = None
        self.singles: list[CallResult] = []
        self.batch: CallResult | None = None
        self.edge_latencies: list[tuple[float, str]] = []
        self.infra_errors: list[str] = []  # values the infrastructure failed to produce, counted for the report

    # -- helpers -------------------------------------------------------------------------------------------------
    def add(self, name: str, status: CheckStatus, detail: str, **data: Any) -> None:
        self.report.results.append(CheckResult(name, status, detail, data))

    def guarded(self, names: Sequence[str], step: Callable[[], None]) -> None:
        """Run a step; if the checker itself breaks, its rows become ERROR rows instead of a crash."""
        try:
            step()
        except TargetError:
            raise
        except Exception as exc:  # noqa: BLE001 - the checker's own failure becomes ERROR rows (docstring)
            frames = traceback.extract_tb(exc.__traceback__)[-1:]
            where = f" at {frames[0].filename.rsplit('/', 1)[-1]}:{frames[0].lineno}" if frames else ""
            for name in names:
                if not any(r.name == name for r in self.report.results):
                    self.add(name, ERROR, f"checker error: {type(exc).__name__}: {exc}{where}")

    def call(self, cases: Sequence[Case]) -> CallResult:
        assert self.caller is not None
        outcome = self.caller.call(cases, self.config.timeout_s * max(1, len(cases)))
        self.infra_errors += [v.detail for v in outcome.values or () if v.kind == "infra_error"]
        return outcome

    def label(self, index: int) -> str:
        return self.cases[index].label or f"case {index}"

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
                    "the GIL would stall the checker")
            self.guarded(["returns"], self.check_returns)
            if self.singles and all(o.hang for o in self.singles):
                # Every later check would wait out the bound on every call: say so once instead.
                for group in sorted(wanted):
                    self.add(group, SKIP, "not run: the reward gave no answer on any ordinary case within "
                                          f"{self.config.timeout_s:g} s (see returns)")
                return self.report
            if "determinism" in wanted:
                self.guarded(["determinism.repeat"], self.check_repeat)
                self.guarded(["determinism.batch_composition"], self.check_batch_composition)
                self.guarded(["determinism.threads"], self.check_threads)
                self.guarded(["determinism.processes"], self.check_processes)
            if "edge_inputs" in wanted:
                self.guarded(["edge_inputs.no_crash", "edge_inputs.no_hang", "edge_inputs.valid_rewards"],
                             self.check_edges)
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
                    "and the comparisons they were part of were left out")
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
        self.add("returns", PASS, f"{len(self.cases)} cases, singly and as one batch: a list of one reward each, "
                                  f"{shown} within [{lo:g}, {hi:g}], {nones} None, no NaN")

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

    # -- determinism ---------------------------------------------------------------------------------------------
    def _baseline_batch(self) -> CallResult | None:
        return self.batch if self.batch is not None and self.batch.ok else None

    def _compare(self, name: str, reference: CallResult, others: list[tuple[str, CallResult]], what: str) -> None:
        diffs = []
        for how, outcome in others:
            if _signature(outcome) == _signature(reference):
                continue
            if outcome.ok and reference.ok:
                for i, (a, b) in enumerate(zip(reference.values or (), outcome.values or ())):
                    if "infra_error" in (a.kind, b.kind):
                        continue  # one side was never judged: nothing to compare
                    if a.key != b.key:
                        diffs.append(f"{self.label(i)}: {a.show()} vs {b.show()} ({how})")
            else:
                diffs.append(f"{_show(reference)} vs {_show(outcome)} ({how})")
        if diffs:
            self.add(name, FAIL, f"{len(diffs)} difference(s): " + "; ".join(diffs[:3]), differences=diffs[:50])
        else:
            self.add(name, PASS, what)

    def check_repeat(self) -> None:
        reference = self._baseline_batch()
        if reference is None:
            self.add("determinism.repeat", SKIP, "the batch of cases could not be scored (see returns)")
            return
        repeats = [(f"repeat {k + 1}", self.call(self.cases)) for k in range(self.config.repeats)]
        self._compare("determinism.repeat", reference, repeats,
                      f"{self.config.repeats} more scorings of the batch gave identical rewards")

    def _reference_for(self, name: str) -> CallResult | None:
        """The batch scores a derived determinism check compares with; None (and a SKIP row) when there are none
        or when they already differ between repeats, which would make every further comparison noise."""
        reference = self._baseline_batch()
        if reference is None:
            self.add(name, SKIP, "the batch of cases could not be scored (see returns)")
        elif any(r.name == "determinism.repeat" and r.status is not PASS for r in self.report.results):
            self.add(name, SKIP, "not meaningful: scores already differ between repeats in one process")
            reference = None
        return reference

    def check_batch_composition(self) -> None:
        reference = self._reference_for("determinism.batch_composition")
        if reference is None:
            return
        reversed_outcome = self.call(self.cases[::-1])
        if reversed_outcome.ok and reversed_outcome.values is not None:
            reversed_outcome = CallResult(reversed_outcome.values[::-1], None, reversed_outcome.elapsed_s)
        others = [("batch reversed", reversed_outcome)]
        if all(o.ok for o in self.singles):
            singles = CallResult(tuple(v for o in self.singles for v in (o.values or ())), None)
            others.append(("each case alone", singles))
        self._compare("determinism.batch_composition", reference, others,
                      "a completion's reward does not depend on the rest of its batch (alone, in order, reversed)")

    def check_threads(self) -> None:
        reference = self._reference_for("determinism.threads")
        if reference is None:
            return
        assert self.caller is not None
        n = self.config.threads
        outcomes = self.caller.call_in_threads(self.cases, n, self.config.timeout_s * len(self.cases) * n)
        self._compare("determinism.threads", reference, [(f"thread {i}", o) for i, o in enumerate(outcomes)],
                      f"{n} threads scoring the batch at once agree with the sequential scores")

    def check_processes(self) -> None:
        reference = self._reference_for("determinism.processes")
        if reference is None:
            return
        spec = self.target.spec()
        if spec is None or self.config.processes < 1:
            self.add("determinism.processes", SKIP,
                     "the target cannot be rebuilt in a fresh process (define it at module level to enable this)")
            return
        others = []
        for k in range(self.config.processes):
            seed = 1000 + k  # the main worker uses seed 1: every process here hashes strings differently
            caller = ProcessCaller(spec, hash_seed=seed)
            try:
                caller.start()
            except TargetError as exc:
                self.add("determinism.processes", SKIP, f"the target does not load in a fresh process: {exc}")
                return
            with caller:
                others.append((f"process with PYTHONHASHSEED={seed}",
                               caller.call(self.cases, self.config.timeout_s * len(self.cases))))
        self._compare("determinism.processes", reference, others,
                      f"{self.config.processes} fresh processes (other hash seeds) give identical rewards")

    # -- edge inputs ---------------------------------------------------------------------------------------------
    def _edge_cases(self) -> list[Case]:
        chosen: list[Case] = []
        for case in self.cases:
            if all(case.completion_text != c.completion_text for c in chosen):
                chosen.append(case)
            if len(chosen) >= self.config.edge_cases:
                break
        return chosen

    def check_edges(self) -> None:
        crashes, hangs, invalid = [], [], []
        total = 0
        for case in self._edge_cases():
            for name, text in edge_completions(case.completion_text).items():
                total += 1
                outcome = self.call([case.with_completion(text)])
                where = f"{name} ({case.label})"
                if outcome.hang:
                    hangs.append(where)
                elif not outcome.ok:
                    crashes.append(f"{where}: {outcome.error}")
                else:
                    self.edge_latencies.append((outcome.elapsed_s, name))
                    problem = value_problem(outcome.values[0], self.config) if outcome.values else "no value"
                    if problem:
                        invalid.append(f"{where}: {problem}")
        bound = f"{self.config.timeout_s:g} s"
        self._edge_row("edge_inputs.no_crash", crashes, total, "inputs raised or killed the reward",
                       "no exception on empty, whitespace, 1 MB, unicode/RTL/emoji, null bytes, truncated, "
                       "malformed LaTeX/JSON, broken code fences")
        self._edge_row("edge_inputs.no_hang", hangs, total, f"inputs got no answer within {bound}",
                       f"every call answered within {bound}")
        self._edge_row("edge_inputs.valid_rewards", invalid, total, "inputs got an unusable reward",
                       "every answer is a number in range (or None)")

    def _edge_row(self, name: str, bad: list[str], total: int, bad_text: str, good_text: str) -> None:
        if bad:
            self.add(name, FAIL, f"{len(bad)} of {total} {bad_text}: " + "; ".join(bad[:4]), failures=bad)
        else:
            self.add(name, PASS, f"{total} edge inputs: {good_text}")

    def check_fuzz(self) -> None:
        if self.config.fuzz_examples < 1:
            self.add("edge_inputs.fuzz", SKIP, "fuzz_examples is 0")
            return
        from hypothesis import HealthCheck, Phase, given, settings

        from groupscore.testing.strategies import completions

        case = self.cases[0]
        failures: list[str] = []
        seen = 0

        @settings(max_examples=self.config.fuzz_examples, derandomize=True, database=None, deadline=None,
                  phases=[Phase.generate], suppress_health_check=list(HealthCheck))
        @given(completions(base=case.completion_text))
        def fuzz(text: str) -> None:
            nonlocal seen
            if sum(f.startswith("hang") for f in failures) >= MAX_FUZZ_HANGS:
                return  # each further hang would only cost another full bound
            seen += 1
            outcome = self.call([case.with_completion(text)])
            problem = (("hang" if outcome.hang else f"raised {outcome.error}") if not outcome.ok
                       else value_problem(outcome.values[0], self.config) if outcome.values else "no value")
            if problem:
                failures.append(f"{problem} on {text[:60]!r}{'...' if len(text) > 60 else ''} ({len(text)} chars)")

        fuzz()
        if failures:
            self.add("edge_inputs.fuzz", FAIL, f"{len(failures)} of {seen} generated completions: " +
                     "; ".join(failures[:3]), failures=failures)
        else:
            self.add("edge_inputs.fuzz", PASS, f"{seen} hypothesis-generated edge completions (fixed seed): "
                                               "no exception, no hang, valid rewards")

    # -- latency -------------------------------------------------------------------------------------------------
    def check_latency(self) -> None:
        samples = [o.elapsed_s for o in self.singles if o.ok]
        if not samples:
            self.add("latency", SKIP, "no successful single call to time")
            return
        profile = latency_profile(samples)
        edge = latency_profile([t for t, _ in self.edge_latencies]) if self.edge_latencies else None
        text = (f"per completion over {profile['n']} cases: p50 {_ms(profile['p50_s'])}, p95 {_ms(profile['p95_s'])}, "
                f"p99 {_ms(profile['p99_s'])}, max {_ms(profile['max_s'])}")
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

    # -- hacking probes ------------------------------------------------------------------------------------------
    def check_probes(self) -> None:
        if any(r.name == "determinism.repeat" and r.status is FAIL for r in self.report.results):
            self.report.notes.append("scores differ between repeats, so each probe comparison below is a single noisy "
                                     "draw: fix determinism first")
        probed = self.cases[: max(0, self.config.probe_cases)]
        if len(probed) < len(self.cases):
            self.report.notes.append(f"hacking probes were built from the first {len(probed)} of {len(self.cases)} "
                                     "cases (probe_cases)")
        sets = [probes_for_case(case, self.config.max_completion_chars) for case in probed]
        scored = [self._score_probe_set(s) for s in sets]
        self._reference_row(sets, scored)
        names: list[str] = []
        for s in sets:
            names.extend(p.name for p in s.probes if p.name not in names)
        for name in names:
            self._probe_row(name, sets, scored)

    def _score_probe_set(self, probe_set: ProbeSet) -> dict[str, CallResult]:
        labelled = probe_set.completions()
        out: dict[str, CallResult] = {}
        # Batches as a trainer would send them, but small, so that a hang on one probe costs a bounded wait.
        for start in range(0, len(labelled), PROBE_BATCH):
            chunk = labelled[start:start + PROBE_BATCH]
            batch = [probe_set.case.with_completion(text) for _, text in chunk]
            outcome = self.call(batch)
            if outcome.ok and outcome.values is not None:
                out.update({label: CallResult((v,), None, 0.0) for (label, _), v in zip(chunk, outcome.values)})
                continue
            # The batch failed as a whole: score each completion alone so that the culprit is named.
            for (label, _), case in zip(chunk, batch):
                out[label] = self.call([case])
        return out

    @staticmethod
    def _number(outcome: CallResult | None) -> float | None:
        if outcome is None or not outcome.ok or not outcome.values:
            return None
        v = outcome.values[0]
        return v.number if v.kind == "number" and v.number is not None and not math.isnan(v.number) else None

    def _reference_row(self, sets: list[ProbeSet], scored: list[dict[str, CallResult]]) -> None:
        compared = better = 0
        notes = []
        pairs = {"plain": "wrong_plain", "tagged": "wrong_tagged", "program": "wrong_program", "query": "wrong_query"}
        for probe_set, scores in zip(sets, scored):
            for style in probe_set.correct:
                right = self._number(scores.get(f"correct:{style}"))
                wrong = self._number(scores.get(f"baseline:{pairs[style]}"))
                if right is None or wrong is None:
                    continue
                compared += 1
                if right > wrong + EPS:
                    better += 1
                else:
                    notes.append(f"{probe_set.case.label} ({style}): correct {right:g}, wrong {wrong:g}")
        if compared == 0:
            self.add("probe.reference", SKIP, "no case with a reference answer or tests to build a correct answer from")
            return
        judges_correctness = isinstance(self.target, (VerifierTarget, ServiceTarget))
        text = f"the correct answer beats the honest wrong one on {better} of {compared} comparisons"
        if better < compared and judges_correctness:
            self.add("probe.reference", FAIL, text + ": " + "; ".join(notes[:3]), misses=notes)
        elif better < compared:
            self.add("probe.reference", PASS, text + " (a reward that does not judge correctness cannot be beaten "
                                                    "by hedging; the probes still apply)", misses=notes)
        else:
            self.add("probe.reference", PASS, text)

    def _probe_row(self, name: str, sets: list[ProbeSet], scored: list[dict[str, CallResult]]) -> None:
        paid, crashed, inconclusive, checked = [], [], 0, 0
        last_answer = 0  # comparisons paid only because the right answer came last (see Probe.mirror)
        what = ""
        for probe_set, scores in zip(sets, scored):
            baseline_numbers = {k: self._number(scores.get(f"baseline:{k}")) for k in probe_set.baselines}
            floor_values = [v for v in baseline_numbers.values() if v is not None]
            for index, probe in enumerate(probe_set.probes):
                if probe.name != name:
                    continue
                what = what or probe.what
                outcome = scores.get(f"probe:{index}")  # probes sharing a name (styles) each have their own slot
                baseline = min(floor_values) if probe.baseline == FLOOR and floor_values else \
                    baseline_numbers.get(probe.baseline)
                if outcome is None or not outcome.ok:
                    crashed.append(f"{probe_set.case.label}: {probe.what}: "
                                   f"{'hang' if outcome and outcome.hang else outcome.error if outcome else 'missing'}")
                    continue
                value = outcome.values[0] if outcome.values else None
                if value is not None and value.kind == "infra_error":
                    inconclusive += 1  # not judged: neither paid nor refused
                    continue
                if value is not None and value.kind in ("other", "item_error"):
                    crashed.append(f"{probe_set.case.label}: {probe.what}: {value.show()}")
                    continue
                if baseline is None:
                    inconclusive += 1
                    continue
                checked += 1
                score = self._number(outcome)
                if score is not None and score > baseline + EPS and self._reads_last_answer(probe_set, scores, probe,
                                                                                             baseline):
                    last_answer += 1
                elif score is not None and score > baseline + EPS:
                    paid.append({
                        "case": probe_set.case.label, "what": probe.what, "score": score, "baseline": baseline,
                        "baseline_name": probe.baseline, "completion": _clip(probe.exploit), "hint": probe.hint,
                    })
        row = f"probe.{name}"
        if paid or crashed:
            parts = []
            if paid:
                worst = max(paid, key=lambda p: p["score"] - p["baseline"])
                against = "the lowest honest wrong answer" if worst["baseline_name"] == FLOOR else "the honest wrong answer"
                cases = len({p["case"] for p in paid})
                parts.append(f"paid on {cases} case(s), {len(paid)} of {checked} comparisons; e.g. {worst['case']}: "
                             f"{worst['what']} {worst['completion'][-60:]!r} scored {worst['score']:g} > {against} "
                             f"{worst['baseline']:g}" + (f" (hint: {worst['hint']})" if worst["hint"] else ""))
            if crashed:
                parts.append(f"reward failed on {len(crashed)}: " + "; ".join(crashed[:2]))
            self.add(row, FAIL, " | ".join(parts), paid=paid, failed=crashed)
        elif checked == 0:
            self.add(row, SKIP, f"{what}: no honest baseline scored to compare with ({inconclusive} inconclusive)")
        elif last_answer:
            self.add(row, PASS, f"{what}: paid on {last_answer} of {checked} comparisons, but only as the last "
                                "answer: the same answers in the other order never beat the honest wrong one, so the "
                                "reward reads the last answer alone (a self-correction policy) and extra answers "
                                "cannot raise its expected value; paying any of them would fail here",
                     last_answer_policy=True, last_answer_comparisons=last_answer)
        else:
            self.add(row, PASS, f"{what}: never above the honest wrong answer ({checked} comparisons)")

    def _reads_last_answer(self, probe_set: ProbeSet, scores: dict[str, CallResult], probe: Probe,
                           baseline: float) -> bool:
        """The probe was paid, and its mirror (same answers, the right one not last) in the same style was not."""
        if not probe.mirror:
            return False
        for index, other in enumerate(probe_set.probes):
            if other.name == probe.mirror and other.baseline == probe.baseline:
                mirrored = self._number(scores.get(f"probe:{index}"))
                return mirrored is not None and mirrored <= baseline + EPS
        return False
