"""OpenRLHF's remote reward protocol (`--remote_rm_url http://host:port/get_reward`): its request and answer bodies.

The service's handler (`groupscore.service.protocols`) checks the optional `reward` spec against the verifier kinds;
this module needs nothing but the reward spec's shape.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from groupscore.schema.reward import RewardSpec


class OpenRLHFRequest(BaseModel):
    """OpenRLHF's remote reward request. `query` holds prompt + response as the trainer rendered them.

    `prompts` and `labels` are required: without the prompt the service cannot tell the response from the prompt (a
    `\\boxed{}` in the question would be scored), and without labels every reward would be a silent 0.
    """

    model_config = ConfigDict(extra="ignore")  # OpenRLHF versions add fields; unknown ones are not ours to refuse

    query: list[str]
    prompts: list[str] = Field(description="Per sample: the prompt that `query` starts with (after any padding).")
    labels: list[Any] = Field(
        description=(
            "Per sample: a plain reference answer (scored by the service's default kind, math unless configured), "
            "or an object / JSON object text with an item's reference fields, "
            'e.g. {"verifier": "code", "tests": [...]}. OpenRLHF sends them with `--label_key`; a request whose '
            "labels hold no reference at all is refused."
        )
    )
    reward: RewardSpec | None = Field(default=None, description="groupscore extension: a composite reward.")

    @model_validator(mode="after")
    def _consistent(self) -> OpenRLHFRequest:
        for name in ("prompts", "labels"):
            values = getattr(self, name)
            if len(values) != len(self.query):
                raise ValueError(f"{name} has {len(values)} entries but query has {len(self.query)}")
        for index, (query, prompt) in enumerate(zip(self.query, self.prompts)):
            if prompt not in query:
                raise ValueError(
                    f"query {index} does not contain its prompt, so its response cannot be told apart from the prompt"
                )
        return self


class OpenRLHFResponse(BaseModel):
    rewards: list[float] = Field(description="Used for advantages.")
    scores: list[float] = Field(description="0-1, used for dynamic filtering.")
    extra_logs: dict[str, list[float]] = Field(description="Per-sample values OpenRLHF logs (correct, components).")


def response_text(query: str, prompt: str) -> str:
    """The response part of an OpenRLHF query: what follows its prompt (the query may start with padding tokens)."""
    start = query.find(prompt)
    if start < 0:  # never score the prompt as if it were the response
        raise ValueError("the query does not contain its prompt, so its response cannot be told apart from the prompt")
    return query[start + len(prompt) :]


def label_item(label: Any, default_kind: str) -> dict[str, Any]:
    """The item fields a label stands for (see OpenRLHFRequest.labels): a plain reference answer of `default_kind`,
    or an object (or JSON object text) with an item's reference fields."""
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


def extra_logs(verdicts: list[dict[str, Any]], components: list[str]) -> dict[str, list[float]]:
    """Per-sample values OpenRLHF logs: correct, invalid (an error verdict), infra_error, each component's score.
    OpenRLHF has no "no reward" value: an infra_error sample gets reward 0.0 and infra_error 1.0 here."""
    logs = {
        "correct": [1.0 if v["status"] == "correct" else 0.0 for v in verdicts],
        "invalid": [1.0 if v["status"] == "error" else 0.0 for v in verdicts],
        "infra_error": [1.0 if v["status"] == "infra_error" else 0.0 for v in verdicts],
    }
    for name in components:
        logs[name] = [float((v.get("components") or {}).get(name, 0.0)) for v in verdicts]
    return logs
