"""One async client per event loop: reused within a loop, a new one on another loop, closed when its loop shuts down
(no unclosed transport left behind), and closable from another thread while a loop runs forever (TRL's)."""

from __future__ import annotations

import asyncio
import gc
import threading
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from groupscore.client.http import AsyncScoreClient
from groupscore.client.loops import LoopClients


class _Ready(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: a connection stays open after the call, as the service's do

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Ready)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def made(url):
    """A registry of real clients, and every client it made."""
    clients: list[AsyncScoreClient] = []

    def factory() -> AsyncScoreClient:
        clients.append(AsyncScoreClient(url))
        return clients[-1]

    return LoopClients(factory), clients


def _closed(client: AsyncScoreClient) -> bool:
    return all(c.is_closed for c in client._clients)


async def _use(registry: LoopClients[AsyncScoreClient]) -> AsyncScoreClient:
    """Two calls on this loop, each opening a real connection (keep-alive: it stays open after the call)."""
    first = await registry.get()
    assert await first.ready()
    second = await registry.get()
    assert await second.ready()
    assert second is first
    return first


def test_one_client_per_loop_reused_within_it_and_closed_when_the_loop_shuts_down(made):
    registry, clients = made
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        one = asyncio.run(_use(registry))
        assert _closed(one)  # asyncio.run shut the loop down: its client went with it
        two = asyncio.run(_use(registry))
        assert two is not one and _closed(two)
        assert clients == [one, two] and len(registry) == 0  # closed loops are forgotten
        del one, two
        clients.clear()
        gc.collect()  # an unclosed transport warns as it is collected
    leaks = [w for w in caught if issubclass(w.category, ResourceWarning)]
    assert not leaks, [str(w.message) for w in leaks]


def test_two_loops_running_at_once_get_two_clients(made):
    registry, clients = made
    barrier = threading.Barrier(2)
    got: dict[int, AsyncScoreClient] = {}

    async def on_loop(index: int) -> None:
        got[index] = await _use(registry)
        await asyncio.to_thread(barrier.wait, 10)  # both loops hold their client at the same time
        assert await registry.get() is got[index]

    threads = [threading.Thread(target=asyncio.run, args=(on_loop(i),)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(got) == 2 and got[0] is not got[1] and sorted(map(id, clients)) == sorted(map(id, got.values()))
    assert all(_closed(c) for c in clients)


def test_close_from_another_thread_closes_a_client_on_a_loop_that_runs_forever(made):
    registry, _clients = made
    loop = asyncio.new_event_loop()  # as TRL runs its reward loop: run_forever in a daemon thread, never shut down
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        client = asyncio.run_coroutine_threadsafe(_use(registry), loop).result(30)
        assert not _closed(client)
        registry.close()  # from this thread, while the loop runs
        assert _closed(client) and len(registry) == 0
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()


def test_aclose_closes_the_running_loops_own_client(made):
    registry, _clients = made

    async def go() -> AsyncScoreClient:
        client = await _use(registry)
        await registry.aclose()
        assert _closed(client)
        return client

    asyncio.run(go())
