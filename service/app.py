"""The FastAPI app: scoring endpoints, registry, health, metrics; `create_app(settings)` builds one instance."""

from __future__ import annotations

import hmac
import time
from collections.abc import Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from groupscore.schema import codec
from groupscore.service import docs, protocols
from groupscore.service.dispatch import Dispatcher
from groupscore.service.groups import group_stats
from groupscore.service.metrics import ServiceMetrics
from groupscore.schema.wire import GroupsResponse, ScoreResponse, VerifierInfo, VerifiersResponse
from groupscore.service.requests import GroupsRequest, ScoreRequest, item_component_schemas
from groupscore.service.pool import QueueFull, ScoringPool
from groupscore.service.routing import OffloadingRoute, encode_json
from groupscore.service.settings import Settings
from groupscore.schema.reward import RewardSpec
from groupscore.verifiers.registry import KINDS
from groupscore.schema.verdict import Status

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

# Paths anyone may call: probes and the API description. Everything else needs the token when one is set.
OPEN_PATHS = frozenset({"/healthz", "/readyz", docs.DOCS_PATH, docs.OAUTH2_REDIRECT_PATH, docs.REDOC_PATH, "/openapi.json"})
OPEN_PREFIXES = (docs.ASSETS_PATH + "/",)  # the docs pages' scripts and styles
_DRAIN_LIMIT_BYTES = 512 * 1024 * 1024  # an oversized body is read (and dropped) up to this, so the 413 gets through
_LARGE_RESPONSE_ITEMS = 2000  # from here on, a response is encoded off the event loop


def json_response(payload: Any, status_code: int = 200, headers: dict[str, str] | None = None) -> Response:
    # Verdict dicts come from the workers already plain; serialising them directly skips a second validation pass.
    return Response(codec.dumps(payload), status_code=status_code,
                    media_type="application/json", headers=headers)


