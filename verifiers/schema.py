"""The one pydantic schema for a scoring item and its verdict, shared by the CLI, the service and the adapters."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Status(StrEnum):
    correct = "correct"
    incorrect = "incorrect"
    partial = "partial"  # some but not all tests passed
    no_answer = "no_answer"
    unparsable = "unparsable"
    timeout = "timeout"
    error = "error"  # the item itself was bad, or the verifier failed on it


ItemId = str | int | None


class ItemBase(BaseModel):
    """Fields every item carries; each verifier kind adds its own."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: ItemId = None
    completion: str = Field(description="The model's output to score.")
    metadata: dict[str, Any] = Field(default_factory=dict, description="Free-form; echoed nowhere, ignored by scoring.")


class Verdict(BaseModel):
    """What scoring one item produced."""

    model_config = ConfigDict(extra="forbid")

    id: ItemId = None
    reward: float = Field(ge=0.0, le=1.0)
    status: Status
    extracted: str | None = Field(default=None, description="The answer or program the verifier pulled out.")
    reason: str = ""
    components: dict[str, float] | None = Field(default=None, description="Per-component scores of a composite reward.")
    details: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def error(cls, id: ItemId, reason: str) -> Verdict:
        return cls(id=id, reward=0.0, status=Status.error, reason=reason)
