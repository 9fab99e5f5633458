"""The `env:` section of a run's config: the episodes of an environment taskset (turns, token budget, tool format)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class EnvConfig(BaseModel):
    """Episodes of an environment taskset (`taskset.train: env:SOURCE`): how long one may run, how tools are read."""

    model_config = ConfigDict(extra="forbid")

    max_turns: int = Field(default=4, ge=1, description="Model turns per episode (each may call tools).")
    max_tokens: int = Field(
        default=1024, ge=8, description="Tokens per episode after the prompt: the model's and the tool results'."
    )
    tool_format: Literal["auto", "hermes", "llama3", "smollm2"] = Field(
        default="auto",
        description="How the model writes tool calls: auto = read from its chat template (hermes: Qwen2.5's "
        "<tool_call> JSON; llama3: a JSON object with parameters; smollm2: a <tool_call> JSON list).",
    )
    workers: int = Field(default=16, ge=1, description="Threads running sessions' tool calls at once.")
    sessions: Literal["local", "service"] = Field(
        default="local",
        description="local: sessions in this process (the environments' Python API); service: through the scoring "
        "service's /v1/sessions (a task file's folder must be in the service's GROUPSCORE_TASK_DIRS; the embedded "
        "service is given the taskset's folders).",
    )
