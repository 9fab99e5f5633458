"""The environment session endpoints: open a group of sessions of one task, step them, score them, close them.

    POST   /v1/sessions                  OpenSessions -> {"sessions": [Opening, ...]}   (a GRPO group: `count` at once)
    POST   /v1/sessions/{id}/step        StepRequest  -> Observation (a tool call) or Turn (the model's own message)
    POST   /v1/sessions/{id}/score       ScoreSessionRequest -> Verdict (the same on every call; infra_error: lost)
    DELETE /v1/sessions/{id}             -> {"closed": bool}
    DELETE /v1/sessions?client=ID        -> {"closed": n}   (a trainer that goes away closes what it held)
    GET    /v1/tasks?source=SOURCE       -> TaskList (a source's tasks as they show before they run)

One `SessionHost` per app holds the process's `Sessions` (environments/sessions.py) and a thread pool of its own: a
step blocks on its jail for up to the task's step limit, so steps run there, off the event loop and off the default
pool that the scoring endpoints use, and one session's slow step holds no other. The auth, body limit and request
metrics are the Gatekeeper's, as for every endpoint; the host adds the sessions' own metrics to the app's registry.

Nothing a request names reaches a path or a jail unchecked: its fields are bounded by their wire schema
(schema/sessions.py: no control character or lone surrogate in a name, lengths, the nesting of a call's arguments),
a task path must lie inside GROUPSCORE_TASK_DIRS and be a file or folder the service can read as tasks, and a
session id that no session could have is answered as an unknown one (404). A malformed request is a 4xx, never a 5xx.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Annotated, Any, TypeVar

import yaml
from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from prometheus_client import Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from groupscore.environments import SessionLimit, Sessions, SourceError, Task, UnknownSession, load_task
from groupscore.environments.sessions import OutOfOrder, SessionBusy
from groupscore.environments.sources import BUNDLED, split_address
from groupscore.environments.task import BUILTIN_TOOLS
from groupscore.schema.sessions import (
    MAX_TASK_ADDRESS,
    ClientName,
    Observation,
    Opening,
    OpenSessions,
    ScoreSessionRequest,
    StepRequest,
    TaskList,
    Turn,
    text_problem,
)
from groupscore.schema.verdict import Verdict
from groupscore.service.metrics import ServiceMetrics
from groupscore.service.responses import json_response, validation_error_response
from groupscore.service.routing import OffloadingRoute

T = TypeVar("T")

# A full server says when to come back: sessions close within a trainer's step or so; a client waits this long.
RETRY_AFTER_S = 2
# Threads that run steps, opens and scores. A thread waits on a jail, not a core, so there are many; more than the
# sessions that can be open would only wait on the sessions' own locks.
MAX_THREADS = 256
# What a session id in a path may look like: the sessions' hex ids, and Ray's REPLICA.SESSION (ray_sessions.py). Any
# other is no session's: 404 at once, and the 404 names at most SHOWN_ID characters of it.
SESSION_ID = re.compile(r"[A-Za-z0-9_.-]{1,200}")
SHOWN_ID = 80

router = APIRouter(route_class=OffloadingRoute, tags=["sessions"])
_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"description": "No such session (never opened, or closed)"},
    409: {"description": "The session is answering another call (one call at a time); see Retry-After"},
}


class SessionHost:
    """The app's sessions, the threads their blocking calls run on, and their metrics."""

    def __init__(self, max_sessions: int, metrics: ServiceMetrics, task_dirs: str = "") -> None:
        self.sessions = Sessions(max_sessions=max_sessions)
        self.task_dirs = [Path(d.strip()).resolve() for d in task_dirs.split(",") if d.strip()]
        self.metrics = metrics
        self._threads = ThreadPoolExecutor(max_workers=min(MAX_THREADS, max_sessions), thread_name_prefix="session")
        self.step_latency = Histogram(
            "groupscore_session_step_seconds",
            "Time of one session step, by tool (class tools together as 'class'; 'message' ends a turn).",
            ["tool"],
            buckets=(0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0),
            registry=metrics.registry,
        )
        metrics.registry.register(_SessionCounts(self.sessions))

    def load_task(self, address: str) -> Task:
        """The task at `address`; a path only inside `task_dirs`, since a client names it and the server reads it.
        Whatever is wrong with the address or the file it names is a SourceError (the client's 422)."""
        source, _ = split_address(address)
        by_path = source not in BUNDLED and source.partition("/")[0] != "bfcl"
        if by_path:
            self._check_path(source)
        try:
            return load_task(address)
        except KeyError as exc:  # a BFCL id that names no task
            raise SourceError(str(exc.args[0] if exc.args else exc)) from None
        except SourceError:
            raise
        except (OSError, ValueError, yaml.YAMLError) as exc:
            if not by_path:  # the bundled sources and BFCL's are the server's own: their failure is no client's
                raise
            # a file the client named in the task folders that holds no tasks: binary, not YAML, unreadable
            reason = " ".join(str(exc).split())[:300]
            raise SourceError(f"{source}: cannot be read as a task source ({type(exc).__name__}: {reason})") from None

    def list_tasks(self, source: str) -> TaskList:
        """The tasks of `source` (bundled, BFCL's, or a path inside `task_dirs`) as they show before they run; the
        tasks of a file that cannot load are named in `problems`, the rest listed."""
        from groupscore.environments.catalog import list_source, summary

        by_path = source not in BUNDLED and source.partition("/")[0] != "bfcl"
        if by_path:
            self._check_path(source)
        try:
            tasks, problems = list_source(source)
        except KeyError as exc:
            raise SourceError(str(exc.args[0] if exc.args else exc)) from None
        except SourceError:
            raise
        except (OSError, ValueError, yaml.YAMLError) as exc:
            if not by_path:
                raise
            reason = " ".join(str(exc).split())[:300]
            raise SourceError(f"{source}: cannot be read as a task source ({type(exc).__name__}: {reason})") from None
        return TaskList(source=source, tasks=[summary(task) for task in tasks], problems=problems)

    def _check_path(self, source: str) -> None:
        """A path source must resolve (symlinks and '..' followed) inside one of `task_dirs`, to a file or a folder."""
        refused = SourceError(
            f"{source}: this service opens tasks of bfcl, harbor and demo, and by path only inside the folders of its "
            "GROUPSCORE_TASK_DIRS"
        )
        if not self.task_dirs:
            raise refused
        try:
            path = Path(source).resolve()
            inside = any(path.is_relative_to(folder) for folder in self.task_dirs)
            kind_ok = inside and (path.is_file() or path.is_dir())
        except (OSError, RuntimeError, ValueError) as exc:  # too long a name, a symlink loop (RuntimeError in 3.12)
            raise SourceError(f"{source}: not a usable path ({type(exc).__name__})") from None
        if not inside:
            raise refused
        if not kind_ok:
            raise SourceError(f"{source}: no task file or folder there (bfcl, harbor, demo, or a path to one)")

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._threads, fn, *args)

    async def close(self) -> None:
        """At shutdown: every session closed (its jail killed), then the threads let go."""
        await asyncio.to_thread(self.sessions.close_all)
        self._threads.shutdown(wait=False, cancel_futures=True)


