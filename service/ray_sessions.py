"""Environment sessions on Ray Serve: every call of a session reaches the replica that holds it, and a session whose
replica is gone is lost (its steps end, its verdict is infra_error), never scored 0.

A session lives in one replica's memory (its `Sessions`, its jail on that node), so its steps must reach that replica.
Serve's HTTP ingress does not route by session: in HAProxy mode (the default) HAProxy balances over the replicas and
ignores Serve's multiplexing header, and the session header of Ray's consistent-hash router moves sessions whenever
the replica set changes. So the replicas route among themselves:

- Ids name their replica: a replica answers an open with `REPLICA.SESSION` ids (REPLICA: its Serve replica id), and
  strips the prefix before its own `Sessions` see them. A client needs nothing but the id it was given.
- Each replica registers its own replica id as its one multiplexed "model" (`@serve.multiplexed`, loaded in its
  first health check, before Serve routes to it). A replica that gets a call for another's session forwards it through
  a Serve handle with that id as `multiplexed_model_id`, so Serve's router picks the holder. The id is registered long
  before any session is opened on it: no race between opening a session and the router learning where it is.
- Multiplexing is a preference, not a rule: when the holder is busy, or when no replica holds the id (its replica is
  gone), the router tries other replicas after about a second. A forwarded call that lands on the wrong replica is
  answered `None` (never forwarded again, never run); the forwarder then asks Ray whether the holder's actor is alive.
  Alive: it forwards again, until `FORWARD_DEADLINE_S`. Gone: the session is lost.
- A lost session: its steps answer an error observation with `done` (or a final turn), its score an infra_error
  verdict (`details.infra`: worker_died), closing it answers `closed: false`. The request still goes through the
  local app first (the same auth, validation and 404 for an id that was never a session).
- `DELETE /v1/sessions?client=ID` reaches every replica (Ray's named replica actors), so a client's sessions close
  wherever they were opened.

Serve's proxy actor (ingress `proxy`) routes by the `serve_multiplexed_model_id` header; it is not sent (the client
is the same for every service), so there too a call may take one forwarding hop: a Ray handle call, ~2-5 ms.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

import ray
from ray import serve
from ray.exceptions import RayActorError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from groupscore.schema.sessions import Observation, Turn
from groupscore.schema.verdict import Verdict

SEPARATOR = "."  # REPLICA.SESSION: neither Serve's replica ids nor the sessions' hex ids hold a dot
FORWARD_DEADLINE_S = 30.0  # how long a call waits for a live but busy holder before it is refused (503)
MISROUTE_PAUSE_S = 0.2
LOST = "the session is lost: the replica that held it is gone"
_SESSION = re.compile(r"^/v1/sessions/([^/]+)(/step|/score)?$")
_REPLICA_ACTORS = "serve"  # the namespace of Serve's replica actors

# A response as the forwarding replica gets it back: status, headers, body.
Answer = tuple[int, list[tuple[bytes, bytes]], bytes]


def qualify(replica: str, session_id: str) -> str:
    return f"{replica}{SEPARATOR}{session_id}"


def split(qualified: str) -> tuple[str | None, str]:
    """(replica, session id) of a qualified id; (None, id) for an id that names no replica."""
    replica, sep, session_id = qualified.partition(SEPARATOR)
    return (replica, session_id) if sep else (None, qualified)


class Peers:
    """This replica's place in its deployment: its id, a handle to the deployment, the other replicas."""

    def __init__(self) -> None:
        replica_id = serve.get_replica_context().replica_id
        self.me: str = replica_id.unique_id
        self.deployment: str = replica_id.deployment_id.name
        self.app_name: str = replica_id.deployment_id.app_name
        full = replica_id.to_full_id_str()  # Serve's actor name of this replica: "...#<unique id>"
        self._actor_prefix = full[: len(full) - len(self.me)]
        self._handle: Any = None

    def handle(self, replica: str) -> Any:
        """The deployment's `session_call`, routed to the replica whose multiplexed id is `replica`."""
        if self._handle is None:
            self._handle = serve.get_deployment_handle(self.deployment, app_name=self.app_name)
        return self._handle.options(multiplexed_model_id=replica).session_call

    async def alive(self, replica: str, ask: bool = True) -> bool:
        """Whether the replica's actor lives: Ray still knows its name and, with `ask`, it answers (a replica too busy
        to answer in 10 s counts as alive)."""
        return await asyncio.to_thread(self._alive, replica, ask)

    def _alive(self, replica: str, ask: bool) -> bool:
        actor: Any
        try:
            actor = ray.get_actor(self._actor_prefix + replica, namespace=_REPLICA_ACTORS)
        except ValueError:  # no actor of that name: dead (Serve never reuses a replica id)
            return False
        if ask:
            try:
                ray.get(actor.__ray_ready__.remote(), timeout=10)
            except RayActorError:
                return False
            except ray.exceptions.GetTimeoutError:
                return True
        return True

    async def others(self) -> list[str]:
        """The ids of the deployment's other replicas that Ray still lists."""
        names = await asyncio.to_thread(ray.util.list_named_actors, True)
        return [
            entry["name"][len(self._actor_prefix) :]
            for entry in names
            if entry.get("namespace") == _REPLICA_ACTORS
            and entry["name"].startswith(self._actor_prefix)
            and entry["name"] != self._actor_prefix + self.me
        ]


