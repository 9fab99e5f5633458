"""An adversarial review of environments, played for real: what a policy controls (its calls, files, processes,
output, final message) and what a client of the service controls (its requests, its task folders), each turned
against a reward it did not earn, the infra_error mask, the checker, the session's agent or the host.

Each test is one attack; it passes when the attack is contained. test_env_hacks.py holds the hacks every task is
checked for (groupscore check env:); these are the ones found by attacking the implementation.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from groupscore.environments import Sessions, SourceError, Task, ToolCall, replay
from groupscore.environments.dockerfile import UnsupportedStep, parse_dockerfile
from groupscore.environments.harbor import load_harbor_task

# The hidden test pays for /app/answer holding 42, and then writes /app/out: a test that writes into the work dir
# after the reward (a build, a cache, a log) writes through whatever the agent left there.
WRITES_AFTER = """#!/bin/bash
cd /app
ok=0
[ "$(cat answer 2>/dev/null)" = "42" ] && ok=1
echo $ok > /logs/verifier/reward.txt
echo 1 > /app/out 2>/dev/null
"""


def task(test: str = WRITES_AFTER, **overrides) -> Task:
    raw = {
        "id": "redteam",
        "turns": [{"messages": [{"role": "user", "content": "Write 42 to the file answer."}]}],
        "tools": ["shell", "python", "write_file", "read_file"],
        "checkers": [{"kind": "tests", "files": {"test.sh": test}, "timeout_s": 10}],
    }
    raw.update(overrides)
    return Task.model_validate(raw)


def shell(command: str) -> ToolCall:
    return ToolCall(name="shell", arguments={"command": command})


def python(code: str) -> ToolCall:
    return ToolCall(name="python", arguments={"code": code})


def play(t: Task, *calls: ToolCall, final_message: str | None = None):
    seen: list[str] = []
    verdict = replay(t, [list(calls)], final_message, observe=lambda _t, _c, obs: seen.append(obs.content))
    return verdict, seen


# -- the class tools' state, from the model's own processes --------------------------------------------------------

VAULT = """class Vault:
    def __init__(self):
        self.balance = 0

    def deposit(self, amount: int):
        if amount > 10:
            raise ValueError("at most 10 at a time")
        self.balance += amount
        return self.balance
"""

# Injected into the class host's request pipe: a "load" of a class named Vault whose instance has the reference's
# state (replacing the real one), and whose reply is swallowed so the agent stays in step.
FORGED_LOAD = (
    "import __main__\nreal = __main__.rep\n"
    "class Once:\n    def write(self, s): __main__.rep = real\n    def flush(self): pass\n"
    "__main__.rep = Once()\n"
    "class Vault:\n    def __init__(self):\n        self.balance = 5\n"
)
INJECT = """import os
msg = {msg!r}
for pid in [p for p in os.listdir('/proc') if p.isdigit()]:
    try:
        argv = open(f'/proc/{{pid}}/cmdline', 'rb').read().split(b'\\0')
        if b'classes' in argv or pid == '1':
            for fd in os.listdir(f'/proc/{{pid}}/fd'):
                with open(f'/proc/{{pid}}/fd/{{fd}}', 'w') as fh:
                    fh.write(msg + '\\n')
                print('injected', pid, fd)
    except OSError as exc:
        print('denied', pid, type(exc).__name__)
