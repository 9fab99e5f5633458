"""The JSON item: where to find the JSON document in the completion and the JSON schema it must satisfy."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, Literal

from pydantic import Field, field_validator

from groupscore.schema.item import ItemBase


class JsonItem(ItemBase):
    verifier: Literal["json"] = "json"
    json_schema: dict[str, Any] | None = Field(
        default=None,
        description="JSON schema (draft 4 to 2020-12, from `$schema`; default "
        "2020-12) the document must satisfy; null: parsing is enough.",
    )
    extract: Literal["auto", "fenced", "raw"] = Field(
        default="auto",
        description="fenced: the last ```json block (else the last bare "
        "``` block); raw: the whole completion; auto: "
        "fenced if there is a block, else raw.",
    )
    partial_credit: bool = Field(
        default=False, description="For object schemas: reward = fraction of declared properties that are valid."
    )
    timeout_s: float = Field(
        default=2.0, gt=0.0, le=60.0, description="Budget for validating against a schema that uses regex patterns."
    )
    max_chars: int = Field(default=1_000_000, ge=1, le=4_000_000, description="Longer completions score 0 unparsed.")

    @field_validator("json_schema")
    @classmethod
    def _schema_is_valid(cls, schema: dict[str, Any] | None) -> dict[str, Any] | None:
        if schema is not None:
            try:
                schema_json = json.dumps(schema, sort_keys=True, allow_nan=False)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"the schema must be plain JSON: {exc}") from None
            problem = schema_problem(schema_json)
            if problem:
                raise ValueError(problem)
        return schema


@lru_cache(maxsize=256)
def schema_problem(schema_json: str) -> str | None:
    """Why the schema is not a valid JSON schema, or None; cached because datasets repeat one schema for many items."""
    from jsonschema import SchemaError, validators  # imported here so the registry stays cheap to import

    schema = json.loads(schema_json)
    try:
        validators.validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "<root>"
        return f"not a valid JSON schema at {where}: {exc.message}"
    return None
