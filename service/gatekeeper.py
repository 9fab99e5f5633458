"""ASGI middleware in front of every endpoint: request metrics, bearer auth on protected paths, the body-size limit.

It answers 401 and 413 itself, before any handler (or FastAPI's body parsing) sees the request.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from groupscore.schema import codec
from groupscore.service import docs
from groupscore.service.metrics import ServiceMetrics
from groupscore.service.settings import Settings

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

# Paths anyone may call: probes and the API description. Everything else needs the token when one is set.
OPEN_PATHS = frozenset(
    {"/healthz", "/readyz", "/v1/ping", "/openapi.json", docs.DOCS_PATH, docs.OAUTH2_REDIRECT_PATH, docs.REDOC_PATH}
)
OPEN_PREFIXES = (docs.ASSETS_PATH + "/",)  # the docs pages' scripts and styles
_DRAIN_LIMIT_BYTES = 512 * 1024 * 1024  # an oversized body is read (and dropped) up to this, so the 413 gets through


class Gatekeeper:
    """ASGI middleware: request metrics for everything, bearer auth on protected paths, the body-size limit."""

    def __init__(self, app: Callable, settings: Settings, metrics: ServiceMetrics, known_paths: frozenset[str]) -> None:
        self.app = app
        self.settings = settings
        self.metrics = metrics
        self.known_paths = known_paths
        self._expected_auth = None if settings.token is None else f"Bearer {settings.token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = [500]

        async def send_recording(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        started = time.perf_counter()
        try:
            await self._guarded(scope, receive, send_recording)
        finally:
            # A route's template (/v1/sessions/{session_id}/step), never the raw path: labels stay few.
            route = getattr(scope.get("route"), "path", None)
            endpoint = scope["path"] if scope["path"] in self.known_paths else route or "other"
            self.metrics.requests.labels(endpoint, str(status[0])).inc()
            self.metrics.latency.labels(endpoint).observe(time.perf_counter() - started)

    async def _guarded(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope["path"]
        if self._expected_auth is not None and path not in OPEN_PATHS and not path.startswith(OPEN_PREFIXES):
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(given, self._expected_auth):
                self.metrics.rejected.labels("auth").inc()
                await _send_json(
                    send, 401, {"detail": "missing or invalid bearer token"}, [(b"www-authenticate", b"Bearer")]
                )
                return
        if scope["method"] not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        # Read the body here, bounded, so no handler ever holds more than max_body_bytes.
        limit = self.settings.max_body_bytes
        declared = dict(scope["headers"]).get(b"content-length")
        too_large = declared is not None and declared.isdigit() and int(declared) > limit
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            more = message.get("more_body", False)
            if size > limit:
                too_large = True
            if too_large:
                chunks = []
                if size > _DRAIN_LIMIT_BYTES:
                    break
            else:
                chunks.append(chunk)
        if too_large:
            self.metrics.rejected.labels("body_too_large").inc()
            await _send_json(send, 413, {"detail": f"request body larger than {limit} bytes"})
            return
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


async def _send_json(send: Send, status: int, payload: Any, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = codec.dumps(payload)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
