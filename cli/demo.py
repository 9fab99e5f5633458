"""`groupscore demo`: the main job on embedded defaults (for now: score the bundled math fixtures, print a summary)."""

from __future__ import annotations

import importlib
import json
import pkgutil
import statistics
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
MATH_FIXTURES = REPO_ROOT / "fixtures" / "math"
ITEM_FIELDS = ("id", "completion", "answer", "strict", "rel_tol", "timeout_s")  # the rest of a case is its label


@dataclass(frozen=True)
class LabelledCase:
    """One fixture line: a math item and the verdict a person worked out for it."""

    item: dict[str, Any]
    expected: bool
    expected_status: str | None
    category: str


def load_math_cases(folder: Path = MATH_FIXTURES) -> list[LabelledCase]:
    """Every labelled case of fixtures/math/*.jsonl, in file order."""
    files = sorted(folder.glob("*.jsonl"))
    if not files:
        raise FileNotFoundError(f"no math fixtures in {folder} (the demo runs from a source checkout)")
    cases = []
    for path in files:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            raw = json.loads(line)
            try:
                item = {"verifier": "math", **{k: raw[k] for k in ITEM_FIELDS if k in raw}}
                cases.append(LabelledCase(item, bool(raw["expected"]), raw.get("expected_status"), raw["category"]))
            except KeyError as missing:
                raise ValueError(f"{path.name}:{number}: missing key {missing}") from None
    return cases


def agrees(case: LabelledCase, reward: float, status: str) -> bool:
    """The verdict matches the label (an error never does, even on a negative)."""
    return status != "error" and (reward >= 0.5) == case.expected and case.expected_status in (None, status)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run_demo(run_dir: Path) -> int:
    """Score the bundled math fixtures one by one, write the verdicts under run_dir, print a table per category."""
    import groupscore.verifiers.math as math_package
    from groupscore.verifiers import workers
    from groupscore.verifiers.batch import score_one

    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    cases = load_math_cases()
    print(f"groupscore demo: scoring {len(cases)} labelled math cases from {MATH_FIXTURES.relative_to(REPO_ROOT)}/")

    # Load the math verifier here and in the bounded workers first: start-up is not any case's latency.
    math_modules = [f"groupscore.verifiers.math.{m.name}" for m in pkgutil.iter_modules(math_package.__path__)]
    for name in math_modules:
        importlib.import_module(name)
    workers.warm_up(math_modules)

    # Score each case in turn and time it: these are the latencies a trainer calling the verifier would see.
    results = []
    started = time.perf_counter()
    for case in cases:
        t0 = time.perf_counter()
        verdict = score_one(case.item)
        latency_ms = (time.perf_counter() - t0) * 1000
        results.append((case, verdict, latency_ms))
    elapsed_s = time.perf_counter() - started

    verdicts_path = run_dir / "math_fixtures_verdicts.jsonl"
    with verdicts_path.open("w", encoding="utf-8") as out:
        for case, verdict, latency_ms in results:
            record = {**verdict.model_dump(mode="json", exclude_none=True), "category": case.category,
                      "expected": case.expected, "agrees": agrees(case, verdict.reward, verdict.status.value),
                      "latency_ms": round(latency_ms, 3)}
            out.write(json.dumps(record) + "\n")

    # One row per category family (the part before "/"), then the total.
    by_family: dict[str, list] = defaultdict(list)
    for row in results:
        by_family[row[0].category.split("/")[0]].append(row)
    by_family["all"] = results
    header = f"{'category':<16}{'cases':>7}{'agree':>8}{'agree %':>9}{'mean reward':>13}{'p50 ms':>9}{'p99 ms':>9}"
    print(header)
    print("-" * len(header))
    for family, rows in by_family.items():
        if family == "all":
            print("-" * len(header))
        agreeing = sum(agrees(case, verdict.reward, verdict.status.value) for case, verdict, _ in rows)
        latencies = [latency for _, _, latency in rows]
        print(f"{family:<16}{len(rows):>7}{agreeing:>8}{100 * agreeing / len(rows):>8.1f}%"
              f"{statistics.fmean(verdict.reward for _, verdict, _ in rows):>13.3f}"
              f"{percentile(latencies, 0.50):>9.2f}{percentile(latencies, 0.99):>9.2f}")

    disagreeing = [(case, verdict) for case, verdict, _ in results
                   if not agrees(case, verdict.reward, verdict.status.value)]
    timeouts = sum(verdict.status.value == "timeout" for _, verdict, _ in results)
    errors = [verdict for _, verdict, _ in results if verdict.status.value == "error"]
    print(f"\n{len(results) / elapsed_s:.0f} verdicts/s on one core; {timeouts} timeouts; {len(errors)} errors; "
          f"verdicts in {verdicts_path}")
    for case, verdict in disagreeing[:10]:
        print(f"  disagrees: {case.item['id']} ({case.category}): expected {'correct' if case.expected else 'wrong'}, "
              f"got {verdict.status.value} [{verdict.reason}]")
    if len(disagreeing) > 10:
        print(f"  ... and {len(disagreeing) - 10} more (see {verdicts_path.name})")
    return 1 if errors else 0
