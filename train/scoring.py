"""The trainer's view of the scoring service: groups out, the service's `GroupResult`s (per-completion verdicts, the
total's and each component's rewards and advantages) back."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

from groupscore.client.http import AsyncScoreClient, ScoreClient
from groupscore.client.loops import LoopClients
from groupscore.schema.reward import RewardSpec
from groupscore.schema.verdict import Status
from groupscore.schema.wire import GroupResult
from groupscore.train.versions import VersionLedger

if TYPE_CHECKING:
    from groupscore.train.config import ServiceConfig


class WireGroup(TypedDict):
    """One group as the service takes it (`schema.wire.Group`): an item without its completion, and the completions."""

    id: str
    item: dict[str, Any]
    completions: list[str]


def wire_group(group_id: str, item: dict[str, Any], completions: Sequence[str]) -> WireGroup:
    """The service's group shape: an item without its completion, and the completions to score as that item."""
    return {"id": group_id, "item": item, "completions": list(completions)}


def unscored(group: GroupResult) -> list[bool]:
    """Per completion: nothing judged it (infra_error), so its reward is a placeholder that the trainer masks."""
    return [verdict.status is Status.infra_error for verdict in group.results]


def component_rewards(group: GroupResult, name: str) -> list[float]:
    """A component's reward per completion; none for a group whose reward has no such component."""
    stats = group.components.get(name)
    return stats.rewards if stats is not None else []


class GroupScorer(Protocol):
    """What evaluation, the dry run and the GRPO reward need of a scorer (`ServiceScorer`, or a test's fake)."""

    def score_groups(self, groups: Sequence[WireGroup]) -> list[GroupResult]: ...

    async def ascore_groups(self, groups: Sequence[WireGroup]) -> list[GroupResult]: ...


class ServiceScorer:
    """Scores groups through the service's clients: blocking for evaluation, asyncio for TRL's reward loop."""

    def __init__(
        self,
        urls: list[str],
        token: str | None = None,
        timeout_s: float = 60.0,
        reward: RewardSpec | None = None,
        allow_mixed_versions: bool = False,
    ) -> None:
        self.urls, self.token, self.timeout_s, self.reward = urls, token, timeout_s, reward
        self.versions = VersionLedger(allow_mixed_versions)  # every verdict passes through it (train/versions.py)
        self._sync = ScoreClient(urls, token=token, timeout_s=timeout_s)
        # An httpx.AsyncClient belongs to one event loop: one per loop (TRL's reward loop; a new trainer, a new loop).
        self._async: LoopClients[AsyncScoreClient] = LoopClients(
            lambda: AsyncScoreClient(self.urls, token=self.token, timeout_s=self.timeout_s)
        )

    def score_groups(self, groups: Sequence[WireGroup]) -> list[GroupResult]:
        return self._checked(self._sync.score_groups(groups, reward=self.reward))

    def score_references(self, groups: Sequence[WireGroup]) -> list[GroupResult]:
        """Scored by each item's own verifier, not the composite reward: a dataset's worked solution must be right,
        but it is not written in the format the reward asks of the policy (tags, a FINAL line)."""
        return self._checked(self._sync.score_groups(groups))

    async def ascore_groups(self, groups: Sequence[WireGroup]) -> list[GroupResult]:
        client = await self._async.get()
        return self._checked(await client.score_groups(groups, reward=self.reward))

    def _checked(self, scored: list[GroupResult]) -> list[GroupResult]:
        self.versions.record(verdict for group in scored for verdict in group.results)
        return scored

    def close(self) -> None:
        self._sync.close()
        self._async.close()


@contextmanager
def open_scorer(service: ServiceConfig, task_dirs: list[str] | None = None) -> Iterator[ServiceScorer]:
    """The configured service: running ones (`urls`), the Ray Serve deployment (`ray`: joined, or deployed for the run),
    or else one started embedded on a free loopback port for this run, which may also open `task_dirs`' task files."""
    urls, token = service.urls, service.token
    with ExitStack() as stack:
        if not urls and service.ray is not None:
            from groupscore.train.ray_service import ray_service_url

            urls = [stack.enter_context(ray_service_url(service.ray, token, task_dirs))]
        elif not urls:
            from groupscore.service.embedded import start_embedded

            urls = [stack.enter_context(start_embedded(port=0, token=token, task_dirs=task_dirs))]
        scorer = ServiceScorer(
            urls,
            token=token,
            timeout_s=service.timeout_s,
            reward=service.reward,
            allow_mixed_versions=service.allow_mixed_verifier_versions,
        )
        stack.callback(scorer.close)
        yield scorer
