"""OpenRLHF's Python reward file mode, backed by the scoring service.

OpenRLHF takes `--remote_rm_url` either as a URL (the service's `/get_reward`, which needs nothing from here) or as a
path to a `.py` file: it loads that file by path and calls its `reward_func(queries, prompts, labels)` with a batch
(queries are prompt + response as rendered; labels come from `--label_key`), and reads the returned dict's
`rewards`, `scores` and `extra_logs`. OpenRLHF passes nothing else, so the file says everything itself:

    # reward_func.py:  --remote_rm_url reward_func.py --label_key answer
    from groupscore.client.openrlhf import openrlhf_reward_func

    reward_func = openrlhf_reward_func("http://10.0.0.5:8000", verifier="math", reward={"components": [...]})

`--remote_rm_url` may also name this module's own file: its `reward_func` reads GROUPSCORE_URL and GROUPSCORE_TOKEN
(which must then reach OpenRLHF's workers) and scores plain labels as math.

Labels are read as `/get_reward` reads them: a plain reference answer of kind `verifier`, or an object (or JSON object
text) with an item's reference fields. Rewards are torch tensors when torch is importable (OpenRLHF always has it), so
OpenRLHF can stack them; plain lists otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from groupscore.client.http import ScoreClient
from groupscore.schema.columns import check_columns
from groupscore.schema.openrlhf import extra_logs, label_item, response_text
from groupscore.schema.reward import KIND_NAMES, RewardSpec

__all__ = ["openrlhf_reward_func", "reward_func"]

_FIX = (
    "start OpenRLHF with --label_key naming the dataset's reference column, so that each label gives the item {mapping}"
)


def _tensors(values: dict[str, Any]) -> dict[str, Any]:
    try:
        import torch
    except ImportError:  # the thin client without torch: lists (tests, other trainers)
        return values
    out: dict[str, Any] = {}
    for key, value in values.items():
        out[key] = _tensors(value) if isinstance(value, dict) else torch.tensor(value, dtype=torch.float32)
    return out


def openrlhf_reward_func(
    service: str | Sequence[str] | ScoreClient,
    *,
    verifier: str = "math",
    reward: RewardSpec | dict | None = None,
    token: str | None = None,
    deadline_s: float | None = None,
) -> Callable[..., dict[str, Any]]:
    """OpenRLHF's `reward_func(queries, prompts, labels)`, scoring each response (the query after its prompt) against
    its label with one request per batch; `reward` a composite spec (each component's score also in extra_logs)."""
    if verifier not in KIND_NAMES:
        raise ValueError(f"unknown verifier kind {verifier!r}; known: {', '.join(KIND_NAMES)}")
    spec = RewardSpec.model_validate(reward) if isinstance(reward, dict) else reward
    client = service if isinstance(service, ScoreClient) else ScoreClient(service, token=token)
    components = [c.name for c in spec.components] if spec else []
    checked: list[bool] = []

    def reward_func(queries: list[str], prompts: list[str], labels: list[Any], **kwargs: Any) -> dict[str, Any]:
        if not len(queries) == len(prompts) == len(labels):
            raise ValueError(f"{len(queries)} queries, {len(prompts)} prompts and {len(labels)} labels: one each")
        items = [
            {**label_item(label, verifier), "id": index, "completion": response_text(query, prompt)}
            for index, (query, prompt, label) in enumerate(zip(queries, prompts, labels))
        ]
        if items and not checked:  # labels that hold no reference would score every sample 0
            check_columns("OpenRLHF reward_func", items, ["labels"], _FIX)
            checked.append(True)
        verdicts = client.score_raw(items, spec, deadline_s) if items else []
        rewards = [float(v["reward"]) for v in verdicts]
        return _tensors({"rewards": rewards, "scores": rewards, "extra_logs": extra_logs(verdicts, components)})

    return reward_func


_from_env: Callable[..., dict[str, Any]] | None = None


def reward_func(queries: list[str], prompts: list[str], labels: list[Any], **kwargs: Any) -> dict[str, Any]:
    """For `--remote_rm_url <this file>`: the service at GROUPSCORE_URL (token GROUPSCORE_TOKEN), math labels."""
    global _from_env
    if _from_env is None:
        from groupscore.client.settings import load

        settings = load()
        _from_env = openrlhf_reward_func(settings.urls, token=settings.token)
    return _from_env(queries, prompts, labels, **kwargs)