"""


def test_the_class_hosts_pipes_are_out_of_reach_of_the_models_code():
    """The shell and python tools run as the same uid as the class host and the agent: through /proc/PID/fd they
    could write a request into the class host's pipe and replace the instance with one in the reference's state
    (played: it paid 1.0). Both are non-dumpable, so their /proc/PID/fd opens for no one else in the jail."""
    t = task(
        classes=[{"class_name": "Vault", "source": VAULT}],
        checkers=[{"kind": "state", "reference": [[{"name": "deposit", "arguments": {"amount": 5}}]]}],
    )
    assert play(t, ToolCall(name="deposit", arguments={"amount": 5}))[0].reward == 1.0
    msg = json.dumps({"op": "load", "classes": [{"class_name": "Vault", "source": FORGED_LOAD}]})
    verdict, seen = play(t, python(INJECT.format(msg=msg)), shell("sleep 0.2"))
    assert "injected" not in seen[0] and "denied 1 PermissionError" in seen[0]
    assert verdict.reward == 0.0 and verdict.status != "infra_error"


def test_a_stopped_class_host_still_gives_its_state():
    t = task(
        classes=[{"class_name": "Vault", "source": VAULT}],
        checkers=[{"kind": "state", "reference": [[{"name": "deposit", "arguments": {"amount": 5}}]]}],
        limits={"step_time_s": 2},
    )
    stop = "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline | grep -q ' classes' && kill -STOP ${p#/proc/}; done"
    verdict, _ = play(t, ToolCall(name="deposit", arguments={"amount": 5}), shell(stop))
    assert verdict.reward == 1.0  # read at once (continued first), never a 30 s wait for a stopped process


# -- the checker's directories, through links in the state ---------------------------------------------------------


@pytest.mark.parametrize(
    "links",
    [
        "ln -s //logs/verifier/reward.txt out",  # POSIX keeps a leading // in normpath
        "ln -s /proc/self/root/logs/verifier/reward.txt out",
        "mkdir d; ln -s / d/root; ln -s d/root/logs/verifier/reward.txt out",  # through another link
        "ln -s /tmp/up out; ln -s /logs/verifier/reward.txt /tmp/up",
        "ln -s //tests /app/t; ln -s /proc/self/cwd/../logs/verifier lv",
    ],
)
def test_links_that_resolve_into_the_checkers_dirs_are_not_restored(links):
    """A link's target text may name /logs without starting with it; the restore drops every link whose resolved
    target is in /logs or /tests (played: the first three paid 1.0 for a wrong answer)."""
    verdict, _ = play(task(), shell(f"{links}; echo 41 > answer"))
    assert verdict.reward == 0.0 and verdict.status != "infra_error"


def test_honest_links_in_the_state_are_kept():
    test = 'cd /app; [ "$(cat link)" = 42 ] && [ -L link ] && [ -x tools/py ] && echo 1 > /logs/verifier/reward.txt'
    verdict, _ = play(
        task(test=test), shell("echo 42 > answer; ln -s answer link; mkdir tools; ln -s /usr/bin/python3 tools/py")
    )
    assert verdict.reward == 1.0


# -- what the agent packs --------------------------------------------------------------------------------------------


def test_a_chmod_000_left_behind_neither_hides_the_state_nor_costs_the_answer():
    """The agent packs its state as the jail's one uid: a dir or file chmod 000 made the packing fail (0 for an
    honest answer). Now the owner's rights come back before the packing, as the restore gives them anyway."""
    verdict, _ = play(
        task(), shell("echo 42 > answer; mkdir locked; echo x > locked/f; chmod 000 locked; chmod 000 /tmp")
    )
    assert verdict.reward == 1.0
    verdict, _ = play(task(), shell("echo 42 > answer; chmod 000 answer /app"))
    assert verdict.reward == 1.0
    hidden = "cd /app; [ ! -e secret ] && echo 1 > /logs/verifier/reward.txt"  # 'delete secret'
    verdict, _ = play(task(test=hidden), shell("mkdir d; echo s > d/secret; mv d/secret .; chmod 000 secret ."))
    assert verdict.reward == 0.0


def test_odd_files_in_the_state_do_not_break_the_packing():
    weird = (
        "echo 42 > answer; touch \"$(printf 'a\\nb')\" \"$(printf '\\xff\\xfe')\" \"$(head -c 250 /dev/zero | tr '\\0' x)\";"
        " mkdir -p $(printf 'd/%.0s' $(seq 60)); mkfifo fifo; ln answer hard;"
        " python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.bind(\"/app/sock\")'"
    )
    verdict, _ = play(task(), shell(weird))
    assert verdict.reward == 1.0


def test_a_state_above_its_cap_scores_0_and_is_not_masked():
    verdict, _ = play(
        task(), shell("echo 42 > answer; truncate -s 60M a; truncate -s 60M /tmp/b; truncate -s 60M /tmp/c")
    )
    assert verdict.reward == 0.0 and verdict.status == "incorrect"
    assert "above" in verdict.details["checkers"]["tests"]["reason"]


def test_a_fork_bomb_is_contained_and_the_episode_scored():
    verdict, seen = play(task(), shell("echo 42 > answer; (b(){ b|b& }; b) > /dev/null 2>&1 &"), shell("echo after"))
    assert seen[1] == "after\n" or "fork" in seen[1] or "Resource" in seen[1]
    assert verdict.reward == 1.0