class SessionAffinity:
    """ASGI middleware of a replica's app: session calls run where their session is (module docstring)."""

    def __init__(self, app: ASGIApp, peers: Callable[[], Awaitable[Peers]]) -> None:
        self.app = app
        self.peers = peers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        root = scope.get("root_path", "")
        path = scope["path"][len(root) :] if root and scope["path"].startswith(root) else scope["path"]
        if path == "/v1/sessions":
            await self._open_or_close_client(scope, receive, send)
            return
        match = _SESSION.match(path)
        replica, _ = split(match.group(1)) if match else (None, "")
        if match is None or replica is None:
            await self.app(scope, receive, send)
            return
        peers = await self.peers()
        body = await _read_body(receive)
        if replica == peers.me:
            answer = await self._here(scope, body, peers.me)
        else:
            answer = await self._there(replica, scope, path, body, peers)
        await _send(send, answer)

    async def _open_or_close_client(self, scope: Scope, receive: Receive, send: Send) -> None:
        peers = await self.peers()
        body = await _read_body(receive)
        status, headers, content = await call_app(self.app, scope, body)
        if status == 200 and scope["method"] == "POST":
            opened = json.loads(content)
            for opening in opened["sessions"]:
                opening["session_id"] = qualify(peers.me, opening["session_id"])
            content = json.dumps(opened).encode()
        elif status == 200 and scope["method"] == "DELETE" and not scope.get("groupscore_forwarded"):
            closed = json.loads(content)["closed"]
            query = scope.get("query_string", b"")
            for other in await peers.others():
                try:
                    answer = await peers.handle(other).remote(
                        other, "DELETE", "/v1/sessions", query, scope["headers"], b""
                    )
                except RayActorError:
                    continue  # its sessions are gone with it
                if answer is not None and answer[0] == 200:
                    closed += json.loads(answer[2])["closed"]
            content = json.dumps({"closed": closed}).encode()
        await _send(send, (status, headers, content))

    async def _here(self, scope: Scope, body: bytes, me: str) -> Answer:
        """A call of one of this replica's sessions: run by the app under the id it knows; ids in answers qualified."""
        status, headers, content = await call_app(self.app, _unqualified(scope), body)
        if status == 200 and scope["path"].endswith("/score"):
            verdict = json.loads(content)
            details = verdict.get("details") or {}
            if "session_id" in details:
                details["session_id"] = qualify(me, details["session_id"])
                content = json.dumps(verdict).encode()
        return status, headers, content

    async def _there(self, replica: str, scope: Scope, path: str, body: bytes, peers: Peers) -> Answer:
        """Forward to the holder until it answers; the lost answer when its replica is gone."""
        deadline = time.monotonic() + FORWARD_DEADLINE_S
        query = scope.get("query_string", b"")
        while True:
            # Ray forgets a dead actor's name at once; Serve's router may take long to give up on a gone holder.
            if not await peers.alive(replica, ask=False):
                return await self._lost(scope, path, body)
            try:
                answer = await peers.handle(replica).remote(
                    replica, scope["method"], path, query, scope["headers"], body
                )
            except RayActorError:
                answer = None  # it died under the call
            if answer is not None:
                return answer
            if not await peers.alive(replica):
                return await self._lost(scope, path, body)
            if time.monotonic() > deadline:
                detail = {
                    "detail": f"the replica holding the session did not take the call in {FORWARD_DEADLINE_S:.0f} s"
                }
                return 503, [(b"retry-after", b"2")], json.dumps(detail).encode()
            await asyncio.sleep(MISROUTE_PAUSE_S)

    async def _lost(self, scope: Scope, path: str, body: bytes) -> Answer:
        """The local app answers first (auth, validation; it holds no such session: 404), then the lost answer."""
        status, headers, content = await call_app(self.app, _unqualified(scope), body)
        if status != 404:
            return status, headers, content
        match = _SESSION.match(path)
        session_id = match.group(1) if match else ""
        answer: dict[str, Any]
        if scope["method"] == "DELETE":
            answer = {"closed": False}
        elif scope["path"].endswith("/score"):
            verdict = Verdict.infra_error(None, LOST, "worker_died", session_id=session_id)
            answer = verdict.model_dump(mode="json")
        elif _is_message(body):
            answer = Turn(done=True).model_dump(mode="json")
        else:
            answer = Observation(content=LOST, is_error=True, done=True).model_dump(mode="json")
        return 200, [(b"content-type", b"application/json")], json.dumps(answer).encode()


