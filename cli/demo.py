"""`groupscore demo`: the main job on embedded defaults.

It starts the scoring service on a free loopback port, scores the bundled math and code fixtures through it, then runs
the GRPO demo (SFT cold start, preflight, GRPO with rewards from that service, evaluation) and prints pass@1 before
and after. Everything it writes goes under the run folder.
"""

from __future__ import annotations

import json
import statistics
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Package data, so that the demo runs the same from a checkout and from an installed wheel: the labelled math cases
# and the code items are this package's data/, the code tasks are the trainer's bundled tasksets (train/tasks/).
DATA = Path(__file__).resolve().with_name("data")
MATH_FIXTURES = DATA / "math"
CODE_FIXTURES = [DATA / "code" / "cli_items.jsonl"]


@dataclass(frozen=True)
class LabelledCase:
    """One fixture line: a math item and the verdict a person worked out for it."""

    item: dict[str, Any]
    expected: bool
    expected_status: str | None
    category: str


def load_math_cases(folder: Path = MATH_FIXTURES) -> list[LabelledCase]:
    """Every labelled case of data/math/*.jsonl, in file order."""
    from groupscore.verifiers.math.item import MathItem

    item_fields = MathItem.model_fields.keys() - {"verifier"}
    paths = sorted(folder.glob("*.jsonl"))
    if not paths:
        raise FileNotFoundError(f"no math fixtures in {folder} (the package's data files are missing)")
    cases = []
    for path in paths:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            raw = json.loads(line)
            try:
                # A case is a math item (its options included: profile, percent, question, ...) plus its label.
                item = {"verifier": "math", **{k: raw[k] for k in item_fields if k in raw}}
                expected = raw["expected"]  # True/False (is the answer right?), or the status the verdict must have
                if isinstance(expected, str):
                    cases.append(LabelledCase(item, expected == "correct", expected, raw["category"]))
                else:
                    cases.append(LabelledCase(item, bool(expected), raw.get("expected_status"), raw["category"]))
            except KeyError as missing:
                raise ValueError(f"{path.name}:{number}: missing key {missing}") from None
    return cases


def agrees(case: LabelledCase, reward: float, status: str) -> bool:
    """The verdict matches the label (an error never does, even on a negative)."""
    return status != "error" and (reward >= 0.5) == case.expected and case.expected_status in (None, status)


def score_math_fixtures(client: Any, run_dir: Path) -> bool:
    """Score every labelled math case through the service; write the verdicts, print a table per category family."""
    cases = load_math_cases()
    print(f"\n[1/3] math: {len(cases)} labelled cases from {MATH_FIXTURES}/ through the service")
    started = time.perf_counter()
    verdicts = client.score_raw([case.item for case in cases])
    elapsed_s = time.perf_counter() - started

    verdicts_path = run_dir / "math_fixtures_verdicts.jsonl"
    with verdicts_path.open("w", encoding="utf-8") as out:
        for case, verdict in zip(cases, verdicts):
            out.write(
                json.dumps(
                    {
                        **verdict,
                        "category": case.category,
                        "expected": case.expected,
                        "agrees": agrees(case, verdict["reward"], verdict["status"]),
                    }
                )
                + "\n"
            )

    by_family: dict[str, list] = defaultdict(list)
    for case, verdict in zip(cases, verdicts):
        by_family[case.category.split("/")[0]].append((case, verdict))
    by_family["all"] = list(zip(cases, verdicts))
    header = f"{'category':<16}{'cases':>7}{'agree':>8}{'agree %':>9}{'mean reward':>13}"
    print(header)
    print("-" * len(header))
    for family, rows in by_family.items():
        if family == "all":
            print("-" * len(header))
        agreeing = sum(agrees(case, v["reward"], v["status"]) for case, v in rows)
        print(
            f"{family:<16}{len(rows):>7}{agreeing:>8}{100 * agreeing / len(rows):>8.1f}%"
            f"{statistics.fmean(v['reward'] for _, v in rows):>13.3f}"
        )

    disagreeing = [(case, v) for case, v in zip(cases, verdicts) if not agrees(case, v["reward"], v["status"])]
    errors = sum(v["status"] == "error" for v in verdicts)
    timeouts = sum(v["status"] == "timeout" for v in verdicts)
    print(
        f"{len(cases) / elapsed_s:.0f} verdicts/s over HTTP; {timeouts} timeouts; {errors} errors; "
        f"verdicts in {verdicts_path}"
    )
    for case, verdict in disagreeing[:10]:
        print(
            f"  disagrees: {case.item['id']} ({case.category}): expected {'correct' if case.expected else 'wrong'}, "
            f"got {verdict['status']} [{verdict['reason']}]"
        )
    return errors == 0


