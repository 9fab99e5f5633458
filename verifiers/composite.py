"""Composite rewards: several verifier components scored on one completion, weighted, gated, folded into [0, 1].

The spec itself (components, weights, gates, normalisation) is wire schema: `groupscore.schema.reward`, whose
docstring says how the total is formed. Here: the kind-level check of a spec (`CheckedRewardSpec`: do the params fit
the kind's item model?), the item each component scores, and the folding of their verdicts into one.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError, model_validator

from groupscore.schema.item import ItemBase
from groupscore.schema.names import did_you_mean
from groupscore.schema.reward import Component, RewardSpec
from groupscore.schema.verdict import Status, Verdict, join_versions, split_versions
from groupscore.verifiers.registry import describe_error, parse_item, score_item


class CheckedRewardSpec(RewardSpec):
    """A RewardSpec whose components' params are checked against their kinds' item models when it is parsed, so a bad
    spec fails the request (or the config) with the field path, not every item it would score."""

    @model_validator(mode="after")
    def _params_fit_their_kinds(self) -> CheckedRewardSpec:
        # Missing fields are not errors here: when the item is of the same kind, they come from the item.
        for index, component in enumerate(self.components):
            if component.verifier is None:
                continue
            try:
                parse_item({"verifier": component.verifier, "completion": "", **component.params})
            except ValidationError as exc:
                problems = [e for e in exc.errors(include_url=False) if e["type"] != "missing"]
                if problems:
                    # loc[0] is the union's tag (the kind); the rest is the path inside params.
                    raise ValueError(
                        "; ".join(
                            f"components.{index}.params.{'.'.join(str(p) for p in e['loc'][1:])}: {e['msg']}"
                            for e in problems
                        )
                    ) from None
        return self


def load_reward_spec(path: Path | str) -> CheckedRewardSpec:
    """A RewardSpec from a JSON file; ValueError says what is wrong (the file, its JSON, or which field)."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ValueError(f"cannot read the reward spec {path}: {exc.strerror or exc}") from None
    try:
        return CheckedRewardSpec.model_validate_json(text)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '<spec>'}: {e['msg']}{_spec_hint(e)}"
            for e in exc.errors(include_url=False)
        )
        raise ValueError(f"bad reward spec {path}: {problems}") from None


def _spec_hint(error: Any) -> str:
    """For a field the spec or a component does not have: the closest one (`wieght`: did you mean 'weight'?)."""
    if error["type"] != "extra_forbidden":
        return ""
    loc = error["loc"]
    known = Component.model_fields if len(loc) == 3 and loc[0] == "components" else RewardSpec.model_fields
    return did_you_mean(str(loc[-1]), [*known, "normalise"] if known is RewardSpec.model_fields else known)


def component_item(item: ItemBase, component: Component) -> ItemBase:
    """The item one component scores (raises ValidationError when the params do not fit the kind)."""
    if component.verifier is None or component.verifier == item.verifier:
        if not component.params:
            return item
        return parse_item({**item.model_dump(), **component.params})
    return parse_item(
        {"verifier": component.verifier, "id": item.id, "completion": item.completion, **component.params}
    )


def total_reward(scores: dict[str, float], spec: RewardSpec) -> tuple[float, str | None]:
    """The normalised total of component scores, and the name of the gate that zeroed it (if one did)."""
    for component in spec.components:
        if component.gate and scores[component.name] < component.gate_threshold:
            return 0.0, component.name
    weighted = sum(component.weight * scores[component.name] for component in spec.components)
    if spec.normalize == "weighted_mean":
        total = weighted / sum(component.weight for component in spec.components)
    else:
        total = weighted
    return min(1.0, max(0.0, total)), None


def score_composite(item: ItemBase, spec: RewardSpec) -> Verdict:
    """Score every component on the item and fold them into one verdict.

    The verdict's status, extracted answer and details are the first component's (the primary outcome);
    its reason lists every component; `components` holds each component's score.
    """
    verdicts: dict[str, Verdict] = {}
    for component in spec.components:
        try:
            verdicts[component.name] = score_item(component_item(item, component))
        except ValidationError as exc:
            verdicts[component.name] = Verdict.error(item.id, f"params do not fit this item: {describe_error(exc)}")
    scores = {name: verdict.reward for name, verdict in verdicts.items()}
    total, failed_gate = total_reward(scores, spec)
    primary = verdicts[spec.components[0].name]
    parts = [
        f"{name}={v.reward:g} ({v.status.value}{': ' + v.reason if v.reason else ''})" for name, v in verdicts.items()
    ]
    reason = "; ".join(parts)
    if failed_gate is not None:
        reason = f"gate {failed_gate!r} not met, total 0; {reason}"
    status = primary.status
    if status is not Status.error and any(v.status is Status.error for v in verdicts.values()):
        status = Status.error  # a component that could not score makes the total unreliable: say so
    details: dict[str, Any] = {
        "components": {
            name: {**v.details, "status": v.status.value, "reason": v.reason} for name, v in verdicts.items()
        }
    }
    infra = [v for v in verdicts.values() if v.status is Status.infra_error]
    if status is not Status.error and infra:
        # A component the infrastructure failed to judge: the total is no score either, whatever the others paid.
        status, total = Status.infra_error, 0.0
        reason = f"a component was not scored (infra_error), so the total is not a score; {reason}"
        details["infra"] = infra[0].details.get("infra", "internal")
    return Verdict(
        id=item.id,
        reward=total,
        status=status,
        extracted=primary.extracted,
        reason=reason,
        components=scores,
        details=details,
        verifier_version=combined_version(verdicts.values()),
    )


def combined_version(verdicts: Iterable[Verdict]) -> str | None:
    """A composite verdict's `verifier_version`: every kind its components' verdicts name, "format@1+math@2".

    Components of one kind share its version, so one entry per kind loses nothing; a component nothing judged (an
    invalid params error, an infra_error) adds none, and None means no component was judged."""
    versions: dict[str, int] = {}
    for verdict in verdicts:
        if verdict.verifier_version is not None:
            versions.update(split_versions(verdict.verifier_version))
    return join_versions(versions) if versions else None
