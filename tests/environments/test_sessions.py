"""Sessions end to end: each built-in tool in a real jail, class tools, the limits, the reaper, and whose fault an
ending is (infra_error only for the server's failures)."""

from __future__ import annotations

import os
import time

import pytest

from groupscore.environments import Sessions, Task, ToolCall, load_task, replay
from groupscore.environments import session as session_module
from groupscore.sandbox.session_launcher import SessionLost


def shell(command: str) -> ToolCall:
    return ToolCall(name="shell", arguments={"command": command})


def task(**overrides) -> Task:
    raw = {
        "id": "t",
        "turns": [{"messages": [{"role": "user", "content": "do it"}]}],
        "tools": ["shell", "python", "read_file", "write_file", "list_files"],
        "checkers": [
            {"kind": "tests", "files": {"test.sh": "test -f /app/done && echo 1 > /logs/verifier/reward.txt"}}
        ],
    }
    raw.update(overrides)
    return Task.model_validate(raw)


@pytest.fixture
def sessions():
    s = Sessions()
    yield s
    s.close_all()
    assert s.open_count() == 0


def test_shell_keeps_directory_files_and_processes_between_steps(sessions):
    sid = sessions.reset(task()).session_id
    assert sessions.step(sid, shell("mkdir -p sub && cd sub && echo hi > f")).content == ""
    assert sessions.step(sid, shell("pwd; cat f")).content == "/app/sub\nhi\n"
    sessions.step(sid, shell("sleep 300 & echo $! > /tmp/pid"))
    alive = sessions.step(sid, shell("kill -0 $(cat /tmp/pid) && echo alive"))
    assert alive.content == "alive\n"
    failed = sessions.step(sid, shell("exit 3"))
    assert failed.is_error and failed.content.endswith("[exit code 3]")


def test_shell_output_is_capped_and_a_step_is_timed(sessions):
    t = task(limits={"max_output_bytes": 1000, "step_time_s": 1.0})
    sid = sessions.reset(t).session_id
    big = sessions.step(sid, shell("head -c 100000 /dev/zero | tr '\\0' x"))
    assert big.content.startswith("x" * 1000) and "[output cut: 99000 more bytes]" in big.content
    start = time.monotonic()
    slow = sessions.step(sid, shell("sleep 30"))
    assert slow.is_error and "timed out after 1 s" in slow.content
    assert time.monotonic() - start < 5
    assert sessions.step(sid, shell("echo still here")).content == "still here\n"


def test_python_is_one_interpreter_for_the_session_and_a_hung_one_is_restarted(sessions):
    t = task(limits={"step_time_s": 1.0})
    sid = sessions.reset(t).session_id
    py = lambda code: sessions.step(sid, ToolCall(name="python", arguments={"code": code}))  # noqa: E731
    assert py("x = 20\nx + 1").content == "21\n"
    assert py("print(x * 2)").content == "40\n"
    assert py("import os; os.getcwd()").content == "'/app'\n"
    err = py("1/0")
    assert err.is_error and "ZeroDivisionError" in err.content
    hung = py("while True: pass")
    assert hung.is_error and "restarted" in hung.content
    assert "NameError" in py("x").content


def test_file_tools_and_bad_calls(sessions):
    sid = sessions.reset(task()).session_id
    wrote = sessions.step(sid, ToolCall(name="write_file", arguments={"path": "a/b.txt", "content": "héllo"}))
    assert not wrote.is_error
    assert sessions.step(sid, ToolCall(name="read_file", arguments={"path": "/app/a/b.txt"})).content == "héllo"
    assert "dir\t" in sessions.step(sid, ToolCall(name="list_files", arguments={})).content
    missing = sessions.step(sid, ToolCall(name="read_file", arguments={"path": "nope"}))
    assert missing.is_error and "FileNotFoundError" in missing.content
    unknown = sessions.step(sid, ToolCall(name="browser", arguments={}))
    assert unknown.is_error and "unknown tool 'browser'" in unknown.content
    bad = sessions.step(sid, ToolCall(name="shell", arguments={"cmd": "ls"}))
    assert bad.is_error and "missing argument 'command'" in bad.content


def test_sqlite_tool_and_sql_checker():
    t = load_task("demo:top-customer")
    right = "INSERT INTO answer SELECT customer FROM orders GROUP BY customer ORDER BY sum(amount) DESC LIMIT 1"
    assert replay(t, [[ToolCall(name="sqlite", arguments={"query": right})]]).reward == 1.0
    wrong = "INSERT INTO answer SELECT customer FROM orders ORDER BY amount DESC LIMIT 1"  # the largest single order
    assert replay(t, [[ToolCall(name="sqlite", arguments={"query": wrong})]]).reward == 0.0
    seen = []
    replay(
        t,
        [[ToolCall(name="sqlite", arguments={"query": "SELECT count(*) FROM orders"})]],
        observe=lambda *a: seen.append(a[2]),
    )
    assert seen[0].content == "count(*)\n5"