class _SessionCounts(Collector):
    """Read from the `Sessions` at each scrape: the reaper thread counts what it reaps without the service's help."""

    def __init__(self, sessions: Sessions) -> None:
        self.sessions = sessions

    def collect(self) -> Iterator[Metric]:
        s = self.sessions
        yield GaugeMetricFamily("groupscore_sessions_open", "Environment sessions open now.", value=s.open_count())
        for name, what, value in (
            ("opened", "Environment sessions opened.", s.opened_total),
            ("closed", "Environment sessions closed (by their client, reaped, or at shutdown).", s.closed_total),
            ("reaped", "Environment sessions the server closed as idle or overdue (their verdict: infra_error).",
             s.reaped_total),
        ):  # fmt: skip
            yield CounterMetricFamily(f"groupscore_sessions_{name}", what, value=value)


def _host(request: Request) -> SessionHost:
    host: SessionHost = request.app.state.session_host
    return host


def _unknown(session_id: str) -> Response:
    shown = session_id if len(session_id) <= SHOWN_ID else session_id[:SHOWN_ID] + "..."
    return json_response({"detail": f"no session {shown!r}: it was never opened, or it is closed"}, 404)


def _garbage(session_id: str) -> bool:
    """No session's id could look like this: answered as unknown before anything looks it up."""
    return SESSION_ID.fullmatch(session_id) is None


@router.post(
    "/v1/sessions",
    response_model=dict[str, list[Opening]],
    responses={
        413: {"description": "Body too large"},
        422: {"description": "Invalid request, or no such task (`detail` names the field `task`)"},
        503: {"description": "No room for `count` more sessions now; see Retry-After"},
    },
)
async def open_sessions(body: OpenSessions, request: Request) -> Response:
    """Open `count` sessions of one task at once (a GRPO group), each in a jail of its own. A session that cannot
    start is still listed: its steps say so and its verdict is `infra_error` (masked, never 0)."""
    host = _host(request)
    try:
        task = await host.run(host.load_task, body.task)
    except SourceError as exc:
        return validation_error_response([{"loc": ("body", "task"), "msg": str(exc), "type": "value_error"}])
    try:  # a group opens whole or not at all (Sessions.open_group takes its places under one lock)
        openings = await host.run(host.sessions.open_group, task, body.count, body.seed, body.client)
    except SessionLimit as exc:
        return _full(host, str(exc))
    return json_response({"sessions": [o.model_dump(mode="json") for o in openings]})


