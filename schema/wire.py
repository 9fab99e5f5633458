"""Request and response models of the scoring service's own endpoints, as the client and the service both see them.

Items travel as plain JSON objects: the service validates each on its own (a bad item gets an error verdict, the
rest are scored), against the item model of its kind. The service documents that union in its OpenAPI schema and
checks a reward spec's params against the kinds (`groupscore.service.requests`); this module needs neither.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from groupscore.schema.item import ItemId
from groupscore.schema.reward import RewardSpec
from groupscore.schema.verdict import Verdict


class ScoreRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    items: list[Any] = Field(description="Items in the CLI's schema; each is validated on its own.")
    reward: RewardSpec | None = Field(default=None, description="Composite reward; left out: each item's own verifier.")
    deadline_s: float | None = Field(
        default=None,
        gt=0.0,
        le=3600.0,
        description="Answer within this many seconds; unscored items get timeout verdicts.",
    )


class ScoreResponse(BaseModel):
    results: list[Verdict]


class Group(BaseModel):
    """Completions of one prompt, sharing the reference fields of one item."""

    model_config = ConfigDict(extra="forbid")

    id: ItemId = None
    item: dict[str, Any] = Field(
        description="An item without `completion` (verifier kind and reference fields); "
        "each completion is scored as this item with its `completion` set."
    )
    completions: list[str] = Field(min_length=1)


class GroupsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    groups: list[Group]
    reward: RewardSpec | None = None
    deadline_s: float | None = Field(default=None, gt=0.0, le=3600.0)
    eps: float = Field(default=1e-4, ge=0.0, le=1.0, description="Added to the std before dividing (TRL: 1e-4).")
    std: Literal["sample", "population"] = Field(
        default="sample", description="sample: divide by n-1 (Bessel; what TRL's GRPOTrainer uses); population: by n."
    )


class GroupStats(BaseModel):
    rewards: list[float]
    mean: float
    std: float
    advantages: list[float] = Field(description="(reward - mean) / (std + eps), per completion.")
    zero_variance: bool = Field(description="All rewards equal: the group carries no learning signal.")
    masked: int = Field(
        default=0,
        description="Completions left out of mean and std because nothing judged them "
        "(status infra_error); their advantage is 0.",
    )


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
