"""Large JSON bodies are decoded off the event loop, so probes and other requests keep being answered meanwhile."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response

from groupscore.schema import codec

# Below this, decoding takes well under a millisecond: a thread hop would cost more than it saves.
OFFLOAD_BYTES = 256 * 1024


class _OffloadingRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            # json.JSONDecodeError propagates as from Starlette's own json(): FastAPI answers it with a 422.
            try:
                self._json = (
                    await asyncio.to_thread(codec.loads, body) if len(body) > OFFLOAD_BYTES else codec.loads(body)
                )
            except RecursionError:  # nesting deeper than any parser here reads: malformed JSON to the client too
                raise json.JSONDecodeError("nested too deeply", "", 0) from None
            except ValueError as exc:  # a number too long to convert; bytes that are no UTF-8 stay Starlette's 400
                if isinstance(exc, (json.JSONDecodeError, UnicodeError)):
                    raise
                raise json.JSONDecodeError(str(exc).partition(";")[0], "", 0) from None
        return self._json


class OffloadingRoute(APIRoute):
    """An APIRoute whose request decodes big JSON bodies in a worker thread."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route_handler(request: Request) -> Response:
            return await handler(_OffloadingRequest(request.scope, request.receive))

        return route_handler


async def encode_json(payload: Any, large: bool) -> bytes:
    """JSON bytes of a response; a large one is encoded in a worker thread for the same reason."""
    if large:
        return await asyncio.to_thread(codec.dumps, payload)
    return codec.dumps(payload)
