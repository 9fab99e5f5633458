"""Composite reward specs on the wire: components, their weights and gates, and how the total is folded into [0, 1].

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

This module checks what the spec alone can tell. Whether a component's `params` fit its kind's item model is checked
by `groupscore.verifiers.composite.CheckedRewardSpec`, which the service, the CLI and the trainer parse specs with.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator, model_validator

# The verifier kinds on the wire; the registry (groupscore.verifiers.registry) refuses to load if its kinds differ.
KIND_NAMES = ("math", "code", "format", "length", "json", "sql")

# Fields a component may not set through params: they always come from the item being scored.
RESERVED_PARAMS = frozenset({"id", "completion", "verifier"})


class Component(BaseModel):
    """One scored part of a composite reward."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(
        pattern=r"^[A-Za-z0-9_.\-]{1,64}$",
        description="Label of this component in results and logs (letters, digits, _ . -).",
    )
    weight: float = Field(default=1.0, ge=0.0, le=1e6, description="Relative weight in the total.")
    verifier: str | None = Field(default=None, description="Verifier kind; left out: the item's own kind.")
    params: dict[str, Any] = Field(
        default_factory=dict, description="The kind's item fields (all but id, completion and verifier)."
    )
    gate: bool = Field(
        default=False, description="When true, the total is 0 unless this component reaches the threshold."
    )
    gate_threshold: float = Field(default=1.0, ge=0.0, le=1.0)

    @field_validator("verifier")
    @classmethod
    def _verifier_is_known(cls, verifier: str | None) -> str | None:
        if verifier is not None and verifier not in KIND_NAMES:
            raise ValueError(f"unknown verifier kind {verifier!r}; known: {', '.join(sorted(KIND_NAMES))}")
        return verifier

    @field_validator("params")
    @classmethod
    def _params_leave_item_fields_alone(cls, params: dict[str, Any]) -> dict[str, Any]:
        reserved = sorted(RESERVED_PARAMS & params.keys())
        if reserved:
            raise ValueError(f"params may not set {', '.join(reserved)}: they come from the item")
        return params


class RewardSpec(BaseModel):
    """Components, their weights and gates, and how the total is normalised into [0, 1]."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    components: list[Component] = Field(min_length=1, max_length=16)
    # Spelt as the rest of the wire and the code spell it; "normalise", the field's earlier spelling, is still read as
    # input so that existing specs keep working. Both at once is an error, not a silent choice.
    normalize: Literal["weighted_mean", "clipped_sum"] = Field(
        default="weighted_mean", validation_alias=AliasChoices("normalize", "normalise")
    )

    @model_validator(mode="after")
    def _consistent(self) -> RewardSpec:
        names = [c.name for c in self.components]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"component names must be unique; repeated: {', '.join(duplicates)}")
        if sum(c.weight for c in self.components) <= 0.0:
            raise ValueError("at least one component needs a positive weight")
        return self
