"""Running the service: `serve()` behind `groupscore serve`, on uvicorn."""

from __future__ import annotations

import gc
import logging
import sys

import uvicorn

from groupscore.service.app import create_app
from groupscore.service.settings import Settings

log = logging.getLogger("groupscore.service")


# A batch's items and verdicts are tens of thousands of short-lived containers; with the default gen-0 threshold (700)
# the collector runs every few hundred of them and walks the whole batch in flight each time (milliseconds per request).
_GC_GEN0_THRESHOLD = 50_000
# On SIGTERM or Ctrl-C, requests in flight get this long to finish; then they are cancelled (their clients see the
# connection drop and retry elsewhere) and the scoring processes, with whatever programs they run, are ended. Without
# it uvicorn waits for every request, and one item running a program up to its limits held a `docker stop` that long.
SHUTDOWN_GRACE_S = 5


def tune_garbage_collector() -> None:
    """For the server process only: collect young objects rarely, and never walk what start-up built again.

    Everything alive once the app is built (modules, routes, models) lives as long as the server, so it is frozen
    out of the collector's reach; a batch's containers mostly die by reference counting before a collection sees them.
    """
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(_GC_GEN0_THRESHOLD, gen1, gen2)


def serve(
    host: str | None = None,
    port: int | None = None,
    workers: int | None = None,
    token: str | None = None,
    settings: Settings | None = None,
) -> int:
    """Serve until interrupted; returns the exit status. An argument left None comes from its GROUPSCORE_* variable,
    else the default (service/settings.py); `token` (or GROUPSCORE_TOKEN) turns on bearer auth."""
    settings = settings or Settings.from_env(host=host, port=port, workers=workers, token=token)
    if settings.host not in ("127.0.0.1", "localhost", "::1") and settings.token is None:
        print(
            f"groupscore serve: warning: listening on {settings.host} without a token; anyone who can reach "
            "this port can submit work",
            file=sys.stderr,
        )
    config = uvicorn.Config(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        log_level="warning",
        access_log=False,
        timeout_keep_alive=30,
        timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
        lifespan="on",
    )
    server = uvicorn.Server(config)
    tune_garbage_collector()
    print(
        f"groupscore: serving on http://{settings.host}:{settings.port} with {settings.workers} scoring "
        f"processes (docs at /docs)",
        file=sys.stderr,
        flush=True,
    )
    server.run()
    return 0 if server.started else 1
