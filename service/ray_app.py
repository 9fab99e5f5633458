"""The scoring service as a Ray Serve application: the FastAPI app of `groupscore serve` (`create_app`) as the ingress
of a deployment whose every replica runs its own scoring runtime, sized to the CPUs Ray gave the replica.

    serve run service/serve.yaml                      # Serve's own CLI; `groupscore serve --ray [ADDRESS]` likewise
    serve.run(application(num_replicas=2), name="groupscore", route_prefix="/")

- Sizing: a replica takes as many scoring processes as the CPUs in its Ray resources (`ray_actor_options.num_cpus`),
  never the node's core count, and sizes the sandbox's parallel runs (two jails per scoring process) and math's
  symbolic pool (at most its CPUs) to it: a node holding several replicas is not oversubscribed.
- HTTP: every endpoint of `groupscore serve` through Serve's HTTP ingress (HAProxy straight to the replica, or Serve's
  proxy actor: service/ray_deploy.py), under the application's route prefix.
- Handles (no HTTP hop; a Ray worker such as verl's reward loop): `score` and `score_groups` take the endpoints' JSON
  body and run the endpoints' own code; they answer `(status, JSON bytes, headers)` as HTTP would
  (`groupscore.client.serve_handle` calls them). A handle reaches the deployment from inside the cluster only, so the
  bearer token (an HTTP matter) is not asked for.
- Health: Serve's `check_health` is the service's readiness with the sandbox required (`require_sandbox`): a replica
  whose workers are down or whose sandbox cannot run a program fails it, so Serve routes nothing to it (a new replica
  is routed to only after its first check passed) and replaces it, instead of it serving infra_error verdicts.
- Placement: `max_replicas_per_node` (service/serve.yaml: 1) spreads replicas, and so the sandbox's runs, over nodes.
- Sessions (/v1/sessions): a session lives in the replica that opened it; its later calls reach that replica whichever
  replica HTTP gave them to, and a replica's death makes its sessions lost (infra_error), never 0
  (service/ray_sessions.py).
"""

from __future__ import annotations

import asyncio
import math
import os
from typing import Any

import ray
from fastapi import FastAPI
from pydantic import BaseModel, ValidationError
from ray import serve
from ray.serve import Application
from ray.serve.deployment import Deployment
from starlette.responses import Response

from groupscore.service.app import create_app, groups_response, score_response
from groupscore.service.dispatch import QueueFull
from groupscore.service.ray_sessions import Answer, Peers, SessionAffinity, call_app, forwarded_scope
from groupscore.service.requests import GroupsRequest, ScoreRequest
from groupscore.service.responses import queue_full_response, validation_error_response
from groupscore.service.routing import OFFLOAD_BYTES
from groupscore.service.server import tune_garbage_collector
from groupscore.service.settings import Settings

DEPLOYMENT = "GroupScore"
APP_NAME = "groupscore"
# Math's symbolic pool (per scoring process) is capped at 4 by default; a replica caps it at its CPUs too.
_MAX_SYMBOLIC_WORKERS = 4
_JAILS_PER_PROCESS = 2


def replica_cpus() -> float:
    """The CPUs Ray assigned to this replica (0 when it asked for none)."""
    return float(ray.get_runtime_context().get_assigned_resources().get("CPU", 0.0))


def workers_for(cpus: float) -> int:
    """Scoring processes for a replica holding `cpus` CPUs: one per whole CPU, at least one."""
    return max(1, math.floor(cpus))


def _size_parallel_runs(workers: int) -> None:
    # Read by the sandbox and the bounded workers in the scoring processes, which are forked after this; a value the
    # operator set (runtime_env) stays. Without it each process would take the node's cores: on a 64-core node, 64
    # parallel jails per scoring process. A jail run is about half waiting (namespaces, cgroups), so two per scoring
    # process, two per CPU in all, keep the replica's cores busy (bench/RESULTS.md, "Sandbox").
    os.environ.setdefault("GROUPSCORE_SANDBOX_WORKERS", str(_JAILS_PER_PROCESS))
    os.environ.setdefault("GROUPSCORE_BOUNDED_WORKERS", str(min(workers, _MAX_SYMBOLIC_WORKERS)))


