"""The service's request bodies: the wire models, with each item documented as the registry's item union and each
reward spec checked against the kinds when the body is parsed (a bad spec is a 422 naming the field, not an error
verdict on every item)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, TypeAdapter, WithJsonSchema

from groupscore.schema import wire
from groupscore.verifiers.composite import CheckedRewardSpec
from groupscore.verifiers.registry import KINDS, Item

# Items are validated one by one (a bad item gets an error verdict, the rest are scored), so the body model takes
# any JSON value per item; the documented schema is still the registry's item union (its models are added to the
# OpenAPI components by `item_component_schemas`).
ITEM_SCHEMA_REF = "#/components/schemas/{model}"
RawItem = Annotated[
    Any,
    WithJsonSchema(
        {
            "oneOf": [{"$ref": ITEM_SCHEMA_REF.format(model=kind.item_model.__name__)} for kind in KINDS.values()],
            "discriminator": {
                "propertyName": "verifier",
                "mapping": {
                    name: ITEM_SCHEMA_REF.format(model=kind.item_model.__name__) for name, kind in KINDS.items()
                },
            },
            "description": "An item of a registered verifier kind; one that does not validate gets an error verdict.",
        }
    ),
]


def item_component_schemas() -> dict[str, Any]:
    """The item models (and the models they use) as OpenAPI component schemas, for RawItem's references."""
    adapter: TypeAdapter[Any] = TypeAdapter(Item)
    return adapter.json_schema(ref_template=ITEM_SCHEMA_REF).get("$defs", {})


class ScoreRequest(wire.ScoreRequest):
    items: list[RawItem] = Field(description="Items in the CLI's schema; each is validated on its own.")
    reward: CheckedRewardSpec | None = Field(
        default=None, description="Composite reward; left out: each item's own verifier."
    )


class GroupsRequest(wire.GroupsRequest):
    reward: CheckedRewardSpec | None = None
