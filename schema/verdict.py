"""What scoring one item produces: its `Verdict`, the `Status` values, and the `verifier_version` tags it carries."""

from __future__ import annotations

import re
import sys
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from groupscore.schema.item import ItemId

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:  # groupscore-client runs on 3.10: the same str() and format() as 3.11's StrEnum (the member's value)

    class StrEnum(str, Enum):
        __str__ = str.__str__
        __format__ = str.__format__


class Status(StrEnum):
    correct = "correct"
    incorrect = "incorrect"
    partial = "partial"  # some but not all tests passed
    no_answer = "no_answer"
    unparsable = "unparsable"
    timeout = "timeout"
    error = "error"  # the item itself was bad, or the verifier failed on it
    # Nothing was judged: the sandbox could not start, a worker died twice, the request's deadline ran out before the
    # item was scored. Its reward 0.0 is a placeholder, not a score: trainers mask it (see docs/scoring.md).
    infra_error = "infra_error"


# Where an infra_error came from (`details["infra"]`): the service counts them by this on /metrics.
# "endpoint": the policy's own server (`groupscore eval --endpoint`) did not answer; the service never gives it
INFRA_CAUSES = ("sandbox", "worker_died", "worker_unavailable", "service_deadline", "internal", "endpoint")


# A verdict's `verifier_version`: "math@2", or for a composite reward "format@1+math@2" (one entry per kind).
VERSION_TAG_PATTERN = r"^[a-z][a-z0-9_]*@[0-9]+(\+[a-z][a-z0-9_]*@[0-9]+)*$"


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
    verifier_version: str | None = Field(
        default=None,
        pattern=VERSION_TAG_PATTERN,
        examples=["math@2", "format@1+math@2"],
        description="The verifier that judged the item, as kind@version (registry.VERSIONS); a composite reward lists "
        "each kind its components used, sorted and joined with '+'. None when no verifier judged it "
        "(an invalid item, an infrastructure failure before scoring).",
    )

    @model_validator(mode="after")
    def _status_agrees_with_reward(self) -> Verdict:
        # One place for the rule, whoever builds the verdict: full reward is never "partial" (a code item whose
        # hidden tests all pass, a composite whose bonus saturates), and an infrastructure failure pays nothing.
        if self.status is Status.partial and self.reward >= 1.0:
            self.status = Status.correct
        elif self.status is Status.infra_error and self.reward != 0.0:
            raise ValueError("an infra_error verdict has reward 0.0 (nothing was judged)")
        return self

    @classmethod
    def error(cls, id: ItemId, reason: str) -> Verdict:
        return cls(id=id, reward=0.0, status=Status.error, reason=reason)

    @classmethod
    def infra_error(cls, id: ItemId, reason: str, cause: str, **details: Any) -> Verdict:
        """Nothing was judged because the infrastructure failed; `cause` is one of INFRA_CAUSES."""
        if cause not in INFRA_CAUSES:
            raise ValueError(f"unknown infra cause {cause!r}; known: {', '.join(INFRA_CAUSES)}")
        return cls(id=id, reward=0.0, status=Status.infra_error, reason=reason, details={"infra": cause, **details})


def join_versions(versions: dict[str, int]) -> str:
    """The `verifier_version` tag of verdicts judged by these kinds: "math@2", or "format@1+math@2"."""
    return "+".join(f"{kind}@{versions[kind]}" for kind in sorted(versions))


def split_versions(tag: str) -> dict[str, int]:
    """The kinds and versions a `verifier_version` tag names (the inverse of join_versions); ValueError if malformed."""
    if not re.fullmatch(VERSION_TAG_PATTERN, tag):
        raise ValueError(f"not a verifier version tag (kind@N, joined with '+'): {tag!r}")
    pairs = [part.split("@") for part in tag.split("+")]
    return {kind: int(number) for kind, number in pairs}