class GroupScoreReplica:
    """One replica: its settings (GROUPSCORE_* in its environment, then `settings`), its app and scoring runtime.
    `GroupScore` below is the deployment made of it."""

    def __init__(self, settings: dict[str, Any] | None = None, require_sandbox: bool = True) -> None:
        self.cpus = replica_cpus()
        workers = workers_for(self.cpus)
        _size_parallel_runs(workers)
        self.settings = Settings.from_env(
            **{"workers": workers, "require_sandbox": require_sandbox, **(settings or {})}
        )
        # Its lifespan (Serve runs it) starts the workers; session calls go where their session is, once the
        # Gatekeeper has checked their token and size.
        self.service: FastAPI = create_app(self.settings, inner=[(SessionAffinity, {"peers": self._session_peers})])
        self._peers: Peers | None = None
        tune_garbage_collector()  # as `groupscore serve` does: a batch's many short-lived containers

    def __serve_build_asgi_app__(self) -> FastAPI:
        return self.service

    async def check_health(self) -> None:
        """Serve's health check: raises (unhealthy) while the service is not ready. The first one also registers
        the replica's multiplexed id, before Serve routes anything to it."""
        await self._session_peers()
        readiness = await self.service.state.dispatcher.readiness()
        problems = readiness.problems(self.settings.require_sandbox)
        if problems:
            raise RuntimeError(f"groupscore replica not ready: {'; '.join(problems)}")

    async def score(self, body: bytes) -> tuple[int, bytes, dict[str, str]]:
        """POST /v1/score's body in, its answer out: (status, JSON bytes, headers)."""
        request = await _parsed(ScoreRequest, body)
        if isinstance(request, Response):
            return _plain(request)
        return _plain(await self._answer(score_response(self.service.state.dispatcher, self.settings, request)))

    async def score_groups(self, body: bytes) -> tuple[int, bytes, dict[str, str]]:
        """POST /v1/score/groups' body in, its answer out: (status, JSON bytes, headers)."""
        request = await _parsed(GroupsRequest, body)
        if isinstance(request, Response):
            return _plain(request)
        return _plain(await self._answer(groups_response(self.service.state.dispatcher, self.settings, request)))

    async def session_call(
        self, replica: str, method: str, path: str, query: bytes, headers: list[tuple[bytes, bytes]], body: bytes
    ) -> Answer | None:
        """A session call another replica forwarded here (routed by `replica` as the multiplexed id): its answer, or
        None when this is not `replica` (Serve's router fell back to another replica; nothing was run)."""
        peers = await self._session_peers()
        if replica != peers.me:
            return None
        return await call_app(self.service, forwarded_scope(method, path, query, headers), body)

    async def _session_peers(self) -> Peers:
        if self._peers is None:
            peers = Peers()
            await self._holding(peers.me)
            self._peers = peers
        return self._peers

    @serve.multiplexed(max_num_models_per_replica=1)
    async def _holding(self, replica: str) -> str:
        """This replica's one multiplexed "model": its own id, by which Serve routes its sessions' calls to it."""
        return replica

    async def whoami(self) -> dict[str, Any]:
        """Where this replica runs and how it is sized (operators and tests: placement, sizing)."""
        context = ray.get_runtime_context()
        return {
            "replica": serve.get_replica_context().replica_id.unique_id,
            "node_id": context.get_node_id(),
            "pid": os.getpid(),
            "cpus": self.cpus,
            "workers": self.settings.workers,
            "worker_pids": self.service.state.dispatcher.worker_pids(),
            "scored_items": sum(
                sample.value
                for family in self.service.state.metrics.items.collect()
                for sample in family.samples
                if sample.name.endswith("_total")
            ),
        }

    async def _answer(self, pending: Any) -> Response:
        try:
            response: Response = await pending
        except QueueFull as exc:
            self.service.state.metrics.rejected.labels("queue_full").inc()
            return queue_full_response(exc)
        return response


# The deployment: the class above as the ingress of Serve's HTTP proxy, with the defaults a Serve config overrides.
GroupScore: Deployment = serve.deployment(
    name=DEPLOYMENT,
    ray_actor_options={"num_cpus": 1},
    # A scoring request is a batch, bounded by the replica's own queue (max_queue_items); a session step is one tool
    # call, and the steps of a GRPO batch's sessions run side by side (up to the sessions a replica holds).
    max_ongoing_requests=256,
    health_check_period_s=10,
    health_check_timeout_s=60,  # a sandbox probe on a loaded node may take seconds
    graceful_shutdown_timeout_s=30,
)(serve.ingress()(GroupScoreReplica))


async def _parsed(model: type[BaseModel], body: bytes) -> Any:
    try:
        if len(body) > OFFLOAD_BYTES:  # as HTTP bodies are: off the event loop, which other requests share
            return await asyncio.to_thread(model.model_validate_json, body)
        return model.model_validate_json(body)
    except ValidationError as exc:  # the 422 HTTP gives, field paths under "body" as there
        errors = [{**error, "loc": ("body", *error.get("loc", ()))} for error in exc.errors(include_url=False)]
        return validation_error_response(errors)


def _plain(response: Response) -> tuple[int, bytes, dict[str, str]]:
    headers = {k: v for k, v in response.headers.items() if k.lower() not in ("content-length", "content-type")}
    return response.status_code, bytes(response.body), headers


def application(
    *,
    num_replicas: int | None = 1,
    num_cpus: float = 1.0,
    max_replicas_per_node: int | None = None,
    autoscaling_config: dict[str, Any] | None = None,
    settings: dict[str, Any] | None = None,
    require_sandbox: bool = True,
    runtime_env: dict[str, Any] | None = None,
) -> Application:
    """The bound application, for `serve.run`: replicas (or an autoscaling config), CPUs per replica (its scoring
    processes), at most so many replicas a node, the service's settings (`Settings` fields) and the sandbox rule."""
    actor_options: dict[str, Any] = {"num_cpus": num_cpus}
    if runtime_env:
        actor_options["runtime_env"] = runtime_env
    options: dict[str, Any] = {"ray_actor_options": actor_options}
    if autoscaling_config is not None:
        options["autoscaling_config"] = autoscaling_config
    else:
        options["num_replicas"] = num_replicas
    if max_replicas_per_node is not None:
        options["max_replicas_per_node"] = max_replicas_per_node
    return GroupScore.options(**options).bind(settings=settings, require_sandbox=require_sandbox)


def build(args: dict[str, Any]) -> Application:
    """The application builder a Serve config's `import_path` names (`groupscore.service.ray_app:build`): `args`
    holds `settings` and `require_sandbox`; replicas, autoscaling, CPUs and placement are the config's
    `deployments` options, which Serve applies over these defaults."""
    unknown = set(args) - {"settings", "require_sandbox"}
    if unknown:
        raise ValueError(
            f"groupscore's Serve args take settings and require_sandbox, not {', '.join(sorted(unknown))}; "
            "replicas, CPUs and placement go in the config's deployments section"
        )
    return GroupScore.bind(settings=args.get("settings"), require_sandbox=bool(args.get("require_sandbox", True)))
