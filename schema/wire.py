"""Request and response models of the service's own endpoints (items and verdicts are the verifiers' schema)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, WithJsonSchema

from groupscore.verifiers.composite import RewardSpec
from groupscore.verifiers.registry import KINDS, Item
from groupscore.verifiers.schema import ItemId, Verdict

# Items are validated one by one (a bad item gets an error verdict, the rest are scored), so the body model takes
# any JSON value per item; the documented schema is still the registry's item union (its models are added to the
# OpenAPI components by `item_component_schemas`).
ITEM_SCHEMA_REF = "#/components/schemas/{model}"
RawItem = Annotated[Any, WithJsonSchema({
    "oneOf": [{"$ref": ITEM_SCHEMA_REF.format(model=kind.item_model.__name__)} for kind in KINDS.values()],
    "discriminator": {"propertyName": "verifier",
                      "mapping": {name: ITEM_SCHEMA_REF.format(model=kind.item_model.__name__)
                                  for name, kind in KINDS.items()}},
    "description": "An item of a registered verifier kind; one that does not validate gets an error verdict.",
})]


def item_component_schemas() -> dict[str, Any]:
    """The item models (and the models they use) as OpenAPI component schemas, for RawItem's references."""
    return TypeAdapter(Item).json_schema(ref_template=ITEM_SCHEMA_REF).get("$defs", {})


class ScoreRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    items: list[RawItem] = Field(description="Items in the CLI's schema; each is validated on its own.")
    reward: RewardSpec | None = Field(default=None, description="Composite reward; left out: each item's own verifier.")
    deadline_s: float | None = Field(default=None, gt=0.0, le=3600.0,
                                     description="Answer within this many seconds; unscored items get timeout verdicts.")


class ScoreResponse(BaseModel):
    results: list[Verdict]


class Group(BaseModel):
    """Completions of one prompt, sharing the reference fields of one item."""

    model_config = ConfigDict(extra="forbid")

    id: ItemId = None
    item: dict[str, Any] = Field(description="An item without `completion` (verifier kind and reference fields); "
                                             "each completion is scored as this item with its `completion` set.")
    completions: list[str] = Field(min_length=1)


class GroupsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    groups: list[Group]
    reward: RewardSpec | None = None
    deadline_s: float | None = Field(default=None, gt=0.0, le=3600.0)
    eps: float = Field(default=1e-4, ge=0.0, le=1.0, description="Added to the std before dividing (TRL: 1e-4).")
    std: Literal["sample", "population"] = Field(
        default="sample", description="sample: divide by n-1 (Bessel; what TRL's GRPOTrainer uses); population: by n.")


class GroupStats(BaseModel):
    rewards: list[float]
    mean: float
    std: float
    advantages: list[float] = Field(description="(reward - mean) / (std + eps), per completion.")
    zero_variance: bool = Field(description="All rewards equal: the group carries no learning signal.")
    masked: int = Field(default=0, description="Completions left out of mean and std because nothing judged them "
                                               "(status infra_error); their advantage is 0.")


class GroupResult(BaseModel):
    id: ItemId = None
    results: list[Verdict] = Field(description="One verdict per completion; id = the completion's index.")
    total: GroupStats
    components: dict[str, GroupStats] = Field(default_factory=dict, description="Per component of a composite reward.")


class GroupsResponse(BaseModel):
    groups: list[GroupResult]


class VerifierInfo(BaseModel):
    name: str
    version: int = Field(description="The kind's verdict version; verdicts carry it as verifier_version, e.g. math@2.")
    summary: str
    item_schema: dict[str, Any]
    available: bool
    problem: str | None = None


class VerifiersResponse(BaseModel):
    verifiers: list[VerifierInfo]
    reward_spec_schema: dict[str, Any]