# -- the agent process and the observations ------------------------------------------------------------------------


def test_text_no_encoder_takes_never_reaches_an_observation():
    """A lone surrogate in a tool's error text (raise ValueError(chr(0xd800))) made an Observation no JSON encoder
    or tokenizer takes; NUL bytes and invalid UTF-8 come through as text."""
    sessions = Sessions()
    try:
        sid = sessions.reset(task()).session_id
        for call in (
            python("raise ValueError(chr(0xd800))"),
            python("import sys; sys.stdout.buffer.write(b'\\xff\\x00\\n'); chr(0xdc80)"),
            shell("printf 'a\\0b\\xff'"),
            shell("echo '\\ud800'"),
            ToolCall(name="shell", arguments={"command": "echo \ud800"}),
            ToolCall(name="write_file", arguments={"path": "\ud800", "content": "x"}),
        ):
            obs = sessions.step(sid, call)
            json.loads(obs.model_dump_json())
        assert sessions.step(sid, shell("echo alive")).content == "alive\n"
    finally:
        sessions.close_all()


def test_forged_replies_on_the_python_tools_own_pipe_stay_in_that_tool():
    sessions = Sessions()
    try:
        sid = sessions.reset(task()).session_id
        forged = python('import os; os.write(4, b\'{"ok": true}\\n{"ok": true}\\nnot json\\n\'); os.close(4)')
        sessions.step(sid, forged)
        assert sessions.step(sid, shell("echo 42 > answer; echo alive")).content == "alive\n"
        restarted = sessions.step(sid, python("1 + 1"))  # the interpreter died writing to its closed pipe
        assert restarted.content == "2\n" or "restarted" in restarted.content
        assert sessions.step(sid, python("1 + 1")).content == "2\n"
        assert sessions.score(sid).reward == 1.0
    finally:
        sessions.close_all()


def test_a_final_message_that_would_hang_the_verifier_is_scored_not_masked():
    t = task(checkers=[{"kind": "final_message", "item": {"verifier": "math", "answer": "1"}}])
    for message in ("\\boxed{9^{9^{9^{9^{9}}}}}", "\\boxed{" + "(" * 5000 + "1" + ")" * 5000 + "}", "\x00\ud800"):
        verdict, _ = play(t, final_message=message)
        assert verdict.status != "infra_error" and verdict.reward == 0.0


def test_a_class_tasks_setup_and_private_methods_are_not_tools():
    kv = (
        "class KV:\n    def __init__(self):\n        self.items = {}\n"
        "    def load(self, items):\n        self.items = dict(items)\n"
        "    def _wipe(self):\n        self.items = {'draft': 'v1'}\n"
        "    def get(self, key: str):\n        return self.items[key]\n"
    )
    t = task(
        tools=[],
        classes=[{"class_name": "KV", "source": kv, "setup": "load", "setup_args": {"items": {"a": "1"}}}],
        checkers=[{"kind": "state", "reference": []}],
    )
    calls = [
        ToolCall(name=name, arguments=args)
        for name, args in (("_wipe", {}), ("load", {"items": {}}), ("__init__", {}), ("get", {"key": "a", "x": 1}))
    ]
    verdict, seen = play(t, *calls)
    assert all("unknown tool" in s for s in seen[:3]) and seen[3] == "get: unknown argument 'x' (takes key)"
    assert verdict.reward == 1.0  # the state is the setup's, untouched


# -- Harbor task directories (a task author is semi-trusted; the loader runs on the host) ------------------------


def harbor_dir(root: Path, dockerfile: str) -> Path:
    d = root / "t"
    (d / "environment").mkdir(parents=True)
    (d / "tests").mkdir()
    (d / "environment" / "Dockerfile").write_text(dockerfile)
    (d / "instruction.md").write_text("Do it.")
    (d / "tests" / "test.sh").write_text("echo 0 > /logs/verifier/reward.txt\n")
    (d / "task.toml").write_text('version = "1.0"\n')
    return d


def test_a_copied_directory_cannot_carry_a_host_file_in_through_a_link(tmp_path):
    secret = tmp_path / "host-secret"
    secret.write_text("the host's\n")
    context = tmp_path / "ctx"
    (context / "data").mkdir(parents=True)
    (context / "data" / "leak").symlink_to(secret)
    with pytest.raises(UnsupportedStep, match="data/leak, which leads outside the build context"):
        parse_dockerfile("FROM ubuntu:24.04\nCOPY data /app/data\n", context, "t")


