"""The trainer's view of the scoring service: groups out, per-group rewards, components and advantages back."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

from groupscore.schema.verdict import Status

INFRA_ERROR = Status.infra_error.value  # the verdict status of a completion the service could not score


@dataclass(frozen=True)
class GroupScores:
    """One prompt's completions as the service scored them (total reward and each component)."""

    rewards: list[float]
    components: dict[str, list[float]]
    statuses: list[str]
    mean: float
    std: float
    advantages: list[float]
    zero_variance: bool

    @property
    def masked(self) -> list[bool]:
        """Completions nothing judged (infra_error): their reward is a placeholder; the trainer masks them."""
        return [status == INFRA_ERROR for status in self.statuses]

    @classmethod
    def from_wire(cls, group: dict[str, Any]) -> GroupScores:
        total = group["total"]
        return cls(rewards=list(total["rewards"]),
                   components={name: list(stats["rewards"]) for name, stats in group.get("components", {}).items()},
                   statuses=[v["status"] for v in group["results"]], mean=total["mean"], std=total["std"],
                   advantages=list(total["advantages"]), zero_variance=bool(total["zero_variance"]))


def wire_group(group_id: str, item: dict[str, Any], completions: list[str]) -> dict[str, Any]:
    """The service's group shape: an item without its completion, and the completions to score as that item."""
    return {"id": group_id, "item": item, "completions": list(completions)}


class ServiceScorer:
    """Scores groups through the service's clients: blocking for evaluation, asyncio for TRL's reward loop."""

    def __init__(self, urls: list[str], token: str | None = None, timeout_s: float = 60.0, reward: Any = None,
                 allow_mixed_versions: bool = False):
        from groupscore.client.http import ScoreClient
        from groupscore.train.versions import VersionLedger

        self.urls, self.token, self.timeout_s, self.reward = urls, token, timeout_s, reward
        self.versions = VersionLedger(allow_mixed_versions)  # every verdict passes through it (train/versions.py)
        self._sync = ScoreClient(urls, token=token, timeout_s=timeout_s)
        self._async = None  # an httpx.AsyncClient belongs to one event loop: made on first use, on TRL's loop
        self._async_loop = None

    def score_groups(self, groups: list[dict[str, Any]]) -> list[GroupScores]:
        return self._checked(self._sync.score_groups(groups, reward=self.reward))

    def _checked(self, wire: list[dict[str, Any]]) -> list[GroupScores]:
        self.versions.record(verdict for group in wire for verdict in group["results"])
        return [GroupScores.from_wire(g) for g in wire]

    async def ascore_groups(self, groups: list[dict[str, Any]]) -> list[GroupScores]:
        import asyncio

        from groupscore.client.http import AsyncScoreClient

        loop = asyncio.get_running_loop()
        if self._async is None or self._async_loop is not loop:  # a new trainer brings a new loop
            self._close_async()
            self._async = AsyncScoreClient(self.urls, token=self.token, timeout_s=self.timeout_s)
            self._async_loop = loop
        return self._checked(await self._async.score_groups(groups, reward=self.reward))

    def _close_async(self) -> None:
        import asyncio

        client, loop, self._async, self._async_loop = self._async, self._async_loop, None, None
        if client is None or not loop.is_running():
            return  # a stopped loop took its connections with it
        if loop is _running_loop():
            loop.create_task(client.aclose())
        else:
            asyncio.run_coroutine_threadsafe(client.aclose(), loop).result(timeout=10)

    def close(self) -> None:
        self._sync.close()
        self._close_async()


def _running_loop():
    import asyncio

    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


@contextmanager
def open_scorer(urls: list[str], token: str | None = None, timeout_s: float = 60.0,
                reward: Any = None, allow_mixed_versions: bool = False) -> Iterator[ServiceScorer]:
    """The configured service, or (no URLs) one started embedded on a free loopback port for this run."""
    with ExitStack() as stack:
        if not urls:
            from groupscore.service.embedded import start_embedded

            urls = [stack.enter_context(start_embedded(port=0, token=token))]
        scorer = ServiceScorer(urls, token=token, timeout_s=timeout_s, reward=reward,
                               allow_mixed_versions=allow_mixed_versions)
        stack.callback(scorer.close)
        yield scorer
