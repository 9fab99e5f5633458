"""The trainer's `service.ray` section: score through the Ray Serve deployment (service/ray_app.py) instead of a service
embedded for the run. The deployment is joined when the cluster already runs it under `app_name` (and left running),
else deployed for the run and deleted after it; the trainer reaches it through Serve's proxy URL.

    service:
      ray: {address: auto, replicas: 4, replica_cpus: 8, max_replicas_per_node: 1}
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class RayServiceConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    address: str | None = Field(
        default=None, description="Ray cluster address ('auto', 'ray://head:10001'); unset: RAY_ADDRESS, else local."
    )
    app_name: str = Field(default="groupscore", description="Serve application name: joined if it runs already.")
    route_prefix: str = Field(default="/", pattern=r"^/")
    http_host: str = Field(default="127.0.0.1", description="Serve's proxy (when this run starts Serve).")
    http_port: int = Field(default=8000, ge=1, le=65535)
    replicas: int = Field(default=1, ge=1, description="Replicas when this run deploys it (unless autoscaling).")
    replica_cpus: float = Field(default=1.0, ge=0, description="CPUs per replica: one scoring process each.")
    max_replicas_per_node: int | None = Field(default=None, ge=1, description="Spread replicas over nodes.")
    autoscaling: dict[str, Any] | None = Field(
        default=None, description="Serve's autoscaling_config (min_replicas, max_replicas, target_ongoing_requests)."
    )
    settings: dict[str, Any] = Field(default_factory=dict, description="Service settings for every replica.")
    require_sandbox: bool = Field(default=True, description="A replica whose sandbox cannot run is not routed to.")
    ingress: Literal["haproxy", "proxy"] | None = Field(
        default=None,
        description="Serve's HTTP ingress when this run starts Serve: HAProxy or its proxy actor (10-25 ms more a "
        "request); unset: RAY_SERVE_ENABLE_HA_PROXY if set, else HAProxy where its binary is found.",
    )


@contextmanager
def ray_service_url(config: RayServiceConfig, token: str | None, task_dirs: list[str] | None = None) -> Iterator[str]:
    """The deployment's URL through Serve's proxy, for the time of the block; `token` is required by every replica.
    A deployment made for the run may also open `task_dirs`' task files (a joined one has its own settings)."""
    try:
        from groupscore.service.ray_deploy import RayTarget, start_or_join
    except ImportError as exc:
        raise ValueError(f"service.ray needs Ray Serve: pip install 'groupscore[ray]' ({exc})") from None
    settings = dict(config.settings)
    if task_dirs:
        from groupscore.service.settings import task_dirs_adding

        settings["task_dirs"] = task_dirs_adding(task_dirs, to=settings.get("task_dirs"))
    if token is not None:
        settings.setdefault("token", token)
    target = RayTarget(
        address=config.address,
        app_name=config.app_name,
        route_prefix=config.route_prefix,
        http_host=config.http_host,
        http_port=config.http_port,
        num_replicas=config.replicas,
        num_cpus=config.replica_cpus,
        max_replicas_per_node=config.max_replicas_per_node,
        autoscaling_config=config.autoscaling,
        settings=settings,
        require_sandbox=config.require_sandbox,
        ingress=config.ingress,
    )
    with start_or_join(target) as url:
        yield url
