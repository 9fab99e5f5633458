"""The fields every scoring item carries; each verifier kind's model (under `verifiers/`) adds its own."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

ItemId = str | int | None


class ItemBase(BaseModel):
    """Fields every item carries; each verifier kind adds its own and narrows `verifier` to its name."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: ItemId = None
    verifier: str = Field(description='The verifier kind that scores this item (the registry\'s name, e.g. "math").')
    completion: str = Field(description="The model's output to score.")
    metadata: dict[str, Any] = Field(default_factory=dict, description="Free-form; echoed nowhere, ignored by scoring.")
