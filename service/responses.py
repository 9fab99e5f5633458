"""The service's JSON answers, shared by its own endpoints (app.py) and the peer protocols' (protocols.py): plain
JSON, verdict lists (large ones encoded off the event loop), and the 422 that names each problem's field."""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse, Response

from groupscore.schema import codec
from groupscore.service.routing import encode_json

_LARGE_RESPONSE_ITEMS = 2000  # from here on, a response is encoded off the event loop


def json_response(payload: Any, status_code: int = 200, headers: dict[str, str] | None = None) -> Response:
    # Verdict dicts come from the workers already plain; serialising them directly skips a second validation pass.
    return Response(codec.dumps(payload), status_code=status_code, media_type="application/json", headers=headers)


async def verdicts_response(payload: Any, n_items: int) -> Response:
    """A response holding `n_items` verdicts."""
    return Response(await encode_json(payload, n_items >= _LARGE_RESPONSE_ITEMS), media_type="application/json")


_MAX_MSG_CHARS = 2000


def validation_error_response(errors: list[dict[str, Any]]) -> JSONResponse:
    """422 naming each problem's field path; the offending input is not echoed back (it may be megabytes). Text that
    came from the request (a key in `loc`, a message quoting a value) is made encodable: a lone surrogate would
    otherwise turn the 422 into a 500 as it is written out."""
    detail = []
    for e in errors[:50]:
        loc = [_encodable(p) if isinstance(p, str) else p for p in e.get("loc", ())]
        msg = str(e.get("msg", ""))
        reason = (e.get("ctx") or {}).get("error")
        if e.get("type") == "json_invalid" and reason:  # which JSON problem, not only that there is one
            msg = f"{msg}: {reason}"
        if len(msg) > _MAX_MSG_CHARS:
            msg = msg[:_MAX_MSG_CHARS] + "..."
        detail.append(
            {
                "loc": loc,
                "field": ".".join(str(p) for p in loc),
                "msg": _encodable(msg),
                "type": e.get("type", "value_error"),
            }
        )
    return JSONResponse({"detail": detail}, status_code=422)


def _encodable(text: str) -> str:
    """`text` with any lone surrogate written as its escape (\\udXXX), so that it encodes as UTF-8."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def queue_full_response(exc: Any) -> Response:
    """429 for a request the queue has no room for now (a `dispatch.QueueFull`), with its Retry-After."""
    return json_response({"detail": str(exc)}, 429, {"Retry-After": str(exc.retry_after_s)})


def too_many_items(field: str, count: int, limit: int) -> JSONResponse:
    """422 for a request with more items than the service takes in one request (`max_items`)."""
    return validation_error_response(
        [
            {
                "loc": ("body", field),
                "type": "too_long",
                "msg": f"{count} items in one request; at most {limit} are allowed",
            }
        ]
    )
