"""Reward integrity, fourth round: a checker is steered by nothing of the agent's but the contents of the state it is
asked to judge, and what the agent's processes produce is the agent's doing. Each family below was paid (or masked)
on the code before this round; each test plays the attack for real and the honest twin beside it.

- links in the state that resolve only while the checker runs (through /proc/<pid>, or to nothing until the test
  makes it);
- the class host importing from the agent's work dir;
- the checker's programs reading start-up files from the agent's HOME;
- a tool reply too large for the host, counted as the server losing the session;
- observation fields that came back uncut (the python tool's error, list_files, class tools' results and errors);
- the state reaching the checker in part: nested tests/ trees, mode bits, hard links, FIFOs, empty dirs, times.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from groupscore.environments import Task, ToolCall, load_task, replay
from groupscore.environments.harbor import load_harbor_task
from groupscore.sandbox import session_launcher
from groupscore.testing.env_checks import LATE_LINKS, late_links

# The hidden test copies its expected answer where a test often keeps its working files (/tmp), then compares the
# agent's answer file with the hidden one: an undone task may only get paid by reaching the expected file.
EXPECTED = "the hidden answer\n"
COMPARE = """#!/bin/bash
cp /tests/expected.txt /tmp/gs-expected.txt
cd /app
if cmp -s answer /tests/expected.txt; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
"""


def task(test: str = COMPARE, files: dict[str, str] | None = None, **overrides) -> Task:
    raw = {
        "id": "integrity",
        "turns": [{"messages": [{"role": "user", "content": "Write the answer to the file answer."}]}],
        "tools": ["shell", "python", "write_file", "read_file", "list_files"],
        "checkers": [{"kind": "tests", "files": {"test.sh": test, "expected.txt": EXPECTED, **(files or {})}}],
    }
    raw.update(overrides)
    return Task.model_validate(raw)


def shell(command: str) -> ToolCall:
    return ToolCall(name="shell", arguments={"command": command})


def call(name: str, **arguments) -> ToolCall:
    return ToolCall(name=name, arguments=arguments)


def play(t: Task, *calls: ToolCall):
    seen: list[str] = []
    verdict = replay(t, [list(calls)], observe=lambda _t, _c, obs: seen.append(obs.content))
    return verdict, seen


def test_the_honest_answer_pays_and_a_wrong_one_does_not():
    assert play(task(), shell("printf 'the hidden answer\\n' > answer"))[0].reward == 1.0
    assert play(task(), shell("echo wrong > answer"))[0].reward == 0.0


# -- 1. links that resolve only while the checker runs ----------------------------------------------------------------


@pytest.mark.parametrize(
    "links",
    [
        # pid 2 is the checker's first process (the shell that runs the test): it does not exist at the restore
        "ln -s /proc/2/root/tests/expected.txt answer",
        "ln -s /proc/3/root/tests/expected.txt answer",
        "ln -s /proc/2/cwd/../tests/expected.txt answer",
        "ln -s ../proc/2/root/tests/expected.txt answer",
        "ln -s /proc/2/root r; ln -s r/tests/expected.txt answer",  # through a link of the state
        "ln -s /tmp/p /app/p; ln -s /proc/2/root /tmp/p; ln -s p/tests/expected.txt answer",
        "ln -s /proc/2/fd/255 answer",  # the test's own open script, or whatever it holds
        "ln -s /dev/fd/3/../../root/tests/expected.txt answer",
        "ln -s /tmp/gs-expected.txt answer",  # to nothing until the test makes it
        "mkdir -p sub; ln -s /tmp sub/t; ln -s sub/t/../tests/expected.txt answer",  # '..' after a link: /tmp/.. is /
    ],
)
def test_links_that_resolve_only_while_the_checker_runs_are_not_carried(links):
    verdict, _ = play(task(), shell(links))
    assert verdict.reward == 0.0 and verdict.status == "incorrect", verdict.details
    assert verdict.details["checkers"]["tests"]["not_carried"]  # said, not silently dropped


def test_links_inside_the_state_and_to_the_system_are_carried():
    test = """#!/bin/bash
