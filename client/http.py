"""Sync and async clients of the scoring service: pooled connections, timeouts, retries, sharding over several URLs.

    with ScoreClient(["http://127.0.0.1:8000", "http://127.0.0.1:8001"]) as client:
        verdicts = client.score(items)            # list[Verdict], in the order of `items`

- Retries (scoring is idempotent): on 429 (waiting what Retry-After says), 5xx, timeouts and connection errors,
  with exponential backoff; a retry goes to the next URL, so one dead server costs one retry, not the batch.
- Sharding: a batch is cut into contiguous shards, one per URL (and at most `max_batch` items each), sent
  concurrently; results are put back in input order.
- Other 4xx answers are not retried: `ServiceError` carries the status and the server's detail.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx
from pydantic import BaseModel

from groupscore.schema import codec
from groupscore.schema.reward import RewardSpec
from groupscore.schema.verdict import Verdict
from groupscore.schema.wire import GroupResult

_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})


class ServiceError(RuntimeError):
    """The service refused the request (4xx), or it still failed after every retry."""

    def __init__(self, message: str, status_code: int | None = None, detail: Any = None) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.detail = detail


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 6
    backoff_s: float = 0.25  # first wait; doubles each retry
    max_backoff_s: float = 10.0
    max_retry_after_s: float = 60.0  # cap on a server's Retry-After

    def delay(self, attempt: int, response: httpx.Response | None) -> float:
        if response is not None and response.status_code == 429:
            value = response.headers.get("retry-after", "")
            try:
                return min(self.max_retry_after_s, max(0.0, float(value)))
            except ValueError:
                pass
        # Jitter spreads clients that failed together, so they do not come back together.
        return min(self.max_backoff_s, self.backoff_s * 2**attempt) * (0.5 + random.random() / 2)


def _as_json(value: Any) -> Any:
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else value


def _shards(n_items: int, n_urls: int, max_batch: int) -> list[tuple[int, int]]:
    """Contiguous [start, stop) ranges: at least one per URL when there are enough items, none above max_batch."""
    if n_items == 0:
        return [(0, 0)]
    count = max(min(n_urls, n_items), math.ceil(n_items / max_batch))
    size = math.ceil(n_items / count)
    return [(start, min(n_items, start + size)) for start in range(0, n_items, size)]


def _error_from(response: httpx.Response) -> ServiceError:
    try:
        detail = response.json().get("detail")
    except ValueError:
        detail = response.text[:500]
    return ServiceError(
        f"{response.request.method} {response.request.url.path}: HTTP {response.status_code}: {detail}",
        response.status_code,
        detail,
    )


class _Retryable(Exception):
    """A 429 or 5xx answer: worth another try."""

    def __init__(self, error: ServiceError) -> None:
        super().__init__(str(error))
        self.error = error


def _body(payload: Any) -> dict[str, Any]:
    """Request arguments for a JSON body, encoded once with orjson (httpx's `json=` uses the slower json module)."""
    if payload is None:
        return {}
    return {"content": codec.dumps(payload), "headers": {"content-type": "application/json"}}


def _accept(response: httpx.Response) -> Any:
    """The decoded body of a success; raises _Retryable (429, 5xx) or ServiceError (other 4xx, not retried)."""
    if response.status_code < 400:
        return codec.loads(response.content)
    error = _error_from(response)
    if response.status_code in _RETRY_STATUS:
        raise _Retryable(error)
    raise error


class _Base:
    _transport: Any  # httpx.Client or httpx.AsyncClient: the subclass's connection pool type
    _clients: Any

    def __init__(
        self,
        urls: str | Sequence[str],
        token: str | None = None,
        timeout_s: float = 330.0,
        retry: RetryPolicy = RetryPolicy(),
        max_batch: int = 4096,
    ) -> None:
        self.urls = [urls] if isinstance(urls, str) else list(urls)
        if not self.urls:
            raise ValueError("at least one service URL is needed")
        self.urls = [u.rstrip("/") for u in self.urls]
        self.retry = retry
        self.max_batch = max_batch
        self.timeout = httpx.Timeout(timeout_s, connect=min(10.0, timeout_s))
        self.token = token
        self.headers = {"authorization": f"Bearer {token}"} if token else {}
        # One pooled connection set per URL (httpx.Client or httpx.AsyncClient, as the subclass says).
        limits = httpx.Limits(max_connections=64, max_keepalive_connections=32)
        self._clients = [
            self._transport(base_url=u, timeout=self.timeout, headers=self.headers, limits=limits) for u in self.urls
        ]
        self._setup()

    def _setup(self) -> None:
        """What a subclass adds to its state (after the connection pools are made)."""

    def _gave_up(self, method: str, path: str, failure: Exception | None) -> ServiceError:
        last = failure.error if isinstance(failure, _Retryable) else None
        return ServiceError(
            f"{method} {path} failed after {self.retry.max_retries + 1} attempts: {failure}",
            last.status_code if last else None,
            last.detail if last else None,
        )

    def _score_payloads(
        self, items: Sequence[Any], reward: RewardSpec | dict | None, deadline_s: float | None
    ) -> list[dict[str, Any]]:
        return score_bodies(items, reward, deadline_s, len(self.urls), self.max_batch)

    def _groups_payloads(
        self,
        groups: Sequence[Mapping[str, Any] | BaseModel],
        reward: RewardSpec | dict | None,
        eps: float,
        std: str,
        deadline_s: float | None,
    ) -> list[dict[str, Any]]:
        return groups_bodies(groups, reward, eps, std, deadline_s, len(self.urls), self.max_batch)


# -- request bodies: the same for this module's clients and the Serve handle client (serve_handle.py) ----------------


def score_bodies(
    items: Sequence[Any], reward: RewardSpec | dict | None, deadline_s: float | None, n_shards: int, max_batch: int
) -> list[dict[str, Any]]:
    """The bodies of one batch's `/v1/score` requests: the items cut into about `n_shards` runs (`_shards`), each with
    the batch's options."""
    raw = [_as_json(item) for item in items]
    options = _options(reward, deadline_s)
    return [{"items": raw[start:stop], **options} for start, stop in _shards(len(raw), n_shards, max_batch)]


def groups_bodies(
    groups: Sequence[Mapping[str, Any] | BaseModel],
    reward: RewardSpec | dict | None,
    eps: float,
    std: str,
    deadline_s: float | None,
    n_shards: int,
    max_batch: int,
) -> list[dict[str, Any]]:
    """The bodies of one batch's `/v1/score/groups` requests: whole groups cut into about `n_shards` runs
    (`group_shards`), each with the batch's options."""
    raw = [group.model_dump(mode="json") if isinstance(group, BaseModel) else dict(group) for group in groups]
    options = {"eps": eps, "std": std, **_options(reward, deadline_s)}
    return [{"groups": shard, **options} for shard in group_shards(raw, n_shards, max_batch)]


def _options(reward: RewardSpec | dict | None, deadline_s: float | None) -> dict[str, Any]:
    """A batch's optional fields, present only when set: its reward spec and its deadline."""
    options: dict[str, Any] = {}
    if reward is not None:
        options["reward"] = _as_json(reward)
    if deadline_s is not None:
        options["deadline_s"] = deadline_s
    return options


def group_shards(raw: list[dict[str, Any]], n_shards: int, max_batch: int) -> list[list[dict[str, Any]]]:
    """Groups cut into about `n_shards` runs of whole groups (a group's statistics need all of it), none over
    `max_batch` completions unless one group alone is (the Serve handle client shards the same way)."""
    shards: list[list[dict[str, Any]]] = [[]]
    per_shard = max(1, math.ceil(sum(len(g.get("completions", [])) for g in raw) / n_shards))
    per_shard = min(per_shard, max_batch)
    count = 0
    for group in raw:
        size = len(group.get("completions", []))
        if shards[-1] and count + size > per_shard:
            shards.append([])
            count = 0
        shards[-1].append(group)
        count += size
    return shards


class ScoreClient(_Base):
    """Blocking client; safe to share between threads."""

    _transport = httpx.Client
    _clients: list[httpx.Client]

    def _setup(self) -> None:
        # A batch's shards go out side by side, one thread each.
        self._threads = ThreadPoolExecutor(max_workers=max(4, 2 * len(self.urls)), thread_name_prefix="groupscore")

    def __enter__(self) -> ScoreClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._threads.shutdown(wait=False)
        for client in self._clients:
            client.close()

    def request(self, method: str, path: str, payload: Any = None, shard: int = 0) -> Any:
        """One call with retries; a retry moves to the next URL. Returns the decoded JSON body."""
        failure: Exception | None = None
        body = _body(payload)
        for attempt in range(self.retry.max_retries + 1):
            response = None
            try:
                response = self._clients[(shard + attempt) % len(self._clients)].request(method, path, **body)
                return _accept(response)
            except (httpx.TransportError, _Retryable) as exc:  # connection refused/reset, timeouts, 429, 5xx
                failure = exc
            if attempt < self.retry.max_retries:
                time.sleep(self.retry.delay(attempt, response))
        raise self._gave_up(method, path, failure)

    def score_raw(
        self, items: Sequence[Any], reward: RewardSpec | dict | None = None, deadline_s: float | None = None
    ) -> list[dict[str, Any]]:
        """Verdicts as plain dicts, in input order."""
        payloads = self._score_payloads(items, reward, deadline_s)
        if len(payloads) == 1:
            return self.request("POST", "/v1/score", payloads[0])["results"]
        futures = [
            self._threads.submit(self.request, "POST", "/v1/score", payload, index)
            for index, payload in enumerate(payloads)
        ]
        return [verdict for future in futures for verdict in future.result()["results"]]

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
        """Per group, in input order: its verdicts, the total's statistics (rewards, mean, std, advantages,
        zero_variance, masked) and each component's."""
        payloads = self._groups_payloads(groups, reward, eps, std, deadline_s)
        futures = [
            self._threads.submit(self.request, "POST", "/v1/score/groups", payload, index)
            for index, payload in enumerate(payloads)
        ]
        return [GroupResult.model_validate(group) for future in futures for group in future.result()["groups"]]

    def verifiers(self) -> dict[str, Any]:
        return self.request("GET", "/v1/verifiers")

    def ready(self) -> bool:
        try:
            return all(client.get("/readyz").status_code == 200 for client in self._clients)
        except httpx.TransportError:
            return False


class AsyncScoreClient(_Base):
    """asyncio client; use one per event loop (`groupscore.client.loops.LoopClients` keeps one per loop)."""

    _transport = httpx.AsyncClient
    _clients: list[httpx.AsyncClient]

    async def __aenter__(self) -> AsyncScoreClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        for client in self._clients:
            await client.aclose()

    async def request(self, method: str, path: str, payload: Any = None, shard: int = 0) -> Any:
        """One call with retries; a retry moves to the next URL. Returns the decoded JSON body."""
        failure: Exception | None = None
        body = _body(payload)
        for attempt in range(self.retry.max_retries + 1):
            response = None
            try:
                response = await self._clients[(shard + attempt) % len(self._clients)].request(method, path, **body)
                return _accept(response)
            except (httpx.TransportError, _Retryable) as exc:
                failure = exc
            if attempt < self.retry.max_retries:
                await asyncio.sleep(self.retry.delay(attempt, response))
        raise self._gave_up(method, path, failure)

    async def score_raw(
        self, items: Sequence[Any], reward: RewardSpec | dict | None = None, deadline_s: float | None = None
    ) -> list[dict[str, Any]]:
        payloads = self._score_payloads(items, reward, deadline_s)
        answers = await asyncio.gather(
            *(self.request("POST", "/v1/score", payload, index) for index, payload in enumerate(payloads))
        )
        return [verdict for answer in answers for verdict in answer["results"]]

    async def score(
        self, items: Sequence[Any], reward: RewardSpec | dict | None = None, deadline_s: float | None = None
    ) -> list[Verdict]:
        return [Verdict.model_validate(v) for v in await self.score_raw(items, reward, deadline_s)]

    async def score_groups(
        self,
        groups: Sequence[Mapping[str, Any] | BaseModel],
        reward: RewardSpec | dict | None = None,
        eps: float = 1e-4,
        std: str = "sample",
        deadline_s: float | None = None,
    ) -> list[GroupResult]:
        payloads = self._groups_payloads(groups, reward, eps, std, deadline_s)
        answers = await asyncio.gather(
            *(self.request("POST", "/v1/score/groups", payload, index) for index, payload in enumerate(payloads))
        )
        return [GroupResult.model_validate(group) for answer in answers for group in answer["groups"]]

    async def verifiers(self) -> dict[str, Any]:
        return await self.request("GET", "/v1/verifiers")

    async def ready(self) -> bool:
        try:
            # A list, not a generator: `await` inside a generator expression makes an async generator, not a bool.
            statuses = [(await client.get("/readyz")).status_code for client in self._clients]
            return all(status == 200 for status in statuses)
        except httpx.TransportError:
            return False
