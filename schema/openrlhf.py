"""OpenRLHF's remote reward protocol (`--remote_rm_url http://host:port/get_reward`): its request and answer bodies.

The service's handler (`groupscore.service.protocols`) checks the optional `reward` spec against the verifier kinds;
this module needs nothing but the reward spec's shape.
"""

from __future__ import annotations

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