def test_class_tools_run_in_the_jail_and_are_scored_by_state():
    t = load_task("demo:kv-rename")
    calls = [
        ToolCall(name="get", arguments={"key": "draft"}),
        ToolCall(name="put", arguments={"key": "final", "value": "v1"}),
        ToolCall(name="delete", arguments={"key": "draft"}),
    ]
    assert replay(t, [calls]).reward == 1.0
    left = replay(t, [calls[1:2]])
    assert left.reward == 0.0  # 'draft' left behind, and the verdict says where, expected against got
    assert left.details["checkers"]["state"]["differs"] == [
        "KeyValueStore.items: expected {'other': 'x', 'final': 'v1'}, got {'draft': 'v1', 'other': 'x', 'final': 'v1'}"
    ]
    seen = []
    probe = [ToolCall(name="get", arguments={"key": "__import__('os').getpid()"})]
    replay(t, [probe], observe=lambda *a: seen.append(a[2]))
    assert seen[0].is_error and "KeyError" in seen[0].content


def test_class_tools_live_in_a_process_of_the_jail(sessions):
    source = "import os\nclass Probe:\n    def where(self):\n        return [os.getpid(), os.getuid(), os.path.exists('/work/main')]\n"
    t = task(
        tools=[],
        classes=[{"class_name": "Probe", "source": source}],
        checkers=[{"kind": "final_message", "item": {"verifier": "math", "answer": "1"}}],
    )
    opening = sessions.reset(t)
    assert [s["function"]["name"] for s in opening.tools] == ["where"]
    pid, uid, sees_host = __import__("json").loads(sessions.step(opening.session_id, ToolCall(name="where")).content)
    assert pid < 100 and uid != os.getuid() and not sees_host


BANK = """class Bank:
    def __init__(self):
        self.total = 0

    def deposit(self, amount: int) -> int:
        self.total += amount
        return self.total

    def note(self, *, text: str, tag: str = "") -> str:
        return tag + text

    def anything(self, **kwargs) -> int:
        return len(kwargs)
"""


def test_a_class_tools_arguments_are_checked_against_its_signature_before_it_runs(sessions):
    """A wrong type is an error the model reads, named, and the class never ran (no TypeError from inside it)."""
    t = task(
        tools=[],
        classes=[{"class_name": "Bank", "source": BANK}],
        checkers=[{"kind": "final_message", "item": {"verifier": "math", "answer": "1"}}],
    )
    sid = sessions.reset(t).session_id

    def call(name, **arguments):
        return sessions.step(sid, ToolCall(name=name, arguments=arguments))

    refused = call("deposit", amount="450")
    assert refused.is_error and refused.content == "deposit: argument 'amount' must be integer, not string ('450')"
    assert call("deposit", amount=True).content == "deposit: argument 'amount' must be integer, not boolean (True)"
    assert call("deposit").content == "deposit: missing argument 'amount'"
    assert call("deposit", amount=1, cents=5).content == "deposit: unknown argument 'cents' (takes amount)"
    assert call("deposit", amount=450).content == "450"  # the refused calls never reached the class
    assert call("note", text="hi", tag="#").content == "#hi"  # keyword-only arguments are the schema's too
    assert call("note", tag="#").content == "note: missing argument 'text'"
    assert call("anything", a=1, b=[2]).content == "2"  # **kwargs: any argument


