"""The FastAPI app: scoring endpoints, registry, health, metrics; `create_app(settings)` builds one instance."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from groupscore.schema.reward import RewardSpec
from groupscore.schema.wire import GroupsResponse, ScoreResponse, VerifierInfo, VerifiersResponse
from groupscore.service import docs, protocols, sessions
from groupscore.service.dispatch import Dispatcher, QueueFull
from groupscore.service.gatekeeper import Gatekeeper
from groupscore.service.groups import group_items, group_results
from groupscore.service.metrics import ServiceMetrics
from groupscore.service.requests import GroupsRequest, ScoreRequest, item_component_schemas
from groupscore.service.responses import (
    json_response,
    queue_full_response,
    too_many_items,
    validation_error_response,
    verdicts_response,
)
from groupscore.service.routing import OffloadingRoute
from groupscore.service.settings import Settings
from groupscore.verifiers.registry import KINDS


def create_app(settings: Settings | None = None, inner: Sequence[tuple[Any, dict[str, Any]]] = ()) -> FastAPI:
    """A service instance: its own scoring workers, metrics and settings (started and stopped with its lifespan).
    inner: ASGI middleware (class, options) run inside the Gatekeeper, so after its auth and body limit (the Ray
    deployment's session affinity reads bodies: it must never read one that is unauthorised or too large)."""
    settings = settings or Settings.from_env()
    metrics = ServiceMetrics()
    dispatcher = Dispatcher(settings, metrics)
    session_host = sessions.SessionHost(settings.max_sessions, metrics, settings.task_dirs)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await dispatcher.start()
        try:
            yield
        finally:
            await session_host.close()  # every environment session's jail goes with the server
            await dispatcher.close()

    app = FastAPI(
        title="groupscore",
        version="0.1.0",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        summary="Batched, bounded verifier rewards for GRPO / RLVR training.",
        description="Scores items with the registered verifier kinds in a process pool. Composite rewards, group "
        "advantages, and adapters for OpenRLHF (`/get_reward`) and SandboxFusion (`/run_code`).",
    )
    docs.add_docs(app)
    app.router.route_class = OffloadingRoute
    app.state.settings = settings
    app.state.metrics = metrics
    app.state.dispatcher = dispatcher
    app.state.session_host = session_host

    @app.exception_handler(RequestValidationError)
    async def _on_invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        metrics.rejected.labels("invalid").inc()
        return validation_error_response(list(exc.errors()))

    @app.exception_handler(QueueFull)
    async def _on_queue_full(request: Request, exc: QueueFull) -> Response:
        metrics.rejected.labels("queue_full").inc()
        return queue_full_response(exc)

    @app.post(
        "/v1/score",
        response_model=ScoreResponse,
        tags=["scoring"],
        responses={
            413: {"description": "Body too large"},
            422: {"description": "Invalid request"},
            429: {"description": "Queue full; see Retry-After"},
        },
    )
    async def score(body: ScoreRequest) -> Response:
        """Score items in order; each result carries at least id, reward and status."""
        return await score_response(dispatcher, settings, body)

    @app.post(
        "/v1/score/groups",
        response_model=GroupsResponse,
        tags=["scoring"],
        responses={
            413: {"description": "Body too large"},
            422: {"description": "Invalid request"},
            429: {"description": "Queue full; see Retry-After"},
        },
    )
    async def score_groups(body: GroupsRequest) -> Response:
        """Score each group's completions; per group: mean, std, advantages, zero-variance flag (total, components)."""
        return await groups_response(dispatcher, settings, body)

    @app.get("/v1/verifiers", response_model=VerifiersResponse, tags=["registry"])
    async def verifiers() -> VerifiersResponse:
        """The registered verifier kinds, each with its item schema, and the composite reward spec's schema."""
        infos = [
            VerifierInfo(
                name=name,
                version=kind.version,
                summary=kind.summary,
                item_schema=kind.item_model.model_json_schema(),
                available=name not in dispatcher.unavailable_kinds,
                problem=dispatcher.unavailable_kinds.get(name),
            )
            for name, kind in KINDS.items()
        ]
        return VerifiersResponse(verifiers=infos, reward_spec_schema=RewardSpec.model_json_schema())

    @app.get("/healthz", tags=["probes"])
    async def healthz() -> dict[str, str]:
        """Liveness: the server answers."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["probes"], responses={503: {"description": "Not ready"}})
    async def readyz() -> Response:
        """Readiness: the scoring processes are up with their scorers loaded (and, with require_sandbox, the sandbox
        runs a program); `sandbox` is null when a probe jail ran, else why not."""
        readiness = await dispatcher.readiness()
        problems = readiness.problems(settings.require_sandbox)
        payload = {
            "ready": not problems,
            "workers": settings.workers,
            "queue_depth": dispatcher.queue_depth,
            "unavailable_kinds": readiness.unavailable_kinds,
            "sandbox": readiness.sandbox,
            "problems": problems,
        }
        return json_response(payload, 503 if problems else 200)

    @app.get("/metrics", tags=["probes"], response_class=Response)
    async def prometheus_metrics() -> Response:
        """Prometheus text format."""
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    if settings.debug:

        @app.get("/debug/workers", tags=["debug"], include_in_schema=False)
        async def debug_workers() -> dict[str, list[int]]:
            """Pids of the scoring processes (tests kill one to check recovery)."""
            return {"pids": dispatcher.worker_pids()}

    app.include_router(protocols.router)
    app.include_router(sessions.router)

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
    for middleware, options in inner:
        app.add_middleware(middleware, **options)
    app.add_middleware(Gatekeeper, settings=settings, metrics=metrics, known_paths=known)  # added last: outermost
    return app


# The scoring endpoints' bodies, also run by the Ray Serve deployment's handle methods (service/ray_app.py): one code
# path from a parsed request to its answer, whichever way the request came in. QueueFull propagates (429).


async def score_response(dispatcher: Dispatcher, settings: Settings, body: ScoreRequest) -> Response:
    if len(body.items) > settings.max_items:
        return too_many_items("items", len(body.items), settings.max_items)
    verdicts = await dispatcher.score(body.items, body.reward, body.deadline_s)
    return await verdicts_response({"results": verdicts}, len(verdicts))


async def groups_response(dispatcher: Dispatcher, settings: Settings, body: GroupsRequest) -> Response:
    total = sum(len(group.completions) for group in body.groups)
    if total > settings.max_items:
        return too_many_items("groups", total, settings.max_items)
    verdicts = await dispatcher.score(group_items(body), body.reward, body.deadline_s)
    return await verdicts_response({"groups": group_results(body, verdicts)}, len(verdicts))
