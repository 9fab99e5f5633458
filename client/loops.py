"""One async client per event loop, reused within the loop and closed when the loop shuts down.

An httpx.AsyncClient belongs to the loop its connections were opened on, so a reward function that may be awaited
from several loops (TRL's reward thread, a notebook's `asyncio.run` per call, a test) needs one client per loop.
`LoopClients` keeps them:

    clients = LoopClients(lambda: AsyncScoreClient(urls))
    client = await clients.get()      # this loop's client, made on first use

How a loop's client gets closed: with each client, the registry starts a small async generator on that loop and
holds it, suspended. A loop shut down properly (`asyncio.run`, `asyncio.Runner`, or anyone calling
`loop.shutdown_asyncgens()` before `loop.close()`) finalizes every async generator started on it, and this one's
`finally` closes the client, on its own loop, before the loop closes: no unclosed transports left behind. asyncio
offers no other hook on a loop's end (a weakref finalizer on the loop would not fire: the client's open connections
hold the loop). A loop that runs forever in a thread (TRL's) is never shut down that way; `close()` closes its
client on it, from any thread, while it still runs.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

CLOSE_WAIT_S = 10.0  # close(): how long to wait for a client on another thread's loop to close


class AsyncClosable(Protocol):
    async def aclose(self) -> None: ...


# Written with TypeVar and Generic, not the 3.12 syntax: this module ships in groupscore-client (Python >= 3.10).
C = TypeVar("C", bound=AsyncClosable)


@dataclass
class _Entry(Generic[C]):
    loop: asyncio.AbstractEventLoop
    client: C
    # Started on `loop` and held here (the loop keeps only a weak reference): its finally closes `client`.
    closer: AsyncGenerator[None, None]


async def _close_at_shutdown(client: AsyncClosable) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        await client.aclose()


class LoopClients(Generic[C]):
    """A client per event loop: made by `factory` on a loop's first `get()`, closed when that loop shuts down."""

    def __init__(self, factory: Callable[[], C]) -> None:
        self._factory = factory
        self._entries: dict[int, _Entry[C]] = {}  # id(loop) -> entry; the entry holds the loop, so ids stay unique
        self._lock = threading.Lock()  # loops on several threads may ask at once

    def __len__(self) -> int:
        """Clients held for loops that have not closed."""
        with self._lock:
            self._forget_closed()
            return len(self._entries)

    async def get(self) -> C:
        """The running loop's client (made and registered for closing on first use)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            self._forget_closed()
            entry = self._entries.get(id(loop))
            if entry is not None:
                return entry.client
            client = self._factory()
            entry = _Entry(loop, client, _close_at_shutdown(client))
            self._entries[id(loop)] = entry
        await entry.closer.__anext__()  # started on this loop: the loop now finalizes it at shutdown
        return client

    def close(self) -> None:
        """Close every client now, each on its own loop; callable from any thread, inside a loop or not.

        A client on the calling thread's running loop is closed by a task on it (this call cannot wait for it);
        one on another thread's running loop is closed there and waited for; a stopped loop's client is left to
        that loop's shutdown (see the module docstring)."""
        with self._lock:
            entries, self._entries = list(self._entries.values()), {}
        try:
            current: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            current = None
        for entry in entries:
            if entry.loop.is_closed():
                continue
            if entry.loop is current:
                entry.loop.create_task(entry.closer.aclose())
            elif entry.loop.is_running():
                asyncio.run_coroutine_threadsafe(entry.closer.aclose(), entry.loop).result(timeout=CLOSE_WAIT_S)
            # else: dropping `closer` lets the loop finalize it (scheduled for when the loop runs again or shuts down)

    async def aclose(self) -> None:
        """close(), awaiting the running loop's own client as well."""
        loop = asyncio.get_running_loop()
        with self._lock:
            own = self._entries.pop(id(loop), None)
        self.close()
        if own is not None:
            await own.closer.aclose()

    def _forget_closed(self) -> None:
        # A loop closed since: its client was closed at its shutdown, or (closed without one) cannot be closed now.
        for key in [key for key, entry in self._entries.items() if entry.loop.is_closed()]:
            del self._entries[key]
