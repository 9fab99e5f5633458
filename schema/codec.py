"""JSON bytes in and out of the service and its client: orjson, with the standard library for what orjson refuses."""

from __future__ import annotations

import json
from typing import Any

import orjson


def dumps(payload: Any) -> bytes:
    """Compact JSON bytes (orjson writes NaN and infinities, which JSON lacks, as null).

    orjson refuses integers beyond 64 bits, non-string keys and lone surrogates, which the standard library writes;
    those rare payloads take the slow path rather than failing.
    """
    try:
        return orjson.dumps(payload)
    except orjson.JSONEncodeError:
        return json.dumps(payload, allow_nan=False, separators=(",", ":")).encode()


def loads(data: bytes | str) -> Any:
    """Decoded JSON; raises json.JSONDecodeError (orjson's error is a subclass) on text that is not JSON.

    What orjson refuses but the standard library reads (integers beyond 64 bits, lone surrogates, NaN) is read by
    the latter, so a body the service accepted before is still accepted.
    """
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)