async def verdicts_response(payload: Any, n_items: int) -> Response:
    return Response(await encode_json(payload, n_items >= _LARGE_RESPONSE_ITEMS), media_type="application/json")


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
        endpoint = scope["path"] if scope["path"] in self.known_paths else "other"  # labels stay few
        status = [500]

        async def send_recording(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        started = time.perf_counter()
        try:
            await self._guarded(scope, receive, send_recording)
        finally:
            self.metrics.requests.labels(endpoint, str(status[0])).inc()
            self.metrics.latency.labels(endpoint).observe(time.perf_counter() - started)

    async def _guarded(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope["path"]
        if self._expected_auth is not None and path not in OPEN_PATHS and not path.startswith(OPEN_PREFIXES):
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(given, self._expected_auth):
                self.metrics.rejected.labels("auth").inc()
                await _send_json(send, 401, {"detail": "missing or invalid bearer token"},
                                 [(b"www-authenticate", b"Bearer")])
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
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


def validation_error_response(errors: list[dict[str, Any]]) -> JSONResponse:
    """422 naming each problem's field path; the offending input is not echoed back (it may be megabytes)."""
    detail = [{"loc": list(e.get("loc", ())), "field": ".".join(str(p) for p in e.get("loc", ())),
               "msg": e.get("msg", ""), "type": e.get("type", "value_error")} for e in errors[:50]]
    return JSONResponse({"detail": detail}, status_code=422)


def too_many_items(field: str, count: int, limit: int) -> JSONResponse:
    return validation_error_response([{"loc": ("body", field), "type": "too_long",
                                       "msg": f"{count} items in one request; at most {limit} are allowed"}])


def create_app(settings: Settings | None = None) -> FastAPI:
    """A service instance: its own pool, metrics and settings (started and stopped with the app's lifespan)."""
    settings = settings or Settings.from_env()
    metrics = ServiceMetrics()
    pool = ScoringPool(settings, metrics)
    dispatcher = Dispatcher(settings, pool, metrics)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        await pool.start()
        try:
            yield
        finally:
            await pool.close()

    app = FastAPI(
        title="groupscore", version="0.1.0", lifespan=lifespan, docs_url=None, redoc_url=None,
        summary="Batched, bounded verifier rewards for GRPO / RLVR training.",
        description="Scores items with the registered verifier kinds in a process pool. Composite rewards, group "
                    "advantages, and adapters for OpenRLHF (`/get_reward`) and SandboxFusion (`/run_code`).",
    )
    docs.add_docs(app)
    app.router.route_class = OffloadingRoute
    app.state.settings = settings
    app.state.metrics = metrics
    app.state.pool = pool
    app.state.dispatcher = dispatcher

    @app.exception_handler(RequestValidationError)
    async def _on_invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        metrics.rejected.labels("invalid").inc()
        return validation_error_response(list(exc.errors()))

    @app.exception_handler(QueueFull)
    async def _on_queue_full(request: Request, exc: QueueFull) -> Response:
        metrics.rejected.labels("queue_full").inc()
        return json_response({"detail": str(exc)}, 429, {"Retry-After": str(exc.retry_after_s)})

    @app.post("/v1/score", response_model=ScoreResponse, tags=["scoring"],
              responses={413: {"description": "Body too large"}, 422: {"description": "Invalid request"},
                         429: {"description": "Queue full; see Retry-After"}})
    async def score(body: ScoreRequest) -> Response:
        """Score items in order; each result carries at least id, reward and status."""
        if len(body.items) > settings.max_items:
            return too_many_items("items", len(body.items), settings.max_items)
        verdicts = await dispatcher.score(body.items, body.reward, body.deadline_s)
        return await verdicts_response({"results": verdicts}, len(verdicts))

    @app.post("/v1/score/groups", response_model=GroupsResponse, tags=["scoring"],
              responses={413: {"description": "Body too large"}, 422: {"description": "Invalid request"},
                         429: {"description": "Queue full; see Retry-After"}})
    async def score_groups(body: GroupsRequest) -> Response:
        """Score each group's completions; per group: mean, std, advantages, zero-variance flag (total and components)."""
        total = sum(len(group.completions) for group in body.groups)
        if total > settings.max_items:
            return too_many_items("groups", total, settings.max_items)
        raw_items = [{**group.item, "completion": completion, "id": index}
                     for group in body.groups for index, completion in enumerate(group.completions)]
        verdicts = await dispatcher.score(raw_items, body.reward, body.deadline_s)
        return await verdicts_response({"groups": _group_results(body, verdicts)}, len(verdicts))

    @app.get("/v1/verifiers", response_model=VerifiersResponse, tags=["registry"])
    async def verifiers() -> VerifiersResponse:
        """The registered verifier kinds, each with its item schema, and the composite reward spec's schema."""
        infos = [VerifierInfo(name=name, version=kind.version, summary=kind.summary,
                              item_schema=kind.item_model.model_json_schema(),
                              available=name not in pool.unavailable_kinds, problem=pool.unavailable_kinds.get(name))
                 for name, kind in KINDS.items()]
        return VerifiersResponse(verifiers=infos, reward_spec_schema=RewardSpec.model_json_schema())

    @app.get("/healthz", tags=["probes"])
    async def healthz() -> dict[str, str]:
        """Liveness: the server answers."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["probes"], responses={503: {"description": "Not ready"}})
    async def readyz() -> Response:
        """Readiness: the scoring processes are up with their scorers loaded."""
        payload = {"ready": pool.ready, "workers": settings.workers, "queue_depth": pool.queue_depth,
                   "unavailable_kinds": pool.unavailable_kinds}
        return json_response(payload, 200 if pool.ready else 503)

    @app.get("/metrics", tags=["probes"], response_class=Response)
    async def prometheus_metrics() -> Response:
        """Prometheus text format."""
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    if settings.debug:
        @app.get("/debug/workers", tags=["debug"], include_in_schema=False)
        async def debug_workers() -> dict[str, list[int]]:
            """Pids of the scoring processes (tests kill one to check recovery)."""
            return {"pids": pool.worker_pids()}

    app.include_router(protocols.router)

    def openapi_with_item_schemas() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = FastAPI.openapi(app)
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            for name, definition in item_component_schemas().items():
                components.setdefault(name, definition)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi_with_item_schemas  # type: ignore[method-assign]
    known = frozenset(route.path for route in app.routes if hasattr(route, "path"))
    app.add_middleware(Gatekeeper, settings=settings, metrics=metrics, known_paths=known)
    return app


def _group_results(body: GroupsRequest, verdicts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    names = [component.name for component in body.reward.components] if body.reward else []
    results = []
    start = 0
    for group in body.groups:
        group_verdicts = verdicts[start:start + len(group.completions)]
        start += len(group.completions)
        masked = [v["status"] == Status.infra_error.value for v in group_verdicts]  # never judged: no fake 0
        total = group_stats([v["reward"] for v in group_verdicts], body.eps, body.std, masked)
        components = {}
        for name in names:
            # An item that failed validation has no component scores: it counts as 0, like its total.
            scores = [(v.get("components") or {}).get(name, 0.0) for v in group_verdicts]
            components[name] = group_stats(scores, body.eps, body.std, masked).model_dump()
        results.append({"id": group.id, "results": group_verdicts, "total": total.model_dump(),
                        "components": components})
    return results
