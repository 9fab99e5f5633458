"""Composite rewards: several verifier components scored on one completion, weighted, gated, folded into [0, 1].

A `RewardSpec` names components. Each component scores the same completion with one verifier kind:

- `verifier` left out (or equal to the item's own kind): the item itself, with `params` overriding its fields
  (e.g. `{"name": "strict", "params": {"strict": true}}`);
- another kind: a fresh item of that kind built from the item's `id` and `completion` plus `params`
  (e.g. `{"name": "format", "verifier": "format", "params": {...}}`).

The total is folded into [0, 1] so that it is still a valid `Verdict.reward`:

- `weighted_mean` (default): sum(w_i * s_i) / sum(w_i). "correctness 1.0 + format 0.2" gives (c + 0.2 f) / 1.2,
  so a correct, well-formatted answer scores 1 and the ratio between components is what the weights say.
- `clipped_sum`: min(1, sum(w_i * s_i)), for weights that already sum to 1 ("0.7 outcome + 0.3 format") or
  for bonuses meant to saturate.

A component marked `gate` must score at least its `gate_threshold` (default 1.0), otherwise the total is 0
whatever the other components say ("format required, else 0"). Every component's own score is kept in
`Verdict.components`, gated or not, so a trainer can log each one.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from groupscore.verifiers.registry import KINDS, describe_error, parse_item, score_item
from groupscore.verifiers.schema import ItemBase, Status, Verdict, join_versions, split_versions

# Fields a component may not set through params: they always come from the item being scored.
_RESERVED = frozenset({"id", "completion", "verifier"})


class Component(BaseModel):
    """One scored part of a composite reward."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z0-9_.\-]{1,64}$",
                      description="Label of this component in results and logs (letters, digits, _ . -).")
    weight: float = Field(default=1.0, ge=0.0, le=1e6, description="Relative weight in the total.")
    verifier: str | None = Field(default=None, description="Verifier kind; left out: the item's own kind.")
    params: dict[str, Any] = Field(default_factory=dict,
                                   description="The kind's item fields (all but id, completion and verifier).")
    gate: bool = Field(default=False, description="When true, the total is 0 unless this component reaches the threshold.")
    gate_threshold: float = Field(default=1.0, ge=0.0, le=1.0)

    @field_validator("verifier")
    @classmethod
    def _verifier_is_known(cls, verifier: str | None) -> str | None:
        if verifier is not None and verifier not in KINDS:
            raise ValueError(f"unknown verifier kind {verifier!r}; known: {', '.join(sorted(KINDS))}")
        return verifier

    @field_validator("params")
    @classmethod
    def _params_leave_item_fields_alone(cls, params: dict[str, Any]) -> dict[str, Any]:
        reserved = sorted(_RESERVED & params.keys())
        if reserved:
            raise ValueError(f"params may not set {', '.join(reserved)}: they come from the item")
        return params


class RewardSpec(BaseModel):
    """Components, their weights and gates, and how the total is normalised into [0, 1]."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    components: list[Component] = Field(min_length=1, max_length=16)
    normalise: Literal["weighted_mean", "clipped_sum"] = "weighted_mean"

    @model_validator(mode="after")
    def _consistent(self) -> RewardSpec:
        names = [c.name for c in self.components]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"component names must be unique; repeated: {', '.join(duplicates)}")
        if sum(c.weight for c in self.components) <= 0.0:
            raise ValueError("at least one component needs a positive weight")
        # Params of a named kind can be checked now, so a bad spec fails the request, not every item. Missing fields
        # are not errors here: when the item is of the same kind, they come from the item.
        for index, component in enumerate(self.components):
            if component.verifier is not None:
                try:
                    parse_item({"verifier": component.verifier, "completion": "", **component.params})
                except ValidationError as exc:
                    problems = [e for e in exc.errors(include_url=False) if e["type"] != "missing"]
                    if problems:
                        # loc[0] is the union's tag (the kind); the rest is the path inside params.
                        raise ValueError("; ".join(
                            f"components.{index}.params.{'.'.join(str(p) for p in e['loc'][1:])}: {e['msg']}"
                            for e in problems)) from None
        return self


def load_reward_spec(path: Path | str) -> RewardSpec:
    """A RewardSpec from a JSON file; ValueError says what is wrong (the file, its JSON, or which field)."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ValueError(f"cannot read the reward spec {path}: {exc.strerror or exc}") from None
    try:
        return RewardSpec.model_validate_json(text)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '<spec>'}: {e['msg']}"
                             for e in exc.errors(include_url=False))
        raise ValueError(f"bad reward spec {path}: {problems}") from None


