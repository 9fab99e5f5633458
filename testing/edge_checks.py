"""Edge-input checks: fixed edge completions (empty, 1 MB, unicode, truncated, malformed...) built around the first
cases, and hypothesis-drawn ones (a fixed seed), each scored alone: no exception, no hang, a usable reward."""

from __future__ import annotations

from groupscore.testing.cases import Case
from groupscore.testing.check_base import FAIL, PASS, SKIP, CheckRunBase, value_problem
from groupscore.testing.edges import edge_completions

MAX_FUZZ_HANGS = 2


class EdgeChecks(CheckRunBase):
    """edge_inputs.no_crash, .no_hang, .valid_rewards and .fuzz."""

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
        self._edge_row(
            "edge_inputs.no_crash",
            crashes,
            total,
            "inputs raised or killed the reward",
            "no exception on empty, whitespace, 1 MB, unicode/RTL/emoji, null bytes, truncated, "
            "malformed LaTeX/JSON, broken code fences",
        )
        self._edge_row(
            "edge_inputs.no_hang",
            hangs,
            total,
            f"inputs got no answer within {bound}",
            f"every call answered within {bound}",
        )
        self._edge_row(
            "edge_inputs.valid_rewards",
            invalid,
            total,
            "inputs got an unusable reward",
            "every answer is a number in range (or None)",
        )

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

        @settings(
            max_examples=self.config.fuzz_examples,
            derandomize=True,
            database=None,
            deadline=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(completions(base=case.completion_text))
        def fuzz(text: str) -> None:
            nonlocal seen
            if sum(f.startswith("hang") for f in failures) >= MAX_FUZZ_HANGS:
                return  # each further hang would only cost another full bound
            seen += 1
            outcome = self.call([case.with_completion(text)])
            problem = (
                ("hang" if outcome.hang else f"raised {outcome.error}")
                if not outcome.ok
                else value_problem(outcome.values[0], self.config)
                if outcome.values
                else "no value"
            )
            if problem:
                failures.append(f"{problem} on {text[:60]!r}{'...' if len(text) > 60 else ''} ({len(text)} chars)")

        fuzz()
        if failures:
            self.add(
                "edge_inputs.fuzz",
                FAIL,
                f"{len(failures)} of {seen} generated completions: " + "; ".join(failures[:3]),
                failures=failures,
            )
        else:
            self.add(
                "edge_inputs.fuzz",
                PASS,
                f"{seen} hypothesis-generated edge completions (fixed seed): no exception, no hang, valid rewards",
            )