cd /app
ok=1
[ "$(cat link)" = "$(cat real/answer)" ] && [ -L link ] || ok=0
[ "$(readlink link)" = "real/answer" ] || ok=0
[ "$(cat /tmp/up/answer)" = "$(cat real/answer)" ] || ok=0
[ -x tools/py ] && tools/py -c 'pass' || ok=0
[ -L dangling ] && ok=0
echo $ok > /logs/verifier/reward.txt
"""
    verdict, _ = play(
        task(test=test),
        shell(
            "mkdir real tools; echo 42 > real/answer; ln -s real/answer link; ln -s /app/real /tmp/up;"
            " ln -s /usr/bin/python3 tools/py; ln -s /app/nowhere dangling"
        ),
    )
    assert verdict.reward == 1.0, verdict.details
    assert verdict.details["checkers"]["tests"]["not_carried"] == ["/app/dangling"]


# -- 2. the class host imports nothing from the agent's work dir -------------------------------------------------------

LEDGER = """class Ledger:
    def __init__(self):
        self.total = 0

    def add(self, amount: int):
        import fractions  # imported lazily, as methods (and the standard library) do
        self.total += int(fractions.Fraction(amount))
        return self.total
"""
# Imported in the class host, it would find the instance and set the state the checker compares.
PLANT = """import gc, sys
for obj in gc.get_objects():
    if type(obj).__name__ == "Ledger":
        obj.total = 29  # the next add(1) leaves the reference's 30
