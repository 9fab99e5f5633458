"""The wire schema, under every other package: items, verdicts, reward specs, the service's requests and responses,
and the peer protocols the service also speaks (OpenRLHF's /get_reward, SandboxFusion's /run_code).

It imports nothing of groupscore, so a client needs only this package (and pydantic) to speak to the service.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Loaded on first use (PEP 562): the one-shot CLI's own process imports submodules for type names only.
_EXPORTS = {
    "ItemBase": "item",
    "ItemId": "item",
    "Status": "verdict",
    "Verdict": "verdict",
    "INFRA_CAUSES": "verdict",
    "Component": "reward",
    "RewardSpec": "reward",
    "KIND_NAMES": "reward",
}

if TYPE_CHECKING:
    from groupscore.schema.item import ItemBase, ItemId
    from groupscore.schema.reward import KIND_NAMES, Component, RewardSpec
    from groupscore.schema.verdict import INFRA_CAUSES, Status, Verdict

__all__ = ["INFRA_CAUSES", "KIND_NAMES", "Component", "ItemBase", "ItemId", "RewardSpec", "Status", "Verdict"]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
