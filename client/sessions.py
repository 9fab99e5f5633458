"""A blocking client of the service's environment sessions (/v1/sessions): open a GRPO group, step, score, close.

    with SessionsClient("http://127.0.0.1:8000") as env:
        group = env.open_group("demo:count-errors", count=8)          # list[Opening]: messages, tools, session_id
        obs = env.step(group[0].session_id, "shell", {"command": "ls"}) # Observation: content, is_error, done
        turn = env.end_turn(group[0].session_id, "done")                # the next user Turn, or done
        verdict = env.score(group[0].session_id)                        # Verdict; infra_error is masked, never 0
    # leaving the block closes every session it opened

Sessions live on the server that opened them: with several URLs, each group goes to the next URL in turn and its
sessions' calls follow it there. A step is not idempotent (a shell command sent twice runs twice), so the steps and
turn ends of a session this object opened are numbered (`seq`): one resent after a lost connection or a 5xx gets the
first one's answer from the server, never a second run. Every call is retried when it never reached the server or
the server did nothing (429, 503 with its Retry-After: full; 409: busy); numbered steps, opening, scoring and closing
also on other 5xx and on lost connections (a group opened twice is closed on exit with the rest). A session's steps
go unnumbered (not resent) when it was not opened here or when a call of it failed with nothing known of its run.
Safe to share between threads; one call at a time per session.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

import httpx

from groupscore.client.http import RetryPolicy, ServiceError, _accept, _body, _Retryable
from groupscore.schema.sessions import Observation, Opening, Turn
from groupscore.schema.verdict import Verdict

DEFAULT_RETRY = RetryPolicy()
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout)  # the request never reached the server


class SessionsClient:
    """Environment sessions on one or more groupscore services. `client` names this holder to the server (a random
    one by default): its sessions can be closed together, here on exit or by the server when it reaps them."""

    def __init__(
        self,
        urls: str | Sequence[str] = "http://127.0.0.1:8000",
        token: str | None = None,
        client: str | None = None,
        timeout_s: float = 330.0,
        retry: RetryPolicy = DEFAULT_RETRY,
    ) -> None:
        self.urls = [u.rstrip("/") for u in ([urls] if isinstance(urls, str) else urls)]
        if not self.urls:
            raise ValueError("at least one service URL is needed")
        self.client = client or f"sessions-{uuid.uuid4().hex[:12]}"
        self.retry = retry
        headers = {"authorization": f"Bearer {token}"} if token else {}
        timeout = httpx.Timeout(timeout_s, connect=min(10.0, timeout_s))
        limits = httpx.Limits(max_connections=256, max_keepalive_connections=64)  # a group steps side by side
        self._http = [httpx.Client(base_url=u, headers=headers, timeout=timeout, limits=limits) for u in self.urls]
        self._lock = threading.Lock()
        self._next = 0
        self._where: dict[str, int] = {}  # session id -> the URL that holds it
        self._calls: dict[str, int] = {}  # session id -> the number of its last step or turn end, for `seq`
        self._holders: set[tuple[int, str]] = set()  # (URL, client name) this object opened sessions as

    def __enter__(self) -> SessionsClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close_all()

    # -- the episode ---------------------------------------------------------------------------------------------

    def open_group(self, task: str, count: int = 1, seed: int = 0, client: str | None = None) -> list[Opening]:
        """Open `count` sessions of `task` (SOURCE:TASK_ID) on one server, at once. A session that could not start
        is still in the list; its verdict will be infra_error."""
        holder = client or self.client
        with self._lock:
            index = self._next
            self._next = (self._next + 1) % len(self.urls)
        body = {"task": task, "seed": seed, "count": count, "client": holder}
        try:
            answer = self._call(index, "POST", "/v1/sessions", body, resend=True)  # opened twice: closed on exit
        except ServiceError as exc:
            if exc.status_code is None or exc.status_code >= 500:  # it may have opened sessions: close them on exit
                with self._lock:
                    self._holders.add((index, holder))
            raise
        openings = [Opening.model_validate(o) for o in answer["sessions"]]
        with self._lock:
            self._holders.add((index, holder))
            self._where.update((o.session_id, index) for o in openings)
            self._calls.update((o.session_id, 0) for o in openings)
        return openings

    def step(self, session_id: str, name: str, arguments: dict[str, Any] | None = None) -> Observation:
        """Run one tool call in the session; its observation."""
        body = {"call": {"name": name, "arguments": arguments or {}}}
        return Observation.model_validate(self._numbered(session_id, body))

    def end_turn(self, session_id: str, message: str | None = None) -> Turn:
        """The model ended its turn with `message`; the next user turn (`done` when there is none)."""
        return Turn.model_validate(self._numbered(session_id, {"message": message or ""}))

    def score(self, session_id: str, final_message: str | None = None) -> Verdict:
        """The session's verdict (the same on every call; the episode ends here if it has not)."""
        path = f"/v1/sessions/{session_id}/score"
        body = {"final_message": final_message}
        return Verdict.model_validate(self._call(self._index(session_id), "POST", path, body, resend=True))

    def close(self, session_id: str) -> bool:
        """Close one session (its jail killed); False if the server held none of that id."""
        index = self._index(session_id)
        answer = self._call(index, "DELETE", f"/v1/sessions/{session_id}", None, resend=True)
        with self._lock:
            self._where.pop(session_id, None)
            self._calls.pop(session_id, None)
        return bool(answer["closed"])

    def close_client(self, client: str | None = None) -> int:
        """Close every session of `client` (default: this object's) on every server; how many were open."""
        holder = client or self.client
        closed = sum(self._close_holder(index, holder) for index in range(len(self.urls)))
        with self._lock:
            self._holders -= {(index, holder) for index in range(len(self.urls))}
        return closed

    def close_all(self) -> None:
        """Close every session this object opened, then its connections (also on leaving a `with` block)."""
        with self._lock:
            holders, self._holders = self._holders, set()
            self._where.clear()
            self._calls.clear()
        try:
            for index, holder in sorted(holders):
                self._close_holder(index, holder)
        finally:
            for http in self._http:
                http.close()

    # -- plumbing ------------------------------------------------------------------------------------------------

    def _close_holder(self, index: int, holder: str) -> int:
        answer = self._call(index, "DELETE", "/v1/sessions", None, resend=True, params={"client": holder})
        return int(answer["closed"])

    def _numbered(self, session_id: str, body: dict[str, Any]) -> Any:
        """A step or turn end, numbered when this object knows the session's count (then it may be resent)."""
        path = f"/v1/sessions/{session_id}/step"
        index = self._index(session_id)
        with self._lock:
            last = self._calls.get(session_id)
        if last is None:
            return self._call(index, "POST", path, body, resend=False)
        try:
            answer = self._call(index, "POST", path, {**body, "seq": last + 1}, resend=True)
        except ServiceError:
            # It may have run (a 409: still running, after every resend), or the server's count is another (a 422 on
            # `seq`: another process stepped the session): from here on the session's calls go unnumbered.
            with self._lock:
                self._calls.pop(session_id, None)
            raise
        with self._lock:
            if session_id in self._calls:
                self._calls[session_id] = last + 1
        return answer

    def _index(self, session_id: str) -> int:
        with self._lock:
            # A session this object did not open (another process's, by id): the first server is asked.
            return self._where.get(session_id, 0)

    def _call(
        self,
        index: int,
        method: str,
        path: str,
        payload: Any,
        resend: bool,
        params: dict[str, str] | None = None,
    ) -> Any:
        """One request; the decoded JSON body, or ServiceError. Every call is retried when it never reached the
        server (no connection) or the server said it did nothing (429, 503: full; 409: the session busy); `resend`
        calls (those that may run twice) also on other 5xx and on connections lost mid-request."""
        failure: Exception | None = None
        for attempt in range(self.retry.max_retries + 1):
            response = None
            try:
                response = self._http[index].request(method, path, params=params, **_body(payload))
                return _accept(response)
            except _NOT_SENT as exc:
                failure = exc
            except httpx.TransportError as exc:
                if not resend:  # it may have run: running it again would be a second step
                    raise ServiceError(f"{method} {path}: the connection was lost mid-request: {exc}") from exc
                failure = exc
            except _Retryable as exc:
                if not resend and exc.error.status_code not in (429, 503):
                    raise exc.error from None
                failure = exc
            except ServiceError as exc:
                if exc.status_code != 409:
                    raise
                failure = _Retryable(exc)  # the session was busy: the server did nothing, so any call may go again
            if attempt < self.retry.max_retries:
                time.sleep(_delay(self.retry, attempt, response))
        last = failure.error if isinstance(failure, _Retryable) else None
        raise ServiceError(
            f"{method} {path} failed after {self.retry.max_retries + 1} attempts: {failure}",
            last.status_code if last else None,
            last.detail if last else None,
        )


def _delay(policy: RetryPolicy, attempt: int, response: httpx.Response | None) -> float:
    """The server's Retry-After when it gave one (a full server answers 503 with it), else the policy's backoff."""
    if response is not None and "retry-after" in response.headers:
        try:
            return min(policy.max_retry_after_s, max(0.0, float(response.headers["retry-after"])))
        except ValueError:
            pass
    return policy.delay(attempt, response)