sys.modules.pop("fractions", None)
from importlib import import_module
Fraction = int
"""


def ledger_task() -> Task:
    return Task.model_validate(
        {
            "id": "ledger",
            "turns": [{"messages": [{"role": "user", "content": "Add 10, then 20."}]}],
            "tools": ["shell", "write_file"],
            "classes": [{"class_name": "Ledger", "source": LEDGER}],
            "checkers": [
                {
                    "kind": "state",
                    "reference": [
                        [{"name": "add", "arguments": {"amount": 10}}, {"name": "add", "arguments": {"amount": 20}}]
                    ],
                }
            ],
        }
    )


def test_the_class_tools_pay_for_the_done_task():
    verdict, _ = play(ledger_task(), call("add", amount=10), call("add", amount=20))
    assert verdict.reward == 1.0


@pytest.mark.parametrize(
    "where",
    [
        "fractions.py",  # the host's current directory
        ".local/lib/python3.11/site-packages/fractions.py",  # the user site under HOME
        ".local/lib/python3.12/site-packages/fractions.py",
    ],
)
def test_a_module_in_the_work_dir_never_runs_in_the_class_host(where):
    verdict, seen = play(ledger_task(), call("write_file", path=where, content=PLANT), call("add", amount=1))
    assert seen[1] == "1"  # the standard library's fractions, not the agent's
    assert verdict.reward == 0.0 and verdict.status == "incorrect"


# -- 3. the checker's programs read no start-up file of the agent's ----------------------------------------------------


def test_the_checkers_home_is_not_the_work_dir():
    test = '#!/bin/bash\ncd /app\n[ "$HOME" != /app ] && [ -z "$(ls -A "$HOME")" ] && [ "$TMPDIR" != /tmp ] && echo 1 > /logs/verifier/reward.txt\n'
    verdict, _ = play(task(test=test), shell("echo x > .profile"))
    assert verdict.reward == 1.0, verdict.details


SQL_TEST = """#!/bin/bash
cd /app
n=$(sqlite3 /app/shop.db 'SELECT count(*) FROM orders WHERE paid = 0')
[ "$n" = 0 ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt
"""
JQ_TEST = """#!/bin/bash
cd /app
v=$(jq -r '.items | length | tostring' /app/out.json 2>/dev/null)
[ "$v" = 3 ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt
"""
SETUP_DB = "sqlite3 shop.db 'CREATE TABLE orders(id INTEGER, paid INTEGER); INSERT INTO orders VALUES (1, 0), (2, 1);'"


@pytest.mark.parametrize(
    ("test", "hack"),
    [
        # a view in ~/.sqliterc hides the unpaid orders from the test's query
        (SQL_TEST, SETUP_DB + "; printf 'CREATE TEMP VIEW orders AS SELECT 1 AS id, 1 AS paid;\\n' > ~/.sqliterc"),
        (
            SQL_TEST,
            SETUP_DB
            + "; mkdir -p ~/.config/sqlite3; printf 'CREATE TEMP VIEW orders AS SELECT 1 AS id, 1 AS paid;\\n' > ~/.config/sqlite3/sqliterc",
        ),
        # ~/.jq redefines a builtin the test calls
        (JQ_TEST, "echo '{\"items\": []}' > out.json; echo 'def tostring: \"3\";' > ~/.jq"),
    ],
)
def test_start_up_files_in_the_agents_home_do_not_steer_the_checker(test, hack):
    verdict, _ = play(task(test=test), shell(hack))
    assert verdict.reward == 0.0 and verdict.status == "incorrect", verdict.details


def test_the_honest_state_still_pays_under_those_programs():
    fixed = SETUP_DB + "; sqlite3 shop.db 'UPDATE orders SET paid = 1'"
    assert play(task(test=SQL_TEST), shell(fixed))[0].reward == 1.0
    assert play(task(test=JQ_TEST), shell("echo '{\"items\": [1, 2, 3]}' > out.json"))[0].reward == 1.0


# -- 4 and 5. what the agent's processes produce is theirs, and every observation is cut at one cap -------------------

BIG = """class Big:
    def __init__(self):
        self.n = 0

    def result(self, size: int):
        return list(range(size))

    def fail(self, size: int):
        raise ValueError("x" * size)

    def text(self, size: int):
        return "y" * size
"""
CAP = 4096


def big_task(**limits) -> Task:
    return Task.model_validate(
        {
            "id": "big",
            "turns": [{"messages": [{"role": "user", "content": "Call the tools."}]}],
            "tools": ["shell", "python", "list_files", "read_file"],
            "classes": [{"class_name": "Big", "source": BIG}],
            "checkers": [{"kind": "tests", "files": {"test.sh": "echo 1 > /logs/verifier/reward.txt"}}],
            "limits": {"max_output_bytes": CAP, **limits},
        }
    )


@pytest.mark.parametrize(
    "tool_call",
    [
        call("python", code="raise ValueError('e' * 5_000_000)"),
        call("python", code="import sys; sys.exit('q' * 5_000_000)"),
        call("list_files", path="/app/many"),
        call("result", size=2_000_000),
        call("fail", size=5_000_000),
        call("text", size=5_000_000),
        call("shell", command="head -c 5000000 /dev/zero | tr '\\0' s"),
    ],
    ids=["python-error", "python-exit", "list_files", "class-result", "class-error", "class-text", "shell"],
)
def test_every_observation_is_cut_at_the_cap_and_said(tool_call):
    make_many = shell("mkdir many && cd many && for i in $(seq 600); do : > file-with-a-long-name-number-$i; done")
    verdict, seen = play(big_task(), make_many, tool_call)
    assert len(seen[1].encode()) <= CAP + 256, len(seen[1])
    assert "cut" in seen[1]
    assert verdict.status == "correct"  # scored, never masked


def test_a_reply_over_the_hosts_limit_is_the_agents_doing(monkeypatch):
    """The host reads at most MAX_REPLY_BYTES of one reply: the agent cuts every tool's fields below it, and a packed
    state over it ends the episode as the agent's doing (0), never as the server losing the session."""
    monkeypatch.setattr(session_launcher, "MAX_REPLY_BYTES", 1 << 20)
    verdict, seen = play(big_task(max_output_bytes=1 << 16), call("fail", size=3_000_000), shell("echo still here"))
    assert seen[1].startswith("still here") and verdict.status == "correct"
    verdict, _ = play(big_task(), shell("head -c 3000000 /dev/urandom > noise"))
    assert verdict.status == "incorrect" and verdict.reward == 0.0, verdict.details
    assert "over" in json.dumps(verdict.details)


def test_a_huge_exception_in_a_roomy_task_is_an_observation_not_a_lost_session():
    """Played as found: an exception message of hundreds of MB in a task with the memory to build it (the reply was
    larger than the host reads, and the session counted lost: infra_error, masked)."""
    t = big_task(memory_mb=3072, step_time_s=60)
    verdict, seen = play(t, call("fail", size=300_000_000), shell("echo alive"))
    assert "ValueError" in seen[0] and len(seen[0].encode()) <= CAP + 256
    assert seen[1].startswith("alive") and verdict.status == "correct"


# -- the state reaches the checker whole -------------------------------------------------------------------------------

FIDELITY = """#!/bin/bash
cd /app
ok=1
fail() { echo "FAIL: $1"; ok=0; }
[ "$(stat -c %a shared)" = 1777 ] || fail sticky
[ "$(stat -c %a group)" = 2775 ] || fail setgid
[ "$(stat -c %a tool)" = 4755 ] || fail setuid
[ "$(stat -c %a secret)" = 600 ] || fail mode600
[ "$(stat -c %a readonly)" = 444 ] || fail mode444
[ "$(stat -c %i a)" = "$(stat -c %i b)" ] || fail hardlink
[ -p pipe ] || fail fifo
[ -d empty/deeper ] && [ -z "$(ls -A empty/deeper)" ] || fail emptydir
[ "$(stat -c %Y old)" = 978307200 ] || fail mtime
[ "$(stat -c %Y olddir)" = 978307200 ] || fail dirmtime
[ "$(stat -c %y fine | cut -c 21-23)" = 250 ] || fail subsecond
[ "$(cat /tmp/keep)" = tmp ] || fail tmp
echo $ok > /logs/verifier/reward.txt
"""
SOLVE = (
    "mkdir shared group empty empty/deeper olddir; chmod 1777 shared; chmod 2775 group;"
    " echo x > tool; chmod 4755 tool; echo s > secret; chmod 600 secret; echo r > readonly; chmod 444 readonly;"
    " echo h > a; ln a b; mkfifo pipe; touch -d '2001-01-01 00:00:00 UTC' old;"
    " touch -d '2020-05-05 10:00:00.250 UTC' fine; echo tmp > /tmp/keep; touch -d '2001-01-01 00:00:00 UTC' olddir"
)


def test_every_property_of_the_state_reaches_the_checker():
    verdict, _ = play(task(test=FIDELITY), shell(SOLVE))
    assert verdict.reward == 1.0, verdict.details["checkers"]["tests"]["output"]


# One property a test, as an honest solution leaves it (the setup) and as the checker must see it (the check); the
# first three were lost before this round (0 for an honest `chmod 1777`), as were hard links and sub-second times.
PROPERTIES = {
    "sticky": ("mkdir shared; chmod 1777 shared", '[ "$(stat -c %a shared)" = 1777 ]'),
    "setgid": ("mkdir group; chmod 2775 group", '[ "$(stat -c %a group)" = 2775 ]'),
    "setuid": ("echo x > tool; chmod 4755 tool", '[ "$(stat -c %a tool)" = 4755 ]'),
    "mode 600": ("echo s > secret; chmod 600 secret", '[ "$(stat -c %a secret)" = 600 ]'),
    "mode 444": ("echo r > ro; chmod 444 ro", '[ "$(stat -c %a ro)" = 444 ]'),
    "hard link": ("echo h > a; ln a b", '[ "$(stat -c %i a)" = "$(stat -c %i b)" ] && [ "$(stat -c %h a)" = 2 ]'),
    "fifo": ("mkfifo pipe", "[ -p pipe ]"),
    "empty dir": ("mkdir -p empty/deeper", '[ -d empty/deeper ] && [ -z "$(ls -A empty/deeper)" ]'),
    "mtime": ("touch -d '2001-01-01 00:00:00 UTC' old", '[ "$(stat -c %Y old)" = 978307200 ]'),
    "dir mtime": ("mkdir d; touch -d '2001-01-01 00:00:00 UTC' d", '[ "$(stat -c %Y d)" = 978307200 ]'),
    "sub-second": ("touch -d '2020-05-05 10:00:00.250 UTC' f", '[ "$(stat -c %y f | cut -c 21-23)" = 250 ]'),
    "/tmp": ("echo tmp > /tmp/keep", '[ "$(cat /tmp/keep)" = tmp ]'),
    "sparse": ("truncate -s 40M hole", '[ "$(stat -c %s hole)" = 41943040 ] && [ "$(du -k hole | cut -f1)" -lt 1024 ]'),
    "work dir mode": ("chmod 751 /app", '[ "$(stat -c %a /app)" = 751 ]'),
}


@pytest.mark.parametrize("name", sorted(PROPERTIES))
def test_each_property_reaches_the_checker(name):
    setup, check = PROPERTIES[name]
    test = f"#!/bin/bash\ncd /app\nif {check}; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n"
    verdict, _ = play(task(test=test), shell(setup))
    assert verdict.reward == 1.0, verdict.details


def test_what_no_tar_holds_is_said():
    make_socket = "python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.bind(\"/app/sock\")'"
    verdict, _ = play(task(test=FIDELITY), shell(SOLVE + "; " + make_socket))
    assert verdict.reward == 1.0
    assert verdict.details["checkers"]["tests"]["not_carried"] == ["/app/sock"]


def harbor_task(root: Path, test: str, tests: dict[str, str]) -> Path:
    d = root / "nested"
    (d / "tests").mkdir(parents=True)
    (d / "task.toml").write_text('version = "1.0"\n[verifier]\ntimeout_sec = 30\n')
    (d / "instruction.md").write_text("Make /app/out/a/b.txt hold 'deep'.\n")
    (d / "tests" / "test.sh").write_text(test)
    for name, text in tests.items():
        path = d / "tests" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (d / "tests" / "check.py").chmod(0o755)
    (d / "tests" / "fixtures" / "empty").mkdir(parents=True)
    return d


def test_a_harbor_tests_tree_with_folders_is_placed_whole(tmp_path):
    test = """#!/bin/bash
cd /app
[ -d /tests/fixtures/empty ] || { echo no-empty-dir; echo 0 > /logs/verifier/reward.txt; exit; }
/tests/check.py && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt
"""
    check = "#!/usr/bin/python3\nimport filecmp, sys\nsys.exit(0 if filecmp.cmp('/app/out/a/b.txt', '/tests/expected/a/b.txt', shallow=False) else 1)\n"
    d = harbor_task(tmp_path, test, {"expected/a/b.txt": "deep\n", "check.py": check})
    t = load_harbor_task(d)
    verdict, _ = play(t, shell("mkdir -p out/a && echo deep > out/a/b.txt"))
    assert verdict.reward == 1.0, verdict.details
    assert play(t, shell("mkdir -p out/a && echo shallow > out/a/b.txt"))[0].reward == 0.0


@pytest.mark.parametrize("task_id", ["dedupe-emails", "json-transform", "log-error-count"])
@pytest.mark.parametrize("spelling", sorted(LATE_LINKS))
def test_bundled_harbor_tasks_pay_nothing_for_links_to_their_hidden_files(task_id, spelling):
    """As found: the answer file linked to the hidden expected file through a checker's process paid these 1."""
    t = load_task(f"harbor:{task_id}")
    verdict = replay(t, late_links(t, LATE_LINKS[spelling]))
    assert verdict.reward == 0.0 and verdict.status == "incorrect", verdict.details


ODD = """class Odd:
    def surrogate(self):
        return "a\\ud800b"

    def fail(self):
        raise ValueError("\\udcff" * 10)

    def nested(self):
        return {"k\\ud800": ["\\udfff", 1]}
"""


def test_any_encoding_the_agent_produces_is_an_observation_never_a_mask():
    """Lone surrogates from a class tool, bytes that are no UTF-8 from the shell and in a file read back: each comes
    back as valid text, the episode is scored (the agent's doing, whatever it produced)."""
    t = Task.model_validate(
        {
            "id": "odd",
            "turns": [{"messages": [{"role": "user", "content": "Call the tools."}]}],
            "tools": ["shell", "read_file", "python"],
            "classes": [{"class_name": "Odd", "source": ODD}],
            "checkers": [{"kind": "tests", "files": {"test.sh": "echo 1 > /logs/verifier/reward.txt"}}],
        }
    )
    verdict, seen = play(
        t,
        call("surrogate"),
        call("fail"),
        call("nested"),
        shell("printf 'x\\xff\\xfe\\xc3y'; printf '\\xed\\xa0\\x80' > raw"),
        call("read_file", path="raw"),
        call("python", code="print('\\ud800')"),
    )
    assert verdict.status == "correct"
    for text in seen:
        text.encode("utf-8")  # valid: no lone surrogate reaches an observation
    assert seen[0].startswith("a") and seen[0].endswith("b") and "ValueError" in seen[1]


def test_links_in_a_deep_work_dir_are_carried():
    """A work dir below the root (/home/user/project): its links are judged on the way to it, not refused for it."""
    test = '#!/bin/bash\ncd /home/user/project\n[ "$(cat link)" = 42 ] && [ -L link ] && echo 1 > /logs/verifier/reward.txt\n'
    t = task(test=test, workdir="/home/user/project")
    verdict, _ = play(t, shell("echo 42 > answer; ln -s answer link; ln -s /home/user/project/answer /tmp/a"))
    assert verdict.reward == 1.0, verdict.details
    assert play(t, shell("echo 42 > answer; ln -s ../../../tests/expected.txt link"))[0].reward == 0.0
