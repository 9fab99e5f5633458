"""Endpoints speaking other tools' wire protocols: OpenRLHF's remote reward (`/get_reward`) and SandboxFusion (`/run_code`).

Both go through the same dispatcher, pool and verifiers as `/v1/score`: nothing here scores or runs code itself.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, model_validator

from groupscore.verifiers.composite import RewardSpec

router = APIRouter()


# -- OpenRLHF -------------------------------------------------------------------------------------------------------

class OpenRLHFRequest(BaseModel):
    """OpenRLHF's remote reward request. `query` holds prompt + response as the trainer rendered them."""

    model_config = ConfigDict(extra="ignore")  # OpenRLHF versions add fields; unknown ones are not ours to refuse

    query: list[str]
    prompts: list[str] | None = None
    labels: list[Any] | None = Field(default=None, description=(
        "Per sample: a plain reference answer (scored by the service's default kind, math unless configured), "
        "or an object / JSON object text with an item's reference fields, e.g. {\"verifier\": \"code\", \"tests\": [...]}."))
    reward: RewardSpec | None = Field(default=None, description="groupscore extension: a composite reward.")

    @model_validator(mode="after")
    def _same_lengths(self) -> OpenRLHFRequest:
        for name in ("prompts", "labels"):
            values = getattr(self, name)
            if values is not None and len(values) != len(self.query):
                raise ValueError(f"{name} has {len(values)} entries but query has {len(self.query)}")
        return self


class OpenRLHFResponse(BaseModel):
    rewards: list[float] = Field(description="Used for advantages.")
    scores: list[float] = Field(description="0-1, used for dynamic filtering.")
    extra_logs: dict[str, list[float]] = Field(description="Per-sample values OpenRLHF logs (correct, components).")


def response_text(query: str, prompt: str | None) -> str:
    """The response part of an OpenRLHF query (it sends prompt + response as one string)."""
    if prompt and query.startswith(prompt):
        return query[len(prompt):]
    return query


def label_item(label: Any, default_kind: str) -> dict[str, Any]:
    """The item fields a label stands for (see OpenRLHFRequest.labels)."""
    if isinstance(label, str) and label.lstrip().startswith("{"):
        try:
            decoded = json.loads(label)
        except json.JSONDecodeError:
            decoded = None
        if isinstance(decoded, dict):
            label = decoded
    if isinstance(label, dict):
        return {"verifier": default_kind, **label}
    return {"verifier": default_kind, "answer": "" if label is None else str(label)}


@router.post("/get_reward", response_model=OpenRLHFResponse, tags=["adapters"],
             responses={422: {"description": "Invalid request"}, 429: {"description": "Queue full; see Retry-After"}})
async def openrlhf_get_reward(body: OpenRLHFRequest, request: Request) -> Response:
    """OpenRLHF remote reward: `--remote_rm_url http://host:port/get_reward`."""
    from groupscore.service.app import json_response, too_many_items

    settings = request.app.state.settings
    if len(body.query) > settings.max_items:
        return too_many_items("query", len(body.query), settings.max_items)
    prompts = body.prompts or [None] * len(body.query)
    labels = body.labels or [None] * len(body.query)
    raw_items = [{**label_item(label, settings.openrlhf_verifier), "id": index,
                  "completion": response_text(query, prompt)}
                 for index, (query, prompt, label) in enumerate(zip(body.query, prompts, labels))]
    verdicts = await request.app.state.dispatcher.score(raw_items, body.reward)
    rewards = [v["reward"] for v in verdicts]
    extra_logs = {"correct": [1.0 if v["status"] == "correct" else 0.0 for v in verdicts],
                  "invalid": [1.0 if v["status"] == "error" else 0.0 for v in verdicts]}
    for component in body.reward.components if body.reward else []:
        extra_logs[component.name] = [(v.get("components") or {}).get(component.name, 0.0) for v in verdicts]
    return json_response({"rewards": rewards, "scores": rewards, "extra_logs": extra_logs})