@pytest.mark.parametrize("where", ["tests/leak", "instruction.md"])
def test_a_tasks_own_files_cannot_be_links_to_the_hosts(tmp_path, where):
    secret = tmp_path / "host-secret"
    secret.write_text("the host's\n")
    d = harbor_dir(tmp_path, "FROM ubuntu:24.04\nWORKDIR /app\n")
    (d / where).unlink(missing_ok=True)
    (d / where).symlink_to(secret)
    with pytest.raises(SourceError, match="leads outside the task's directory"):
        load_harbor_task(d, build=False)


def test_a_dockerfile_run_that_reaches_for_the_network_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    run = "RUN python3 -c \"import socket; socket.create_connection(('1.1.1.1', 53), timeout=2)\" && touch /app/net\n"
    d = harbor_dir(tmp_path, "FROM ubuntu:24.04\nWORKDIR /app\n" + run)
    with pytest.raises(SourceError, match="did not build"):
        load_harbor_task(d)


# -- the service, as a malicious client ----------------------------------------------------------------------------


def test_the_service_refuses_task_paths_outside_its_folders_and_odd_bodies(tmp_path):
    from fastapi.testclient import TestClient

    from groupscore.service.app import create_app
    from groupscore.service.settings import Settings

    allowed = tmp_path / "tasks"
    allowed.mkdir()
    (allowed / "t.jsonl").write_text(json.dumps(task(tools=["python"]).model_dump(mode="json")) + "\n")
    outside = tmp_path / "outside.jsonl"
    outside.write_text((allowed / "t.jsonl").read_text())
    (allowed / "link.jsonl").symlink_to(outside)
    app = create_app(Settings(workers=1, token="t", max_sessions=2, task_dirs=str(allowed)))
    json_body = {"content-type": "application/json"}
    with TestClient(app, headers={"authorization": "Bearer t"}, raise_server_exceptions=False) as http:
        for address in (
            f"{outside}:redteam",
            f"{allowed}/../outside.jsonl:redteam",
            f"{allowed}/link.jsonl:redteam",
            "bfcl/../../../etc:passwd",
            "harbor:../../../../etc",
            "/etc/passwd:root",
        ):
            answer = http.post("/v1/sessions", json={"task": address, "count": 1})
            assert answer.status_code == 422, (address, answer.text)
        for count in (0, 10_000, 3):
            assert http.post("/v1/sessions", json={"task": "demo:count-errors", "count": count}).status_code in (
                422,
                503,
            )
        opened = http.post("/v1/sessions", json={"task": f"{allowed}/t.jsonl:redteam", "count": 1})
        sid = opened.json()["sessions"][0]["session_id"]
        deep = '{"call": {"name": "python", "arguments": {"code": "1", "x": ' + "[" * 5000 + "]" * 5000 + "}}}"
        assert http.post(f"/v1/sessions/{sid}/step", content=deep, headers=json_body).status_code in (400, 422)
        call = json.dumps({"call": {"name": "python", "arguments": {"code": "raise ValueError(chr(0xd800))"}}})
        answer = http.post(f"/v1/sessions/{sid}/step", content=call, headers=json_body)
        assert answer.status_code == 200 and answer.json()["is_error"]
        other = "0" * 32
        assert http.post(f"/v1/sessions/{other}/step", json={"call": {"name": "python"}}).status_code == 404
        assert (
            http.post(
                f"/v1/sessions/{sid}/score", content='{"final_message": "\\ud800"}', headers=json_body
            ).status_code
            == 200
        )
        assert http.delete(f"/v1/sessions/{sid}").json() == {"closed": True}
        assert app.state.session_host.sessions.jails_alive() == 0


def _my_nsjails() -> set[str]:
    mine = set()
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and argv0.endswith(b"nsjail"):
            mine.add(pid)
    return mine


@pytest.fixture(scope="module", autouse=True)
def jails_before() -> set[str]:
    """Jails this process held before the attacks (a warm Python template an earlier module started): not theirs."""
    return _my_nsjails()


def test_no_jail_of_this_process_is_left_after_the_attacks(jails_before):
    """Every session above was closed: no nsjail the attacks started is left as a child of this process."""
    assert _my_nsjails() - jails_before == set()
