"""The format item: tags the completion must carry in order with non-empty content, or a regex it must fully match."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from groupscore.schema.item import ItemBase

_TAG_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.:-]{0,31}$")


class FormatItem(ItemBase):
    verifier: Literal["format"] = "format"
    tags: list[str] = Field(
        default_factory=lambda: ["think", "answer"],
        min_length=1,
        max_length=16,
        description="Tag names that must each appear exactly once, in this order, as <name>non-empty content</name>.",
    )
    regex: str | None = Field(
        default=None,
        max_length=2_000,
        description="Instead of tags: an RE2 pattern (no backreferences or lookaround) "
        "that must match the whole completion.",
    )
    allow_outside_text: bool = Field(
        default=True, description="Tag mode: when false, only whitespace may sit outside the tags."
    )
    strip: bool = Field(default=True, description="Regex mode: strip surrounding whitespace before matching.")
    partial_credit: bool = Field(
        default=False, description="Tag mode: reward = fraction of checks passed instead of all or nothing."
    )
    max_chars: int = Field(
        default=1_000_000, ge=1, le=4_000_000, description="Longer completions score 0 without being scanned."
    )

    @field_validator("tags")
    @classmethod
    def _tags_are_names(cls, tags: list[str]) -> list[str]:
        for tag in tags:
            if not _TAG_NAME.match(tag):
                raise ValueError(f"{tag!r} is not a tag name (a letter, then up to 31 letters, digits, _ . : -)")
        if len(set(tags)) != len(tags):
            raise ValueError("tag names must be distinct")
        return tags

    @field_validator("regex")
    @classmethod
    def _regex_is_linear(cls, regex: str | None) -> str | None:
        if regex is not None:
            from groupscore.verifiers.text import compile_linear

            compile_linear(regex)  # raises ValueError, which pydantic reports at the field path `regex`
        return regex

    @model_validator(mode="after")
    def _one_mode(self) -> FormatItem:
        if self.regex is not None and "tags" in self.model_fields_set:
            raise ValueError("give either `tags` or `regex`, not both")
        return self
