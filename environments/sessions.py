"""The sessions a process holds: `reset` (open), `step`, `next_turn`, `score`, `close`, by session id.

One `Sessions` per process (the service's, or a trainer's own through the Python API). It caps the sessions open at
once, reaps the idle and the overdue (their verdict is infra_error, kept a while for a late `score`), closes all of a
client's sessions when the client goes away, and closes everything at exit. Sessions of different ids run in
parallel (one lock each); calls on one session are serialised.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

from groupscore.environments.replay import reference_record
from groupscore.environments.session import Session
from groupscore.environments.task import Task
from groupscore.schema.sessions import Observation, Opening, ToolCall, Turn
from groupscore.schema.verdict import Verdict

MAX_SESSIONS = 512
REAP_EVERY_S = 1.0
TOMBSTONES = 10_000  # verdicts of reaped or scored-and-closed sessions kept for a late score
START_THREADS = 16  # a group's jails started at once (each waits on nsjail and its agent, not on a core)


class SessionLimit(Exception):
    """No room for another session now (the cap on sessions open at once)."""


class UnknownSession(KeyError):
    """No session of that id (never opened, or closed)."""


class SessionBusy(Exception):
    """The session is answering another call: one call at a time per session (a trainer never needs two), so a
    second is refused at once rather than holding a thread while it waits."""


class OutOfOrder(ValueError):
    """A numbered call whose number is neither the session's last call (a resend) nor the next one."""


class Sessions:
    def __init__(self, max_sessions: int = MAX_SESSIONS):
        self.max_sessions = max_sessions
        self._open: dict[str, Session] = {}
        self._starting = 0  # resets between taking a place and holding their session
        self._gone: OrderedDict[str, Verdict] = OrderedDict()
        self._lock = threading.Lock()
        self._reaper: threading.Thread | None = None
        self._stop = threading.Event()
        self.opened_total = 0
        self.closed_total = 0
        self.reaped_total = 0
        atexit.register(self.close_all)

    # -- the episode -------------------------------------------------------------------------------------------------

    def reset(self, task: Task, seed: int = 0, client: str | None = None) -> Opening:
        """Open a session of `task`. One that cannot start still opens: its steps say so and its verdict is
        infra_error (a trainer's batch goes on; the sample is masked)."""
        return self.open_group(task, 1, seed, client)[0]

    def open_group(self, task: Task, count: int, seed: int = 0, client: str | None = None) -> list[Opening]:
        """Open `count` sessions of `task` (a GRPO group), whole or not at all: their places are taken under one lock
        before any jail starts (SessionLimit if there is no room for all), then the jails start side by side. A
        session that cannot start still opens, as in `reset`."""
        with self._lock:  # places are taken before the jails start: opens at once cannot pass the cap together
            held = len(self._open) + self._starting
            if held + count > self.max_sessions:
                raise SessionLimit(
                    f"{count} sessions asked for, room for {max(0, self.max_sessions - held)} now "
                    f"({held} open or starting, the most this server holds is {self.max_sessions})"
                )
            self.opened_total += count
            self._starting += count
        sessions: list[Session] = []
        failure: BaseException | None = None
        try:
            if count == 1:
                sessions.append(Session(task, seed, client).start())
            else:
                with ThreadPoolExecutor(min(count, START_THREADS), thread_name_prefix="session-start") as pool:
                    starts = [pool.submit(Session(task, seed, client).start) for _ in range(count)]
                    for future in starts:
                        try:
                            sessions.append(future.result())
                        except BaseException as exc:  # noqa: BLE001 every start is waited for, then the first raised
                            failure = failure or exc
        finally:
            with self._lock:  # the places pass to the sessions, or are given back, in one step
                self._starting -= count
                self._open.update((s.id, s) for s in sessions)
        try:
            if failure is not None:  # an error of ours (a jail that fails to start is a lost session, not an error)
                raise failure
            openings = [s.opening() for s in sessions]
        except BaseException:
            for session in sessions:  # none is left holding a place that no client knows of
                self.close(session.id)
            raise
        self._start_reaper()
        return openings

    def step(self, session_id: str, call: ToolCall, seq: int | None = None) -> Observation:
        """Run a tool call. `seq` numbers the call among the session's steps and turn ends (see `_once`)."""
        with self._held(session_id) as session:
            return _once(session, seq, call.model_dump(mode="json"), lambda: session.step(call), Observation)

    def next_turn(self, session_id: str, message: str | None = None, seq: int | None = None) -> Turn:
        """The model ended its turn with `message`: the next user turn. `seq` as in `step`."""
        with self._held(session_id) as session:
            return _once(session, seq, {"message": message}, lambda: session.next_turn(message), Turn)

    def score(self, session_id: str, final_message: str | None = None) -> Verdict:
        """The session's verdict (the same on every call): the episode ends here if it has not."""
        with self._lock:
            if session_id in self._gone:
                return self._gone[session_id]
        with self._held(session_id) as session:
            return session.conclude(final_message, reference_record)

    def close(self, session_id: str) -> bool:
        """Close a session (its jail killed); False if there was none."""
        with self._lock:
            session = self._open.pop(session_id, None)
            if session is None:
                return False
            self.closed_total += 1
        with session.lock:
            if session.verdict is not None:
                self._remember(session_id, session.verdict)
            session.close()
        return True

    def close_client(self, client: str) -> int:
        """Close every session of `client` (it went away); how many."""
        with self._lock:
            ids = [sid for sid, s in self._open.items() if s.client == client]
        return sum(self.close(sid) for sid in ids)

    def close_all(self) -> None:
        self._stop.set()
        with self._lock:
            ids = list(self._open)
        for sid in ids:
            self.close(sid)

    # -- state -------------------------------------------------------------------------------------------------------

    def open_count(self) -> int:
        with self._lock:
            return len(self._open)

    def jails_alive(self) -> int:
        with self._lock:
            return sum(1 for s in self._open.values() if s.jail is not None and s.jail.alive())

    def _get(self, session_id: str) -> Session:
        with self._lock:
            session = self._open.get(session_id)
        if session is None:
            raise UnknownSession(session_id)
        return session

    @contextmanager
    def _held(self, session_id: str) -> Iterator[Session]:
        """The open session of that id, its lock held: UnknownSession if there is none (or it was closed while this
        call came in: a close takes the lock first), SessionBusy if another call holds it."""
        session = self._get(session_id)
        if not session.lock.acquire(blocking=False):
            raise SessionBusy(f"session {session_id} is answering another call; send one call at a time")
        try:
            with self._lock:
                if self._open.get(session_id) is not session:
                    raise UnknownSession(session_id)
            yield session
        finally:
            session.lock.release()

    def _remember(self, session_id: str, verdict: Verdict) -> None:
        with self._lock:
            self._gone[session_id] = verdict
            while len(self._gone) > TOMBSTONES:
                self._gone.popitem(last=False)

    # -- reaping -----------------------------------------------------------------------------------------------------

    def _start_reaper(self) -> None:
        with self._lock:
            if self._reaper is None or not self._reaper.is_alive():
                self._reaper = threading.Thread(target=self._reap_loop, name="groupscore-session-reaper", daemon=True)
                self._reaper.start()

    def _reap_loop(self) -> None:
        while not self._stop.wait(REAP_EVERY_S):
            self.reap()

    def reap(self, now: float | None = None) -> int:
        """Close sessions idle past their task's idle_s or open past its episode time (with a minute's grace); their
        verdict is infra_error. How many were reaped."""
        now = time.monotonic() if now is None else now
        with self._lock:
            due = [
                (sid, s)
                for sid, s in self._open.items()
                if now - s.touched > s.task.limits.idle_s or now - s.opened > s.task.limits.episode_time_s + 60
            ]
        reaped = 0
        for sid, session in due:
            if not session.lock.acquire(blocking=False):
                continue  # in use right now: not idle
            try:
                if session.verdict is None:
                    reason = "the server reaped the session (idle or past its episode time)"
                    session.lose(reason)
                    self._remember(sid, Verdict.infra_error(session.task.id, reason, "sandbox", session_id=sid))
            finally:
                session.lock.release()
            if self.close(sid):
                reaped += 1
        self.reaped_total += reaped
        return reaped


