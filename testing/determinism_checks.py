"""Determinism checks: the same batch scored again, in another composition (reversed, each case alone), from
several threads at once, and in fresh processes with other hash seeds, each compared with the first batch's scores."""

from __future__ import annotations

from typing import Any

from groupscore.testing.call_result import CallResult
from groupscore.testing.calls import ProcessCaller
from groupscore.testing.check_base import FAIL, PASS, SKIP, CheckRunBase
from groupscore.testing.targets import TargetError


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


class DeterminismChecks(CheckRunBase):
    """determinism.repeat, .batch_composition, .threads and .processes."""

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
        self._compare(
            "determinism.repeat",
            reference,
            repeats,
            f"{self.config.repeats} more scorings of the batch gave identical rewards",
        )

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
        self._compare(
            "determinism.batch_composition",
            reference,
            others,
            "a completion's reward does not depend on the rest of its batch (alone, in order, reversed)",
        )

    def check_threads(self) -> None:
        reference = self._reference_for("determinism.threads")
        if reference is None:
            return
        assert self.caller is not None
        n = self.config.threads
        outcomes = self.caller.call_in_threads(self.cases, n, self.config.timeout_s * len(self.cases) * n)
        self._compare(
            "determinism.threads",
            reference,
            [(f"thread {i}", o) for i, o in enumerate(outcomes)],
            f"{n} threads scoring the batch at once agree with the sequential scores",
        )

    def check_processes(self) -> None:
        reference = self._reference_for("determinism.processes")
        if reference is None:
            return
        spec = self.target.spec()
        if spec is None or self.config.processes < 1:
            self.add(
                "determinism.processes",
                SKIP,
                "the target cannot be rebuilt in a fresh process (define it at module level to enable this)",
            )
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
                others.append(
                    (
                        f"process with PYTHONHASHSEED={seed}",
                        caller.call(self.cases, self.config.timeout_s * len(self.cases)),
                    )
                )
        self._compare(
            "determinism.processes",
            reference,
            others,
            f"{self.config.processes} fresh processes (other hash seeds) give identical rewards",
        )
