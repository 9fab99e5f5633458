"""Honest one-line endings and hedges, paid by groupscore's math verifier and by Math-Verify, in one run.

    .venv/bin/python bench/math_honest_bench.py [--json out.json]

The corpus is the generated one of tests/verifiers/math/test_math_honest_oneliners.py (templates x values x where
the line stands x reference styles): honest endings (each must be paid), the same lines with a wrong value (none may
be), and hedged lines scored against each of their two values (none may be paid against either). Each side scores
every pair: groupscore under its `default` and `math_verify` profiles, Math-Verify as bench/math_bench.py calls it
(`verify(parse(gold), parse(completion))`, a bare gold in `$..$`). Rates, not times: these are verdicts.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import sys
import time
import warnings
from pathlib import Path

from groupscore.verifiers.math.item import MathItem
from groupscore.verifiers.math.verify import score_math
from groupscore.verifiers.registry import VERSIONS

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "verifiers" / "math" / "test_math_honest_oneliners.py"


def corpus():
    """The test module's generated corpus (loaded from its file: bench scripts import nothing of the tests' own)."""
    spec = importlib.util.spec_from_file_location("honest_corpus", CORPUS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look themselves up there
    spec.loader.exec_module(module)
    return module


def ours(profile: str):
    def paid(completion: str, answer: str) -> bool:
        item = MathItem(completion=completion, answer=answer, profile=profile, timeout_s=10.0)
        return score_math(item).reward >= 1.0

    return paid


def peer(completion: str, answer: str) -> bool:
    from math_verify import parse, verify

    gold = answer if ("$" in answer or "\\boxed" in answer) else f"${answer}$"
    try:
        return bool(verify(parse(gold), parse(completion)))
    except Exception:  # noqa: BLE001 - its failures count as unpaid, as in training
        return False


def rates(paid, module) -> dict[str, list[int]]:
    honest = [(c, a) for c, a in module.HONEST]
    return {
        "honest endings paid": [sum(paid(c, a) for c, a in honest), len(honest)],
        "the issue's cases paid": [sum(paid(c, a) for c, a in module.ISSUE_CASES), len(module.ISSUE_CASES)],
        "wrong values paid": [sum(paid(c, a) for c, a in module.WRONG), len(module.WRONG)],
        "hedged lines paid (against either value)": [
            sum(paid(c, first) or paid(c, second) for c, (first, second) in module.HEDGES),
            len(module.HEDGES),
        ],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    module = corpus()
    sides = {f"groupscore math@{VERSIONS['math']} ({p})": ours(p) for p in ("default", "math_verify")}
    sides["Math-Verify"] = peer
    out, seconds = {}, {}
    for name, paid in sides.items():
        started = time.perf_counter()
        out[name] = rates(paid, module)
        seconds[name] = round(time.perf_counter() - started, 1)
    rows = list(next(iter(out.values())))
    print(f"| | {' | '.join(sides)} |\n| --- |{' --- |' * len(sides)}")
    for row in rows:
        print(f"| {row} | " + " | ".join(f"{out[s][row][0]:,} / {out[s][row][1]:,}" for s in sides) + " |")
    print(f"seconds per side: {seconds}; {platform.python_version()}, {platform.machine()}")
    if args.json:
        args.json.write_text(json.dumps({"rates": out, "seconds": seconds}, indent=2))


if __name__ == "__main__":
    main()
