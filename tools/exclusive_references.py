"""Every hedge of tests/verifiers/math/test_math_exclusive_references.py against every set of exclusive references it
derives, exhaustively (the test samples them): prints, per profile and hedge, how many completions were paid more
than once.

Usage: .venv/bin/python tools/exclusive_references.py
"""

from __future__ import annotations

import collections
import itertools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "verifiers" / "math"))

import test_math_exclusive_references as generators

from groupscore.verifiers.math.conventions import PROFILES


def main() -> int:
    print(f"{len(generators.EXCLUSIVE_SETS)} sets of exclusive references")
    failed = False
    for profile in sorted(PROFILES):
        paid_twice: collections.Counter[str] = collections.Counter()
        tried = 0
        example: dict[str, tuple[str, tuple[str, ...]]] = {}
        for references, values in generators.EXCLUSIVE_SETS:
            for name, hedge in generators.HEDGES.items():
                for order in itertools.islice(itertools.permutations(values), 2):
                    completion = hedge(list(order))
                    tried += 1
                    if sum(generators._paid(completion, references, profile)) > 1:
                        paid_twice[name] += 1
                        example.setdefault(name, (completion, references))
        print(f"{profile}: {tried} completions, paid more than once: {dict(paid_twice) or 'none'}")
        for name, (completion, references) in example.items():
            print(f"  {name}: {completion!r} against {references}")
        failed |= bool(paid_twice)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
