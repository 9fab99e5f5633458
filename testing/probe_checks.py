"""The reward-hacking checks: per case, the exploit completions probes.py builds (padding, format only, several
answers, planted test results...) scored in small batches, each compared with the honest wrong answer it must not
beat; and the reference row: the correct answer must beat the honest wrong one."""

from __future__ import annotations

import math
from typing import Any

from groupscore.testing.call_result import CallResult
from groupscore.testing.check_base import FAIL, PASS, SKIP, CheckRunBase
from groupscore.testing.probes import FLOOR, Probe, ProbeSet, probes_for_case
from groupscore.testing.targets import ServiceTarget, VerifierTarget

EPS = 1e-9
PROBE_BATCH = 8


def _clip(text: str, keep: int = 300) -> str:
    return text if len(text) <= keep else f"{text[: keep // 2]} ...[{len(text) - keep} chars]... {text[-keep // 2 :]}"


class ProbeChecks(CheckRunBase):
    """probe.reference and one probe.<name> row per probe kind."""

    def check_probes(self) -> None:
        if any(r.name == "determinism.repeat" and r.status is FAIL for r in self.report.results):
            self.report.notes.append(
                "scores differ between repeats, so each probe comparison below is a single noisy "
                "draw: fix determinism first"
            )
        probed = self.cases[: max(0, self.config.probe_cases)]
        if len(probed) < len(self.cases):
            self.report.notes.append(
                f"hacking probes were built from the first {len(probed)} of {len(self.cases)} cases (probe_cases)"
            )
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
            chunk = labelled[start : start + PROBE_BATCH]
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
            self.add(
                "probe.reference",
                PASS,
                text + " (a reward that does not judge correctness cannot be beaten "
                "by hedging; the probes still apply)",
                misses=notes,
            )
        else:
            self.add("probe.reference", PASS, text)

    def _probe_row(self, name: str, sets: list[ProbeSet], scored: list[dict[str, CallResult]]) -> None:
        paid: list[dict[str, Any]] = []
        crashed: list[str] = []
        inconclusive, checked = 0, 0
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
                baseline = (
                    min(floor_values)
                    if probe.baseline == FLOOR and floor_values
                    else baseline_numbers.get(probe.baseline)
                )
                if outcome is None or not outcome.ok:
                    crashed.append(
                        f"{probe_set.case.label}: {probe.what}: "
                        f"{'hang' if outcome and outcome.hang else outcome.error if outcome else 'missing'}"
                    )
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
                if (
                    score is not None
                    and score > baseline + EPS
                    and self._reads_last_answer(probe_set, scores, probe, baseline)
                ):
                    last_answer += 1
                elif score is not None and score > baseline + EPS:
                    paid.append(
                        {
                            "case": probe_set.case.label,
                            "what": probe.what,
                            "score": score,
                            "baseline": baseline,
                            "baseline_name": probe.baseline,
                            "completion": _clip(probe.exploit),
                            "hint": probe.hint,
                        }
                    )
        row = f"probe.{name}"
        if paid or crashed:
            parts = []
            if paid:
                worst = max(paid, key=lambda p: p["score"] - p["baseline"])
                against = (
                    "the lowest honest wrong answer" if worst["baseline_name"] == FLOOR else "the honest wrong answer"
                )
                cases = len({p["case"] for p in paid})
                parts.append(
                    f"paid on {cases} case(s), {len(paid)} of {checked} comparisons; e.g. {worst['case']}: "
                    f"{worst['what']} {worst['completion'][-60:]!r} scored {worst['score']:g} > {against} "
                    f"{worst['baseline']:g}" + (f" (hint: {worst['hint']})" if worst["hint"] else "")
                )
            if crashed:
                parts.append(f"reward failed on {len(crashed)}: " + "; ".join(crashed[:2]))
            self.add(row, FAIL, " | ".join(parts), paid=paid, failed=crashed)
        elif checked == 0:
            self.add(row, SKIP, f"{what}: no honest baseline scored to compare with ({inconclusive} inconclusive)")
        elif last_answer:
            self.add(
                row,
                PASS,
                f"{what}: paid on {last_answer} of {checked} comparisons, but only as the last "
                "answer: the same answers in the other order never beat the honest wrong one, so the "
                "reward reads the last answer alone (a self-correction policy) and extra answers "
                "cannot raise its expected value; paying any of them would fail here",
                last_answer_policy=True,
                last_answer_comparisons=last_answer,
            )
        else:
            self.add(row, PASS, f"{what}: never above the honest wrong answer ({checked} comparisons)")

    def _reads_last_answer(
        self, probe_set: ProbeSet, scores: dict[str, CallResult], probe: Probe, baseline: float
    ) -> bool:
        """The probe was paid, and its mirror (same answers, the right one not last) in the same style was not."""
        if not probe.mirror:
            return False
        for index, other in enumerate(probe_set.probes):
            if other.name == probe.mirror and other.baseline == probe.baseline:
                mirrored = self._number(scores.get(f"probe:{index}"))
                return mirrored is not None and mirrored <= baseline + EPS
        return False