def component_item(item: ItemBase, component: Component) -> ItemBase:
    """The item one component scores (raises ValidationError when the params do not fit the kind)."""
    own_kind = item.verifier  # type: ignore[attr-defined]
    if component.verifier is None or component.verifier == own_kind:
        if not component.params:
            return item
        return parse_item({**item.model_dump(), **component.params})
    return parse_item({"verifier": component.verifier, "id": item.id, "completion": item.completion,
                       **component.params})


def total_reward(scores: dict[str, float], spec: RewardSpec) -> tuple[float, str | None]:
    """The normalised total of component scores, and the name of the gate that zeroed it (if one did)."""
    for component in spec.components:
        if component.gate and scores[component.name] < component.gate_threshold:
            return 0.0, component.name
    weighted = sum(component.weight * scores[component.name] for component in spec.components)
    if spec.normalise == "weighted_mean":
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
    parts = [f"{name}={v.reward:g} ({v.status.value}{': ' + v.reason if v.reason else ''})" for name, v in verdicts.items()]
    reason = "; ".join(parts)
    if failed_gate is not None:
        reason = f"gate {failed_gate!r} not met, total 0; {reason}"
    status = primary.status
    if status is not Status.error and any(v.status is Status.error for v in verdicts.values()):
        status = Status.error  # a component that could not score makes the total unreliable: say so
    details: dict[str, Any] = {"components": {name: {**v.details, "status": v.status.value, "reason": v.reason}
                                              for name, v in verdicts.items()}}
    infra = [v for v in verdicts.values() if v.status is Status.infra_error]
    if status is not Status.error and infra:
        # A component the infrastructure failed to judge: the total is no score either, whatever the others paid.
        status, total = Status.infra_error, 0.0
        reason = f"a component was not scored (infra_error), so the total is not a score; {reason}"
        details["infra"] = infra[0].details.get("infra", "internal")
    return Verdict(id=item.id, reward=total, status=status, extracted=primary.extracted, reason=reason,
                   components=scores, details=details, verifier_version=combined_version(verdicts.values()))


def combined_version(verdicts: Iterable[Verdict]) -> str | None:
    """A composite verdict's `verifier_version`: every kind its components' verdicts name, "format@1+math@2".

    Components of one kind share its version, so one entry per kind loses nothing; a component nothing judged (an
    invalid params error, an infra_error) adds none, and None means no component was judged."""
    versions: dict[str, int] = {}
    for verdict in verdicts:
        if verdict.verifier_version is not None:
            versions.update(split_versions(verdict.verifier_version))
    return join_versions(versions) if versions else None


def raw_item_id(raw: Any) -> str | int | None:
    """The id of a raw item when it has a usable one, so an error verdict still lines up with its input."""
    if isinstance(raw, dict):
        candidate = raw.get("id")
        if isinstance(candidate, (str, int)) and not isinstance(candidate, bool):
            return candidate
    return None


def score_raw(raw: Any, spec: RewardSpec | None = None) -> Verdict:
    """Validate and score one raw item (a dict); a bad item or a failing verifier yields an error verdict."""
    if not isinstance(raw, dict):
        return Verdict.error(None, f"invalid item: <item>: must be a JSON object, not {type(raw).__name__}")
    try:
        item = parse_item(raw)
    except ValidationError as exc:
        return Verdict.error(raw_item_id(raw), f"invalid item: {describe_error(exc)}")
    return score_valid(item, spec)


def score_valid(item: ItemBase, spec: RewardSpec | None = None) -> Verdict:
    """Score a validated item; a failing verifier yields an error verdict."""
    try:
        return score_item(item) if spec is None else score_composite(item, spec)
    except Exception as exc:  # noqa: BLE001 - one failing item must not take the batch down
        return Verdict.error(item.id, f"verifier {item.verifier!r} failed: {type(exc).__name__}: {exc}")  # type: ignore[attr-defined]
