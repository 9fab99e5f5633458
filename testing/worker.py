"""The worker process behind ProcessCaller: rebuilds the target from its spec and answers call requests."""

from __future__ import annotations

import os
import pickle
import struct
import sys
import threading
import traceback
from typing import TYPE_CHECKING, Any, BinaryIO

if TYPE_CHECKING:
    from groupscore.testing.targets import Target


def _read_exact(stream: BinaryIO, size: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < size:
        chunk = stream.read(size - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _send(stream: BinaryIO, message: Any) -> None:
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(struct.pack("!Q", len(payload)) + payload)
    stream.flush()


def _call_at_once(
    barrier: threading.Barrier, results: list[Any], slot: int, run_call: Any, target: Any, cases: Any
) -> None:
    """One of the threads of a "threads" request: all start the call together, each writes its own slot."""
    barrier.wait()
    results[slot] = run_call(target, cases)


def main() -> int:
    # Keep the protocol on private descriptors: whatever the reward prints goes to stderr, and it cannot read our input.
    proto_in = os.fdopen(os.dup(0), "rb", buffering=0)
    proto_out = os.fdopen(os.dup(1), "wb", buffering=0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)

    from groupscore.testing.call_result import run_call
    from groupscore.testing.targets import build_target

    target: Target | None = None
    while True:
        header = _read_exact(proto_in, 8)
        if header is None:
            return 0
        body = _read_exact(proto_in, struct.unpack("!Q", header)[0])
        if body is None:
            return 0
        message = pickle.loads(body)
        op = message[0]
        if op == "build":
            try:
                target = build_target(message[1])
            except BaseException as exc:  # noqa: BLE001 - the target's import can raise anything; it goes back as text
                text = (
                    str(exc)
                    if type(exc).__name__ == "TargetError"
                    else "".join(traceback.format_exception_only(type(exc), exc)).strip()
                )
                _send(proto_out, ("error", text))
                continue
            _send(proto_out, ("ok", target.description))
        elif target is None:  # the caller always builds first
            _send(proto_out, ("error", f"request {op!r} before a target was built"))
        elif op == "call":
            _send(proto_out, ("ok", [run_call(target, message[1])]))
        elif op == "threads":
            cases, count = message[1], message[2]
            results: list[Any] = [None] * count
            barrier = threading.Barrier(count)
            threads = [
                threading.Thread(target=_call_at_once, args=(barrier, results, i, run_call, target, cases))
                for i in range(count)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            _send(proto_out, ("ok", results))
        else:
            _send(proto_out, ("error", f"unknown request {op!r}"))


if __name__ == "__main__":
    sys.exit(main())