def load_code_items() -> list[dict[str, Any]]:
    """The code fixtures (honest programs and reward hacks), then each bundled code task's reference solution."""
    from groupscore.train.demo import TASKSETS

    items = [json.loads(line) for path in CODE_FIXTURES for line in path.read_text().splitlines() if line.strip()]
    for path in sorted((TASKSETS / "code").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():
                task = json.loads(line)
                items.append({**task["item"], "id": f"{task['id']} (reference)", "completion": task["solution"]})
    return items


def score_code_fixtures(client: Any, run_dir: Path) -> bool:
    """Score the code fixtures through the service (programs run in the sandbox); print one row per item."""
    items = load_code_items()
    print(f"\n[2/3] code: {len(items)} programs run in the sandbox through the service")
    verdicts = client.score_raw(items)
    with (run_dir / "code_fixtures_verdicts.jsonl").open("w", encoding="utf-8") as out:
        for verdict in verdicts:
            out.write(json.dumps(verdict) + "\n")
    print(f"{'item':<28}{'reward':>8}  {'status':<11}{'public':>8}{'hidden':>8}")
    for verdict in verdicts:
        d = verdict.get("details", {})
        public = f"{d['public_passed']}/{d['public_total']}" if "public_total" in d else "-"
        hidden = f"{d['hidden_passed']}/{d['hidden_total']}" if "hidden_total" in d else "-"
        print(f"{str(verdict['id'])[:27]:<28}{verdict['reward']:>8.2f}  {verdict['status']:<11}{public:>8}{hidden:>8}")
    # The fixtures include reward hacks and one malformed item on purpose; the reference solutions must all pass.
    return all(v["reward"] == 1.0 for v in verdicts if str(v["id"]).endswith("(reference)"))


def run_env_demo(run_dir: Path) -> int:
    """The environment demo: GRPO on whole episodes (tool calls in sessions' jails, the verdict as the reward)."""
    import os

    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY"):
        os.environ.setdefault(var, "1")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # TRL's rollout function is how episodes plug in
    from groupscore.train.demo import run_env_training_demo

    print("groupscore demo --env: a tiny Llama learns to call a calculator's tools, in sessions of their own")
    summary = run_env_training_demo(Path(run_dir).resolve())
    if summary.eval is not None:
        print(
            f"\nheld-out pass@1: {summary.eval.before.pass_at_1:.3f} before GRPO -> "
            f"{summary.eval.after.pass_at_1:.3f} after ({summary.seconds} s)"
        )
    print(f"  summary: {Path(run_dir).resolve() / 'summary.json'}")
    return 0


def run_demo(run_dir: Path | None, train: bool = True, env: bool = False) -> int:
    """The whole story on embedded defaults: service, math and code scoring, then GRPO training and evaluation
    (`env`: the environment demo instead, run_env_demo)."""
    import os

    if env:
        return run_env_demo(Path(run_dir or "runs/demo-env"))
    run_dir = Path(run_dir or "runs/demo")

    # The demo's model and data ship with the package: it never needs the hub (the trainer leaves these to its user).
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY"):
        os.environ.setdefault(var, "1")
    from groupscore.client.http import ScoreClient
    from groupscore.service.embedded import start_embedded

    run_dir = Path(run_dir).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    print("groupscore demo: starting the scoring service on a free loopback port ...")
    with start_embedded() as url, ScoreClient(url) as client:
        print(f"scoring service ready at {url}")
        ok = score_math_fixtures(client, run_dir)
        ok = score_code_fixtures(client, run_dir) and ok
        if not train:
            return 0 if ok else 1
        from groupscore.train.demo import run_training_demo

        print("\n[3/3] GRPO: tiny Llama, SFT cold start, preflight, GRPO with rewards from the service, evaluation")
        summary = run_training_demo(run_dir / "train", service_urls=[url])

    if summary.eval is not None:
        print(
            f"\nheld-out pass@1: {summary.eval.before.pass_at_1:.3f} before GRPO -> "
            f"{summary.eval.after.pass_at_1:.3f} after"
        )
    for name, path in (summary.plots or {}).items():
        print(f"  plot {name}: {path}")
    print(f"  summary: {run_dir / 'train' / 'summary.json'}")
    return 0 if ok else 1
