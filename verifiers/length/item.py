"""The length item: a target range in characters or whitespace-separated tokens, and how reward falls outside it."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from groupscore.schema.item import ItemBase


class LengthItem(ItemBase):
    verifier: Literal["length"] = "length"
    unit: Literal["chars", "tokens"] = Field(
        default="tokens", description="chars: Unicode characters; tokens: whitespace-separated words."
    )
    min: int = Field(default=0, ge=0, le=10_000_000, description="Shortest length that earns full reward.")
    max: int | None = Field(
        default=None,
        ge=0,
        le=10_000_000,
        description="Longest length that earns full reward; null means no upper bound.",
    )
    penalty: Literal["linear", "hard"] = Field(
        default="linear", description="hard: 0 outside the range; linear: reward falls with the distance."
    )
    slope: float | None = Field(
        default=None,
        gt=0.0,
        le=1.0,
        description="Linear penalty: reward lost per unit outside the range. Null: relative to "
        "the bound crossed (0 at an empty completion, 0 at twice max).",
    )
    strip: bool = Field(default=True, description="Measure the completion without surrounding whitespace.")

    @model_validator(mode="after")
    def _range_is_ordered(self) -> LengthItem:
        if self.max is not None and self.max < self.min:
            raise ValueError(f"max ({self.max}) must be at least min ({self.min})")
        if self.min == 0 and self.max is None:
            raise ValueError("give a range: min > 0 or a max")
        return self