def _once[A: (Observation, Turn)](
    session: Session, seq: int | None, request: object, run: Callable[[], A], kind: type[A]
) -> A:
    """Run a session's call at most once. A call numbered `seq` is the session's next (run, its answer kept) or its
    last sent again (a client that lost the connection mid-call resends it: the kept answer, nothing runs twice). A
    resend must be the same call (`request`: the tool call, or the message) and one whose first run answered; any
    other number is refused. An unnumbered call runs and is counted too, so numbering may start at any call."""
    digest = _digest(request)
    if seq is not None and seq == session.calls:
        kept = session.last_answer
        if session.last_request != digest or (kept is not None and not isinstance(kept, kind)):
            raise OutOfOrder(f"call number {seq} was another call; send {seq + 1} for a new call")
        if not isinstance(kept, kind):
            raise OutOfOrder(f"call number {seq} failed on the server while it ran: it is not run again")
        session.touched = time.monotonic()
        return kept
    if seq is not None and seq != session.calls + 1:
        raise OutOfOrder(
            f"call number {seq} does not follow the session's last call, number {session.calls}: send "
            f"{session.calls + 1} for a new call, or {session.calls} to have the last call's answer again"
        )
    # counted before it runs: a call that fails part way (the jail may have acted) is never run again by a resend
    session.calls += 1
    session.last_request, session.last_answer = digest, None
    answer = run()
    session.last_answer = answer
    return answer


def _digest(request: object) -> str:
    text = json.dumps(request, sort_keys=True, ensure_ascii=False, default=repr)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
