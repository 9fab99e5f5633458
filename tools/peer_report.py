"""Score Math-Verify's extracted test cases with groupscore's default math API and list where the labels disagree.

Usage: .venv/bin/python tools/peer_report.py [--all] [--peer] [--profile math_verify] > /tmp/brief/peer_report.txt

Each pair is scored as the item {verifier: math, completion: prediction, answer: gold} with every option at its
default. Prints the agreement on the default-API cases (the peer's default extraction targets and verify options)
and on all 270 pairs, then one block per disagreement. --all also lists agreements; --peer runs the installed
math-verify package's own default parse/verify on the same pairs, side by side.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

SUITE = Path(__file__).resolve().parent.parent / "fixtures" / "peers" / "math_verify.jsonl"


def load_cases(path: Path = SUITE) -> list[dict]:
    """The labelled gold/prediction pairs (the peer's string-extraction-only cases have no gold and are left out)."""
    cases = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [c for c in cases if c["kind"] == "pair"]


def groupscore_label(case: dict, **options: object) -> tuple[int, object]:
    """(label, verdict) of the default math API, with `options` (MathItem fields) where a convention is tried."""
    from groupscore.verifiers.math.item import MathItem
    from groupscore.verifiers.math.verify import score_math

    item = MathItem(completion=case["prediction"], answer=case["gold"], timeout_s=10.0, **options)
    verdict = score_math(item)
    return int(verdict.reward == 1.0), verdict


def peer_label(case: dict) -> int | None:
    """The installed math-verify's default `verify(parse(gold), parse(pred))`, or None if it is not installed."""
    try:
        from math_verify import parse, verify
    except ImportError:
        return None
    try:
        return int(verify(parse(case["gold"]), parse(case["prediction"])))
    except Exception:  # noqa: BLE001 - the peer raising counts as its 0
        return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="list agreements too")
    parser.add_argument("--peer", action="store_true", help="also run the installed math-verify's default API")
    parser.add_argument("--profile", default="default", help="the math item's convention profile (math_verify)")
    args = parser.parse_args(argv)
    cases = load_cases()
    rows = []
    for case in cases:
        label, verdict = groupscore_label(case, profile=args.profile)
        rows.append((case, label, verdict, peer_label(case) if args.peer else None))
    default = [r for r in rows if r[0]["default_api"]]
    agree = sum(r[1] == r[0]["expected"] for r in default)
    agree_all = sum(r[1] == r[0]["expected"] for r in rows)
    print(f"default-API cases: {agree}/{len(default)} agree ({100 * agree / len(default):.1f}%)")
    print(f"all pairs, default options: {agree_all}/{len(rows)} agree ({100 * agree_all / len(rows):.1f}%)")
    if args.peer:
        peer_all = sum(r[3] == r[0]["expected"] for r in rows)
        peer_default = sum(r[3] == r[0]["expected"] for r in default)
        print(
            f"math-verify default parse/verify: {peer_default}/{len(default)} default-API, {peer_all}/{len(rows)} all"
        )
    print()
    for case, label, verdict, peer in rows:
        if label == case["expected"] and not args.all:
            continue
        mark = "ok  " if label == case["expected"] else "DIFF"
        scope = "default" if case["default_api"] else "non-default:" + ",".join(case["peer_options"]["non_default"])
        print(
            f"{mark} {case['id']} [{scope}] expected={case['expected']} groupscore={label}"
            + (f" math-verify={peer}" if args.peer else "")
        )
        print(f"     gold: {case['gold'][:300]!r}")
        print(f"     pred: {case['prediction'][-300:]!r}")
        print(
            f"     verdict: status={verdict.status} extracted={str(verdict.extracted)[:120]!r} reason={verdict.reason}"
        )
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except BrokenPipeError:  # `| head`
        raise SystemExit(0) from None