def _busy(exc: SessionBusy) -> Response:
    """A second call on a session while one runs: refused at once (it would hold a thread every client shares)."""
    return json_response({"detail": str(exc)}, 409, {"Retry-After": "1"})


def _full(host: SessionHost, why: str) -> Response:
    host.metrics.rejected.labels("session_limit").inc()
    return json_response({"detail": f"no room for the sessions: {why}"}, 503, {"Retry-After": str(RETRY_AFTER_S)})


@router.post(
    "/v1/sessions/{session_id}/step",
    response_model=Observation | Turn,
    responses={
        **_NOT_FOUND,
        413: {"description": "Body too large"},
        422: {"description": "Invalid request (`detail` names the field): give exactly one of `call` or `message`"},
    },
)
async def step_session(session_id: str, body: StepRequest, request: Request) -> Response:
    """With `call`: run the tool call in the session's jail, answer its Observation. With `message`: the model ended
    its turn with that message; answer the next user Turn (`done` when none is left)."""
    if _garbage(session_id):
        return _unknown(session_id)
    if (body.call is None) == (body.message is None):
        return validation_error_response(
            [{"loc": ("body", "call"), "msg": "give exactly one of 'call' or 'message'", "type": "value_error"}]
        )
    host = _host(request)
    started = time.perf_counter()
    try:
        if body.call is not None:
            tool = body.call.name if body.call.name in BUILTIN_TOOLS else "class"
            answer: Observation | Turn = await host.run(host.sessions.step, session_id, body.call, body.seq)
        else:
            tool = "message"
            answer = await host.run(host.sessions.next_turn, session_id, body.message, body.seq)
    except UnknownSession:
        return _unknown(session_id)
    except SessionBusy as exc:
        return _busy(exc)
    except OutOfOrder as exc:
        return validation_error_response([{"loc": ("body", "seq"), "msg": str(exc), "type": "value_error"}])
    host.step_latency.labels(tool).observe(time.perf_counter() - started)
    return json_response(answer.model_dump(mode="json"))


@router.post(
    "/v1/sessions/{session_id}/score",
    response_model=Verdict,
    responses={**_NOT_FOUND, 413: {"description": "Body too large"}, 422: {"description": "Invalid request"}},
)
async def score_session(session_id: str, request: Request, body: ScoreSessionRequest | None = None) -> Response:
    """End the episode (if it has not ended) and score the state it left: the same verdict on every call, also after
    the session is closed. `infra_error` when the session could not start, died under the server or was reaped."""
    if _garbage(session_id):
        return _unknown(session_id)
    host = _host(request)
    try:
        verdict = await host.run(host.sessions.score, session_id, body.final_message if body else None)
    except UnknownSession:
        return _unknown(session_id)
    except SessionBusy as exc:
        return _busy(exc)
    return json_response(verdict.model_dump(mode="json"))


@router.delete(
    "/v1/sessions/{session_id}",
    response_model=dict[str, bool],
    responses={404: {"description": "Not a session id at all (one that no session could have)"}},
)
async def close_session(session_id: str, request: Request) -> Response:
    """Close a session: its jail and every process in it killed. `closed` is false when there was none open."""
    if _garbage(session_id):
        return _unknown(session_id)
    host = _host(request)
    return json_response({"closed": await host.run(host.sessions.close, session_id)})


@router.get(
    "/v1/tasks",
    response_model=TaskList,
    responses={422: {"description": "An unknown source, or a path outside the service's GROUPSCORE_TASK_DIRS"}},
)
async def list_tasks(
    request: Request,
    source: Annotated[
        str,
        Query(
            min_length=1,
            max_length=MAX_TASK_ADDRESS,
            description="demo, harbor, bfcl (or bfcl/CATEGORY), or a task file or folder inside GROUPSCORE_TASK_DIRS",
        ),
    ],
) -> Response:
    """A source's tasks as they show before they run: address, turns, tool names, checker kinds, what each asks."""
    host = _host(request)
    problem = text_problem(source, MAX_TASK_ADDRESS)
    if problem is not None:
        return validation_error_response([{"loc": ("query", "source"), "msg": problem, "type": "value_error"}])
    try:
        listed = await host.run(host.list_tasks, source)
    except SourceError as exc:
        return validation_error_response([{"loc": ("query", "source"), "msg": str(exc), "type": "value_error"}])
    return json_response(listed.model_dump(mode="json"))


@router.delete("/v1/sessions", response_model=dict[str, int], responses={422: {"description": "Invalid `client`"}})
async def close_client_sessions(
    request: Request, client: Annotated[ClientName, Query(description="close every session opened with this `client`")]
) -> Response:
    """Close every session of a client (a trainer that is done, or restarting); how many were open."""
    host = _host(request)
    return json_response({"closed": await host.run(host.sessions.close_client, client)})
