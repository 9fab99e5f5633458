"""`groupscore check TRAIN.yaml --cases cases.jsonl`: every reward a training config pays, checked before training.

A trainer config (`groupscore train`) names its rewards in two places: `service.reward`, the service's composite spec
(scored here in-process by the same verifiers), and `rewards.functions`, the user's own `module:function`s. Each is
checked as its own target, in that order; the exit code is the worst of theirs. The YAML is read here directly (the
checks do not import the trainer): only those two fields matter.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from groupscore.testing.cases import Case
from groupscore.testing.check_base import CheckConfig
from groupscore.testing.targets import Target, TargetError, _verdict_value, callable_target, infer_kind, item_for_case
from groupscore.testing.targets import _validate_items as validate_items


class CompositeRewardTarget(Target):
    """The service's composite reward (`service.reward`), scored in this process by the verifiers, item by item."""

    def __init__(self, spec: dict[str, Any], label: str):
        from pydantic import ValidationError

        from groupscore.verifiers.composite import CheckedRewardSpec

        try:
            self.reward_spec = CheckedRewardSpec.model_validate(spec)
        except ValidationError as exc:
            raise TargetError(f"{label}: {exc.errors(include_url=False)[0]['msg']}") from None
        self.description = f"{label} ({', '.join(c.name for c in self.reward_spec.components)})"

    def validate(self, cases: Sequence[Case]) -> None:
        validate_items(cases, infer_kind)

    def score(self, cases: Sequence[Case]) -> list[Any]:
        from groupscore.verifiers.composite import score_composite
        from groupscore.verifiers.registry import parse_item

        return [
            _verdict_value(
                score_composite(parse_item(item_for_case(c, infer_kind(c))), self.reward_spec).model_dump(mode="json")
            )
            for c in cases
        ]


def targets_of(config_path: Path) -> list[Target]:
    """The rewards a training config pays: its composite spec (or each item's own verifier), then its functions."""
    import yaml

    from groupscore.testing.targets import load_callable

    try:
        with config_path.open(encoding="utf-8") as stream:  # a YAML error then names the file, not "<unicode string>"
            raw = yaml.safe_load(stream)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{config_path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(config_path)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise TargetError(f"{where}: not valid YAML: {problem}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TargetError(f"cannot read the training config {config_path}: {exc}") from None
    if not isinstance(raw, dict):
        raise TargetError(f"{config_path}: expected a mapping at the top level")
    service = raw.get("service") or {}
    spec = service.get("reward") if isinstance(service, dict) else None
    targets: list[Target] = []
    if spec:
        targets.append(CompositeRewardTarget(spec, f"{config_path.name}: service.reward"))
    functions = (raw.get("rewards") or {}).get("functions") or []
    for index, entry in enumerate(functions):
        ref = str(entry.get("function", "")) if isinstance(entry, dict) else ""
        module, _, attr = ref.rpartition(":")
        if module.endswith(".py") and not Path(module).is_absolute():
            beside = config_path.resolve().parent / module
            ref = f"{beside}:{attr}" if beside.is_file() else ref  # a file beside the config, as the trainer reads it
        try:
            targets.append(callable_target(load_callable(ref), ref))
        except TargetError as exc:
            raise TargetError(f"{config_path.name}: rewards.functions.{index}.function: {exc}") from None
    if not targets:
        raise TargetError(
            f"{config_path}: names no reward to check (service.reward or rewards.functions); check each item's "
            "verifier by its kind instead (groupscore check math --cases ...)"
        )
    return targets


def check_train_config(
    config_path: Path,
    cases: Sequence[Case],
    report: Path | None,
    config: CheckConfig,
    scratch: Callable[[], AbstractContextManager[None]],
) -> int:
    """Run the checks on each reward of the config; print a table per reward; one JSON report listing them all.
    The exit code is the worst: 2 (a checker fault) over 1 (a check failed) over 0. `scratch`: where hypothesis may
    keep its files during a check (the command's temporary folder)."""
    import json
    import sys

    from groupscore.testing.checks import CheckRun

    if not config_path.is_file():
        raise TargetError(f"training config not found: {config_path}")
    targets = targets_of(config_path)
    for target in targets:
        target.validate(cases)  # every target's cases problem before any check runs
    results = []
    for target in targets:
        with scratch():
            result = CheckRun(target, cases, config).run()
        print(f"== {target.description}")
        print(result.table())
        results.append(result)
    worst = max(r.exit_code for r in results)
    if report is not None:
        body = {"config": str(config_path), "exit_code": worst, "targets": [r.to_dict() for r in results]}
        report.write_text(json.dumps(body, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
        print(f"report written to {report}")
    failed = sum(len(r.failures) for r in results)
    if worst == 2:
        print("groupscore check: error: the checker itself failed on the ERROR rows above", file=sys.stderr)
    elif failed:
        print(f"groupscore check: {failed} check(s) failed over {len(results)} rewards", file=sys.stderr)
    return worst
