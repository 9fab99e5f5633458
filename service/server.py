"""Running the service: `serve()` behind `groupscore serve`, on uvicorn."""

from __future__ import annotations

import logging
import sys

import uvicorn

from groupscore.service.app import create_app
from groupscore.service.settings import Settings

log = logging.getLogger("groupscore.service")


def serve(host: str = "127.0.0.1", port: int = 8000, workers: int | None = None, token: str | None = None,
          settings: Settings | None = None) -> int:
    """Serve until interrupted; returns the exit status. `token` (or GROUPSCORE_TOKEN) turns on bearer auth."""
    settings = settings or Settings.from_env(host=host, port=port, workers=workers, token=token)
    if settings.host not in ("127.0.0.1", "localhost", "::1") and settings.token is None:
        print(f"groupscore serve: warning: listening on {settings.host} without a token; anyone who can reach "
              "this port can submit work", file=sys.stderr)
    config = uvicorn.Config(create_app(settings), host=settings.host, port=settings.port, log_level="warning",
                            access_log=False, timeout_keep_alive=30, lifespan="on")
    server = uvicorn.Server(config)
    print(f"groupscore: serving on http://{settings.host}:{settings.port} with {settings.workers} scoring "
          f"processes (docs at /docs)", file=sys.stderr, flush=True)
    server.run()
    return 0 if server.started else 1
