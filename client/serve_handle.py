"""A client of the Ray Serve deployment (service/ray_app.py) through a Serve handle: no HTTP hop, for callers that run
inside the Ray cluster (verl's reward workers, a Ray-based trainer). Needs `groupscore[ray]`.

    client = ServeHandleClient(app_name="groupscore")     # joins the cluster (RAY_ADDRESS, or "auto") if need be
    verdicts = client.score(items)                        # list[Verdict], as ScoreClient.score
    groups = client.score_groups(groups)                  # list[GroupResult], as ScoreClient.score_groups

It sends the HTTP endpoints' JSON bodies to the deployment's `score` / `score_groups` methods, which run the
endpoints' own code and answer (status, JSON bytes, headers): results are those of HTTP. A batch is cut into `shards`
(whole groups), sent side by side, so several replicas score one batch. Retries, as ScoreClient's: a shard whose
replica died (or was unhealthy, or the deployment pushed back) is sent again, to another replica; a 429 waits its
Retry-After. `GROUPSCORE_URL=serve://APP` makes verl's `compute_score` use this client.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from groupscore.client.http import RetryPolicy, ServiceError, groups_bodies, score_bodies
from groupscore.schema import codec
from groupscore.schema.reward import RewardSpec
from groupscore.schema.verdict import Verdict
from groupscore.schema.wire import GroupResult

SCHEME = "serve://"
DEPLOYMENT = "GroupScore"  # service/ray_app.py's deployment name (the client does not import the service)
_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
# More tries than over HTTP: a replica that died is replaced in seconds, and Serve's routers learn of it meanwhile.
HANDLE_RETRY = RetryPolicy(max_retries=8)


def is_serve_url(url: str) -> bool:
    return url.startswith(SCHEME)


def app_of(url: str) -> str:
    """`serve://APP` -> APP (`serve://` alone: "groupscore")."""
    return url.removeprefix(SCHEME).strip("/") or "groupscore"


class _Retry(Exception):
    def __init__(self, why: str, wait_s: float | None = None) -> None:
        super().__init__(why)
        self.wait_s = wait_s


class ServeHandleClient:
    """Scores through the deployment's handle; blocking methods and `a`-prefixed asyncio ones (one client serves
    both; Serve handles are not bound to an event loop)."""

    def __init__(
        self,
        app_name: str = "groupscore",
        deployment: str = DEPLOYMENT,
        *,
        address: str | None = None,
        shards: int = 2,
        max_batch: int = 4096,
        timeout_s: float = 330.0,
        retry: RetryPolicy = HANDLE_RETRY,
    ) -> None:
        if shards < 1:
            raise ValueError(f"shards must be at least 1, got {shards}")
        self.app_name, self.deployment, self.address = app_name, deployment, address
        self.shards, self.max_batch, self.timeout_s, self.retry = shards, max_batch, timeout_s, retry
        self.urls = [f"{SCHEME}{app_name}"]  # what callers print as "where the service is"
        self._handle: Any = None

    def handle(self) -> Any:
        """The deployment's handle (joining the Ray cluster first when this process has not)."""
        if self._handle is None:
            import ray
            from ray import serve

            if not ray.is_initialized():
                ray.init(address=self.address or "auto", log_to_driver=False)
            self._handle = serve.get_deployment_handle(self.deployment, app_name=self.app_name)
        return self._handle

    # -- one call -----------------------------------------------------------------------------------------------------

    def _send(self, method: str, payload: dict[str, Any]) -> Any:
        return self.handle().options(method_name=method).remote(codec.dumps(payload))

    @staticmethod
    def _accept(method: str, answer: tuple[int, bytes, dict[str, str]]) -> Any:
        status, body, headers = answer
        if status < 400:
            return codec.loads(body)
        try:
            detail = codec.loads(body).get("detail")
        except ValueError:
            detail = body[:500].decode(errors="replace")
        if status in _RETRY_STATUS:
            wait = headers.get("retry-after")
            raise _Retry(f"{method}: {status}: {detail}", float(wait) if wait else None)
        raise ServiceError(f"{method}: HTTP-like status {status}: {detail}", status, detail)

    @staticmethod
    def _retryable() -> tuple[type[BaseException], ...]:
        from ray.exceptions import GetTimeoutError, RayActorError
        from ray.serve.exceptions import BackPressureError, DeploymentUnavailableError, ReplicaUnavailableError

        # A replica that died (killed, its node lost) or is being replaced; a deployment pushing back; a slow answer.
        return (
            RayActorError,
            BackPressureError,
            ReplicaUnavailableError,
            DeploymentUnavailableError,
            GetTimeoutError,
            TimeoutError,
            _Retry,
        )

    def _wait(self, attempt: int, failure: BaseException) -> float:
        if isinstance(failure, _Retry) and failure.wait_s is not None:
            return min(self.retry.max_retry_after_s, failure.wait_s)
        return self.retry.delay(attempt, None)

    def _gave_up(self, method: str, failure: BaseException | None) -> ServiceError:
        return ServiceError(
            f"{method} through the Serve handle failed after {self.retry.max_retries + 1} attempts: "
            f"{type(failure).__name__}: {failure}"
        )

    def _call_all(self, method: str, payloads: list[dict[str, Any]]) -> list[Any]:
        """Every payload sent side by side; each one that fails is sent again on its own."""
        retryable = self._retryable()
        pending = [self._send(method, payload) for payload in payloads]
        answers = []
        for payload, response in zip(payloads, pending):
            failure: BaseException | None = None
            for attempt in range(self.retry.max_retries + 1):
                try:
                    answers.append(self._accept(method, response.result(timeout_s=self.timeout_s)))
                    break
                except retryable as exc:
                    failure = exc
                if attempt == self.retry.max_retries:
                    raise self._gave_up(method, failure)
                time.sleep(self._wait(attempt, failure))
                response = self._send(method, payload)
        return answers

    async def _acall(self, method: str, payload: dict[str, Any]) -> Any:
        retryable = self._retryable()
        failure: BaseException | None = None
        for attempt in range(self.retry.max_retries + 1):
            try:
                answer = await asyncio.wait_for(self._send(method, payload), self.timeout_s)
                return self._accept(method, answer)
            except retryable as exc:
                failure = exc
            if attempt < self.retry.max_retries:
                await asyncio.sleep(self._wait(attempt, failure))
        raise self._gave_up(method, failure)

    # -- payloads: the HTTP clients' (http.score_bodies, http.groups_bodies), one shard a replica ---------------------

    def _score_payloads(
        self, items: Sequence[Any], reward: RewardSpec | dict | None, deadline_s: float | None
    ) -> list[dict[str, Any]]:
        return score_bodies(items, reward, deadline_s, self.shards, self.max_batch)

    def _groups_payloads(
        self,
        groups: Sequence[Mapping[str, Any] | BaseModel],
        reward: RewardSpec | dict | None,
        eps: float,
        std: str,
        deadline_s: float | None,
    ) -> list[dict[str, Any]]:
        return groups_bodies(groups, reward, eps, std, deadline_s, self.shards, self.max_batch)

    # -- blocking -----------------------------------------------------------------------------------------------------

    def score_raw(
        self, items: Sequence[Any], reward: RewardSpec | dict | None = None, deadline_s: float | None = None
    ) -> list[dict[str, Any]]:
        """Verdicts as plain dicts, in input order."""
        answers = self._call_all("score", self._score_payloads(items, reward, deadline_s))
        return [verdict for answer in answers for verdict in answer["results"]]

    def score(
        self, items: Sequence[Any], reward: RewardSpec | dict | None = None, deadline_s: float | None = None
    ) -> list[Verdict]:
        return [Verdict.model_validate(v) for v in self.score_raw(items, reward, deadline_s)]

    def score_groups(
        self,
        groups: Sequence[Mapping[str, Any] | BaseModel],
        reward: RewardSpec | dict | None = None,
        eps: float = 1e-4,
        std: str = "sample",
        deadline_s: float | None = None,
    ) -> list[GroupResult]:
        answers = self._call_all("score_groups", self._groups_payloads(groups, reward, eps, std, deadline_s))
        return [GroupResult.model_validate(group) for answer in answers for group in answer["groups"]]

    # -- asyncio ------------------------------------------------------------------------------------------------------

    async def ascore_raw(
        self, items: Sequence[Any], reward: RewardSpec | dict | None = None, deadline_s: float | None = None
    ) -> list[dict[str, Any]]:
        payloads = self._score_payloads(items, reward, deadline_s)
        answers = await asyncio.gather(*(self._acall("score", payload) for payload in payloads))
        return [verdict for answer in answers for verdict in answer["results"]]

    async def ascore_groups(
        self,
        groups: Sequence[Mapping[str, Any] | BaseModel],
        reward: RewardSpec | dict | None = None,
        eps: float = 1e-4,
        std: str = "sample",
        deadline_s: float | None = None,
    ) -> list[GroupResult]:
        payloads = self._groups_payloads(groups, reward, eps, std, deadline_s)
        answers = await asyncio.gather(*(self._acall("score_groups", payload) for payload in payloads))
        return [GroupResult.model_validate(group) for answer in answers for group in answer["groups"]]

    def close(self) -> None:
        self._handle = None  # the handle holds nothing to release; Ray stays joined for the process's other users