def _is_message(body: bytes) -> bool:
    try:
        request = json.loads(body)
    except (ValueError, RecursionError):
        return False
    return isinstance(request, dict) and request.get("call") is None and request.get("message") is not None


def _unqualified(scope: Scope) -> Scope:
    """The scope with the session id's replica prefix taken off its path."""

    def strip(path: str) -> str:
        return re.sub(r"(/v1/sessions/)[^/.]+\.", r"\1", path, count=1)

    raw = scope.get("raw_path")
    return {
        **scope,
        "path": strip(scope["path"]),
        "raw_path": strip(raw.decode("latin-1")).encode("latin-1") if raw else None,
    }


async def _read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    return b"".join(chunks)


async def call_app(app: ASGIApp, scope: Scope, body: bytes) -> Answer:
    """Run one request through an ASGI app in this process; its whole answer."""
    sent = False
    status = 500
    headers: list[tuple[bytes, bytes]] = []
    chunks: list[bytes] = []

    async def receive() -> Message:
        nonlocal sent
        if sent:
            await asyncio.Event().wait()  # no disconnect: the caller waits for the whole answer
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: Message) -> None:
        nonlocal status, headers
        if message["type"] == "http.response.start":
            status = message["status"]
            headers = [(bytes(k), bytes(v)) for k, v in message.get("headers", [])]
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, receive, send)
    return status, headers, b"".join(chunks)


def forwarded_scope(method: str, path: str, query: bytes, headers: list[tuple[bytes, bytes]]) -> Scope:
    """The scope of a call another replica forwarded (its path relative to the application's route prefix)."""
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": query,
        "headers": [(bytes(k), bytes(v)) for k, v in headers],
        "client": ("127.0.0.1", 0),
        "server": ("127.0.0.1", 0),
        "groupscore_forwarded": True,
    }


async def _send(send: Send, answer: Answer) -> None:
    status, headers, content = answer
    kept = [(k, v) for k, v in headers if k.lower() != b"content-length"]
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [*kept, (b"content-length", str(len(content)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": content})
