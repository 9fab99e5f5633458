"""The wire between the host and a session's agent: one JSON object a line each way, a request keyed by `op`.

Both ends import this module: the host (environments/session.py, checkers.py, replay.py) to build requests and read
replies, the agent (main.py) to dispatch them. The types are TypedDicts that mypy checks on both ends; the jail's
Python never evaluates them (no `typing` import at a session's start), so only the constants below exist at run time.

Requests: `init` (the task's state into the jail), a tool step (`shell`, `python`, `call`, `read_file`, `write_file`,
`list_files`, `sqlite`), `state` (the class tools' public state), `finish` (kill everything, pack the state) and
`check` (in a checker's jail: restore a state, place the tests, run the command). Every reply has `ok`; `ok` false
means the request itself failed (a bad request, or the agent's own failure), never that a tool did.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Literal, NotRequired, TypedDict

    class Database(TypedDict):
        path: str  # relative to the work dir
        sql: str  # run at init

    class Init(TypedDict):
        op: Literal["init"]
        workdir: str
        env: dict[str, str]
        roots: list[str]  # the writable places, whose contents are the state
        files: NotRequired[dict[str, str]]  # relative to workdir, written after `tar`
        tar: NotRequired[str | None]  # base64 of a packed state
        database: NotRequired[Database | None]
        classes: NotRequired[list[dict[str, Any]]]  # ClassTools specs
        timeout: NotRequired[float]
        tool_cpu_s: NotRequired[int | None]

    class Step(TypedDict):
        timeout: float
        max_output: int  # of the whole observation (cap_reply)

    class Shell(Step):
        op: Literal["shell"]
        command: str

    class Python(Step):
        op: Literal["python"]
        code: str

    class Call(Step):
        op: Literal["call"]
        name: str
        arguments: dict[str, Any]

    class FileOp(Step):
        op: Literal["read_file", "write_file", "list_files"]
        path: NotRequired[str]
        content: NotRequired[str]

    class Sqlite(Step):
        op: Literal["sqlite"]
        query: str
        raw: NotRequired[bool]  # rows as data (a checker's), not as text
        views: NotRequired[list[str] | None]  # with raw: the views the query may read through (None: any)

    class State(TypedDict):
        op: Literal["state"]
        timeout: NotRequired[float]

    class Finish(TypedDict):
        op: Literal["finish"]
        roots: list[str]
        max_bytes: int

    class Check(TypedDict):
        op: Literal["check"]
        workdir: str
        env: dict[str, str]
        roots: list[str]
        tar: str | None  # the episode's packed state
        tests: str  # base64 of a tar of the checker's files, placed at /tests
        timeout: float
        tool_cpu_s: int | None
        max_output: int
        command: NotRequired[str]  # a tests checker's
        db_path: NotRequired[str]  # an sql checker's database (relative to workdir) ...
        query: NotRequired[str]  # ... and query
        views: NotRequired[list[str] | None]  # the views the query may read through (None: any)

    Request = Init | Shell | Python | Call | FileOp | Sqlite | State | Finish | Check

    class Reply(TypedDict, total=False):
        ok: bool
        error: str | None  # the tool's error (ok true), or why the request failed (ok false)
        output: str
        cut: bool  # an observed field was cut at the cap
        timed_out: bool
        lost: bool  # the python tool's interpreter or the class host was restarted (a step past its time)
        exit_code: int | None
        result: Any  # a class tool's return value, as JSON
        text: str | None  # the task encoder's text of a class tool's call (the checker's record)
        rows: list[list[Any]]
        columns: list[str]
        methods: list[str]  # init: the class tools' methods
        not_carried: list[str]  # init, finish, check: paths of the state no tar carried
        state: Any  # the class tools' public state
        tar: str | None  # finish: base64 of the packed state (None: above its cap, `error` says so)
        ready: bool  # the agent's first line
        reward_txt: str  # check: /logs/verifier/reward.txt as the test left it
        reward_json: str  # check: /logs/verifier/reward.json


# Where the host binds this package in every session's jail (read-only), and how the jail's Python starts the agent:
# -S no site, -B no bytecode written, -P no current directory (the work dir, the agent's) on the import path.
JAIL_DIR = "/.session"
PACKAGE = "gsagent"
BOOT = f"import sys; sys.path.insert(0, {JAIL_DIR!r}); from {PACKAGE}.main import main; main()"
PYTHON_FLAGS = ("-S", "-B", "-P")

TOOL_OPS = ("shell", "python", "call", "read_file", "write_file", "list_files", "sqlite")
