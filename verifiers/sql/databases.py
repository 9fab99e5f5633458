"""In-memory SQLite databases built from SQL scripts, locked down for read-only scoring.

Each script is executed once into a template database (kept in a small LRU cache); every query then gets its own
fresh copy through SQLite's backup API, so no query can see another's effects. Guards, all without signals:
- a progress handler aborts any statement past its deadline (setup included);
- SQLITE_LIMIT_ATTACHED = 0 blocks ATTACH and VACUUM [INTO], the only ways a script could touch files;
- size limits on strings, SQL text and expression depth; temporary storage in memory;
- query connections run with `PRAGMA query_only` and an authorizer that allows reads and nothing else.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# At import, not on the first fixture read: the service's worker template imports every scorer before it forks, so its
# workers never pay for pydantic-settings on their first SQL item.
from groupscore.verifiers import settings

# The databases this package ships (package data: beside this module in a checkout and in an installed wheel alike);
# the environment variable overrides the folder.
_BUNDLED = Path(__file__).resolve().with_name("data")
_FIXTURE_NAME = re.compile(r"^[a-z0-9_]{1,64}$")

MAX_TEXT_BYTES = 10_000_000  # longest string or blob a query may build
PROGRESS_EVERY = 1_000  # SQLite VM instructions between deadline checks
_CACHE_SIZE = 8
# Functions whose results change from run to run would make verdicts nondeterministic.
_DENIED_FUNCTIONS = frozenset({"random", "randomblob"})
_QUERY_ACTIONS = frozenset(
    {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
)
_SETUP_DENIED = frozenset({sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH, sqlite3.SQLITE_PRAGMA})


class SetupError(Exception):
    """The database script failed or ran past its budget: the item is at fault, not the completion."""


def fixtures_dir() -> Path:
    """The folder of database scripts: $GROUPSCORE_SQL_FIXTURES, else the bundled one."""

    return settings.current().sql_fixtures or _BUNDLED


def fixture_path(name: str) -> Path:
    """Path of the fixture script `name`.sql; ValueError for a name that is not a plain word or has no script."""
    if not _FIXTURE_NAME.match(name):
        raise ValueError(f"{name!r} is not a fixture name (1-64 of a-z, 0-9, _)")
    path = fixtures_dir() / f"{name}.sql"
    if not path.is_file():
        raise ValueError(f"no SQL fixture named {name!r} in {fixtures_dir()}")
    return path


def _limit(conn: sqlite3.Connection) -> None:
    conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_TEXT_BYTES)
    conn.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, 5_000_000)
    conn.setlimit(sqlite3.SQLITE_LIMIT_EXPR_DEPTH, 200)
    conn.execute("PRAGMA temp_store = MEMORY")


@contextmanager
def deadline(conn: sqlite3.Connection, seconds: float) -> Iterator[None]:
    """Statements on `conn` inside the block fail with OperationalError('interrupted') after `seconds`."""
    stop_at = time.monotonic() + seconds
    conn.set_progress_handler(lambda: time.monotonic() > stop_at, PROGRESS_EVERY)
    try:
        yield
    finally:
        conn.set_progress_handler(None, 0)


def _setup_authorizer(action: int, *_: object) -> int:
    return sqlite3.SQLITE_DENY if action in _SETUP_DENIED else sqlite3.SQLITE_OK


def _query_authorizer(action: int, arg1: object, arg2: object, *_: object) -> int:
    if action not in _QUERY_ACTIONS:
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_FUNCTION and str(arg2).lower() in _DENIED_FUNCTIONS:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def _build(script: str, seconds: float) -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
    _limit(conn)
    conn.set_authorizer(_setup_authorizer)
    try:
        with deadline(conn, seconds):
            conn.executescript(script)
    except sqlite3.Error as exc:
        conn.close()
        reason = "ran past its time limit" if "interrupt" in str(exc) else str(exc)
        raise SetupError(f"database script failed: {reason}") from None
    conn.set_authorizer(None)
    return conn


_templates: OrderedDict[str, sqlite3.Connection] = OrderedDict()
_templates_lock = threading.Lock()


@contextmanager
def read_only_copy(script: str, setup_seconds: float) -> Iterator[sqlite3.Connection]:
    """A fresh in-memory copy of the database `script` builds, open for reads only, closed on exit."""
    key = hashlib.sha256(script.encode("utf-8", "surrogatepass")).hexdigest()
    conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
    try:
        with _templates_lock:  # a template serves one backup at a time
            template = _templates.get(key)
            if template is None:
                template = _build(script, setup_seconds)
                _templates[key] = template
                while len(_templates) > _CACHE_SIZE:
                    _templates.popitem(last=False)[1].close()
            _templates.move_to_end(key)
            template.backup(conn)
        _limit(conn)
        conn.execute("PRAGMA query_only = ON")
        conn.set_authorizer(_query_authorizer)
        yield conn
    finally:
        conn.close()


def script_for(database: str | None, setup_sql: str | None) -> str:
    """The SQL script behind an item's `database` fixture name or its inline `setup_sql`."""
    if setup_sql is not None:
        return setup_sql
    assert database is not None
    return fixture_path(database).read_text(encoding="utf-8")