def test_the_schema_read_from_a_signature_takes_every_call_the_method_takes():
    """Read with `ast`: self and cls dropped, keyword-only and None-defaulted arguments, positional-only ones left out
    (the agent calls with keywords); 3.0 is an integer to JSON; a task's own malformed schema refuses nothing."""
    from groupscore.environments.tools import check_schema_call, schemas_from_source

    source = (
        "class C:\n"
        "    @classmethod\n    def make(cls, n: int): ...\n"
        "    @staticmethod\n    def pure(x: float): ...\n"
        "    def opt(self, limit: int = None, *, flag: bool = False): ...\n"
        "    def pos(self, a: str, /, b: str): ...\n"
    )
    schemas = {s["function"]["name"]: s for s in schemas_from_source(source, "C")}
    params = {name: s["function"]["parameters"] for name, s in schemas.items()}
    assert params["make"] == {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    assert params["pure"]["required"] == ["x"] and params["opt"]["required"] == []
    assert params["opt"]["properties"]["limit"] == {"type": ["integer", "null"]}
    assert list(params["pos"]["properties"]) == ["b"]
    assert check_schema_call("make", {"n": 3.0}, schemas["make"]) is None
    assert (
        check_schema_call("make", {"n": 3.5}, schemas["make"]) == "make: argument 'n' must be integer, not number (3.5)"
    )
    assert check_schema_call("opt", {"limit": None, "flag": True}, schemas["opt"]) is None
    assert check_schema_call("pure", {"x": 2}, schemas["pure"]) is None
    for broken in ({"parameters": "oops"}, {"parameters": {"properties": [], "required": []}}, {"function": 3}):
        assert check_schema_call("f", {"a": 1}, broken) is None


def test_sessions_share_nothing(sessions):
    a = sessions.reset(task()).session_id
    b = sessions.reset(task()).session_id
    sessions.step(a, shell("echo secret > /app/mine; echo t > /tmp/mine; sleep 300 &"))
    seen = sessions.step(b, shell("ls /app /tmp; ps -e -o comm= | sort | tr '\\n' ' '")).content
    assert "mine" not in seen and "sleep" not in seen


def test_step_budget_and_episode_end(sessions):
    sid = sessions.reset(task(limits={"max_steps": 2})).session_id
    assert not sessions.step(sid, shell("true")).done
    assert sessions.step(sid, shell("touch done")).done
    over = sessions.step(sid, shell("true"))
    assert over.done and over.is_error and "step budget (2)" in over.content
    assert sessions.score(sid).reward == 1.0  # scored on the state it left


def test_a_session_that_cannot_start_is_infra_error(monkeypatch, sessions):
    def broken(_task):
        raise SessionLost("nsjail did not start: test", started=False)

    monkeypatch.setattr(session_module, "open_session_jail", broken)
    opening = sessions.reset(task())
    obs = sessions.step(opening.session_id, shell("true"))
    assert obs.done and obs.is_error and "unavailable" in obs.content
    verdict = sessions.score(opening.session_id)
    assert verdict.status == "infra_error" and verdict.reward == 0.0


def test_resets_at_once_never_pass_the_cap():
    """A place is taken before the jail starts (~25 ms): resets on several threads used to all pass the check."""
    from concurrent.futures import ThreadPoolExecutor

    from groupscore.environments.sessions import SessionLimit

    capped = Sessions(max_sessions=3)
    task = load_task("demo:count-errors")

    def reset():
        try:
            return capped.reset(task).session_id
        except SessionLimit:
            return None

    try:
        with ThreadPoolExecutor(8) as pool:
            opened = [sid for sid in pool.map(lambda _: reset(), range(8)) if sid]
        assert len(opened) == capped.open_count() == 3
    finally:
        capped.close_all()


def test_reaped_sessions_are_infra_error_and_closed(sessions):
    sid = sessions.reset(task(limits={"idle_s": 0.5})).session_id
    jail = sessions._get(sid).jail
    assert sessions.reap(now=time.monotonic() + 1) == 1
    assert jail is not None and not jail.alive()
    assert sessions.score(sid).status == "infra_error"
    assert sessions.open_count() == 0


def test_a_client_that_went_away_loses_its_sessions(sessions):
    mine = [sessions.reset(task(), client="c1").session_id for _ in range(2)]
    other = sessions.reset(task(), client="c2").session_id
    assert sessions.close_client("c1") == 2
    assert sessions.open_count() == 1 and other in sessions._open and not set(mine) & set(sessions._open)


def test_killing_its_own_session_is_not_masked():
    """A policy that ends its own jail gets 0, never the infra_error mask."""
    t = task()
    verdict = replay(t, [[shell("touch done; kill -9 -1; kill -9 1; echo survived")]])
    assert verdict.status != "infra_error"
    eaten = replay(t, [[shell("touch done; python3 -c 'b = bytearray(2 << 30)'")]])
    assert eaten.status != "infra_error"


def test_the_same_trajectory_scores_the_same():
    t = load_task("demo:count-errors")
    calls = [[shell("grep -c ' ERROR ' app.log > errors.txt")]]
    verdicts = {replay(t, calls).model_dump_json(exclude={"details"}) for _ in range(3)}
    assert len(verdicts) == 1


def test_a_final_message_checker_takes_a_composite_reward():
    reward = {
        "components": [
            {"name": "answer", "verifier": "math", "weight": 3},
            {"name": "form", "verifier": "format", "weight": 1, "params": {"regex": "Answer: .*"}},
        ]
    }
    t = task(checkers=[{"kind": "final_message", "item": {"verifier": "math", "answer": "6"}, "reward": reward}])
    good = replay(t, [[]], final_message="Answer: \\boxed{6}")
    assert good.reward == 1.0
    half = replay(t, [[]], final_message="\\boxed{6}")
    assert half.reward == 0.75 and half.details["checkers"]["final_message"]["components"] == {
        "answer": 1.0,
        "form": 0.0,
    }


def test_a_host_with_descriptors_past_fd_setsize_still_steps_its_sessions(sessions):
    """A service holding hundreds of sessions has descriptors numbered past 1024, where select() raises; the
    session's reply is read with poll, so its step still answers."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2048:
        pytest.fail(f"the test needs RLIMIT_NOFILE >= 2048 (hard limit {hard})")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 2048), hard))
    spare = []
    try:
        while True:  # the jail's pipes must land past 1024: take every lower number first
            fd = os.open(os.devnull, os.O_RDONLY)
            spare.append(fd)
            if fd >= 1100:
                break
        sid = sessions.reset(task()).session_id
        assert sessions.step(sid, shell("echo past")).content == "past\n"
        assert sessions.score(sid).reward == 0.0
    finally:
        for fd in spare:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
