"""The FastAPI app: scoring endpoints, registry, health, metrics; `create_app(settings)` builds one instance."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from groupscore.schema.reward import RewardSpec
from groupscore.schema.verdict import Status
from groupscore.schema.wire import GroupsResponse, ScoreResponse, VerifierInfo, VerifiersResponse
from groupscore.service import docs, protocols
from groupscore.service.dispatch import Dispatcher, QueueFull
from groupscore.service.gatekeeper import Gatekeeper
from groupscore.service.groups import group_stats
from groupscore.service.metrics import ServiceMetrics
from groupscore.service.requests import GroupsRequest, ScoreRequest, item_component_schemas
from groupscore.service.responses import json_response, too_many_items, validation_error_response, verdicts_response
from groupscore.service.routing import OffloadingRoute
from groupscore.service.settings import Settings
from groupscore.verifiers.registry import KINDS


def create_app(settings: Settings | None = None) -> FastAPI:
    """A service instance: its own scoring workers, metrics and settings (started and stopped with its lifespan)."""
    settings = settings or Settings.from_env()
    metrics = ServiceMetrics()
    dispatcher = Dispatcher(settings, metrics)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await dispatcher.start()
        try:
            yield
        finally:
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

    @app.exception_handler(RequestValidationError)
    async def _on_invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        metrics.rejected.labels("invalid").inc()
        return validation_error_response(list(exc.errors()))

    @app.exception_handler(QueueFull)
    async def _on_queue_full(request: Request, exc: QueueFull) -> Response:
        metrics.rejected.labels("queue_full").inc()
        return json_response({"detail": str(exc)}, 429, {"Retry-After": str(exc.retry_after_s)})

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
        if len(body.items) > settings.max_items:
            return too_many_items("items", len(body.items), settings.max_items)
        verdicts = await dispatcher.score(body.items, body.reward, body.deadline_s)
        return await verdicts_response({"results": verdicts}, len(verdicts))

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
        total = sum(len(group.completions) for group in body.groups)
        if total > settings.max_items:
            return too_many_items("groups", total, settings.max_items)
        raw_items = [
            {**group.item, "completion": completion, "id": index}
            for group in body.groups
            for index, completion in enumerate(group.completions)
        ]
        verdicts = await dispatcher.score(raw_items, body.reward, body.deadline_s)
        return await verdicts_response({"groups": _group_results(body, verdicts)}, len(verdicts))

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
        """Readiness: the scoring processes are up with their scorers loaded."""
        payload = {
            "ready": dispatcher.ready,
            "workers": settings.workers,
            "queue_depth": dispatcher.queue_depth,
            "unavailable_kinds": dispatcher.unavailable_kinds,
        }
        return json_response(payload, 200 if dispatcher.ready else 503)

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
        group_verdicts = verdicts[start : start + len(group.completions)]
        start += len(group.completions)
        masked = [v["status"] == Status.infra_error.value for v in group_verdicts]  # never judged: no fake 0
        total = group_stats([v["reward"] for v in group_verdicts], body.eps, body.std, masked)
        components = {}
        for name in names:
            # An item that failed validation has no component scores: it counts as 0, like its total.
            scores = [(v.get("components") or {}).get(name, 0.0) for v in group_verdicts]
            components[name] = group_stats(scores, body.eps, body.std, masked).model_dump()
        results.append(
            {"id": group.id, "results": group_verdicts, "total": total.model_dump(), "components": components}
        )
    return results
