"""`groupscore env run` and `groupscore env list` as a user types them: the installed command, run from an empty
folder, offline; a trajectory from a file or stdin, tool calls typed line by line, and bad input refused in one line
with status 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

COMMAND = str(Path(sys.executable).with_name("groupscore"))
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
RIGHT = {"name": "shell", "arguments": {"command": "grep -c ' ERROR ' app.log > errors.txt"}}


@pytest.fixture
def env(tmp_path):
    """`groupscore env ARGS` in an empty folder: (status, stdout lines, stderr)."""
    empty = tmp_path / "empty"
    empty.mkdir()

    def run(*args: str, stdin: str = "") -> tuple[int, list[str], str]:
        done = subprocess.run(
            [COMMAND, "env", *args],
            input=stdin,
            cwd=empty,
            env={**os.environ, **OFFLINE},
            capture_output=True,
            text=True,
            timeout=120,
        )
        return done.returncode, done.stdout.splitlines(), done.stderr

    return run


def test_list_prints_each_task_with_its_turns_tools_and_checkers(env):
    status, lines, _ = env("list", "demo")
    assert status == 0
    assert lines[0].startswith("count-errors\tturns=1\ttools=shell,read_file,write_file,list_files\tcheckers=tests\t")
    assert lines[0].endswith("\tThe file app.log holds a service's log. Write the number of lines with the le...")
    assert any(line.startswith("top-customer\tturns=1\ttools=sqlite\tcheckers=sql\t") for line in lines)
    # a class's tools by name, read from its source (its setup method is not one)
    assert any(line.startswith("kv-rename\tturns=1\ttools=get,put,delete,keys\tcheckers=state") for line in lines)
    status, lines, _ = env("list", "demo", "--json")
    first = json.loads(lines[0])
    assert status == 0 and first["address"] == "demo:count-errors" and first["checkers"] == ["tests"]
    assert first["tools"] == ["shell", "read_file", "write_file", "list_files"] and first["description"].endswith("...")


def test_list_of_an_unknown_source_is_one_line_and_status_2(env):
    status, lines, err = env("list", "nowhere")
    assert status == 2 and lines == []
    assert err.strip().splitlines() == [
        "groupscore env list: source: nowhere: no such source (bfcl, harbor, demo, or a path to a task file or directory)"
    ]


def test_run_replays_a_trajectory_file_and_ends_with_the_verdict(env, tmp_path):
    trajectory = tmp_path / "calls.json"
    trajectory.write_text(json.dumps([[{"name": "shell", "arguments": {"command": "cat app.log"}}, RIGHT]]))
    status, lines, _ = env("run", "demo:count-errors", "--trajectory", str(trajectory))
    assert status == 0
    assert lines[0].startswith("[turn 1] user: The file app.log holds a service's log.")
    assert lines[1] == (
        "[turn 1] shell -> 2026-11-01 10:00:01 INFO start | 2026-11-01 10:00:02 ERROR disk full | "
        "2026-11-01 10:00:03 WARN slow | (+3 lines)"
    )
    assert lines[2] == "[turn 1] shell -> (no output)"
    verdict = json.loads(lines[-1])
    assert (verdict["reward"], verdict["status"], len(lines)) == (1.0, "correct", 4)


def test_run_reads_the_trajectory_from_stdin_and_shows_errors(env):
    calls = [[{"name": "shell", "arguments": {"command": "ls missing"}}, {"name": "nope", "arguments": {}}]]
    status, lines, _ = env("run", "demo:count-errors", "--trajectory", "-", stdin=json.dumps(calls))
    assert status == 1  # judged, not solved
    assert lines[1].startswith("[turn 1] shell -> error: ls: cannot access 'missing'")
    assert lines[2].startswith("[turn 1] nope -> error: unknown tool 'nope'")
    assert json.loads(lines[-1])["reward"] == 0.0


def test_run_passes_the_final_message_to_its_checker(env):
    calls = [[{"name": "python", "arguments": {"code": "print(sum(i * i for i in range(1, 101)))"}}]]
    status, lines, _ = env(
        "run",
        "demo:sum-python",
        "--trajectory",
        "-",
        "--final-message",
        "It is \\boxed{338350}.",
        stdin=json.dumps(calls),
    )
    assert status == 0 and lines[1] == "[turn 1] python -> 338350"
    assert json.loads(lines[-1])["status"] == "correct"


def test_run_without_a_trajectory_takes_calls_typed_one_per_line(env):
    typed = "\n".join(
        [
            json.dumps({"name": "put", "arguments": {"key": "final", "value": "v1"}}),
            json.dumps({"name": "delete", "arguments": {"key": "draft"}}),
            json.dumps({"end_turn": "Moved it."}),
        ]
    )
    status, lines, _ = env("run", "demo:kv-rename", stdin=typed + "\n")
    assert status == 0
    assert lines[0].startswith("[turn 1] user: In the key-value store")
    assert lines[1].startswith("tools: ") and "put(key, value)" in lines[1]
    assert lines[2:4] == ["[turn 1] put -> ok", "[turn 1] delete -> ok"]
    assert json.loads(lines[-1])["reward"] == 1.0 and len(lines) == 5


def test_calls_may_be_typed_as_tool_and_key_value_pairs(env):
    typed = "put key=final value=v1\ndelete key=draft\n\n"
    status, lines, _ = env("run", "demo:kv-rename", stdin=typed)
    assert status == 0 and lines[2:4] == ["[turn 1] put -> ok", "[turn 1] delete -> ok"]
    shell = "shell command=\"grep -c ' ERROR ' app.log > errors.txt\"\n"  # shell-quoted: one argument
    status, lines, _ = env("run", "demo:count-errors", stdin=shell)
    assert status == 0 and json.loads(lines[-1])["reward"] == 1.0


def test_full_output_and_a_saved_episode_that_plays_again(env, tmp_path):
    saved = tmp_path / "episode.json"
    calls = [[{"name": "shell", "arguments": {"command": "cat app.log"}}, RIGHT]]
    status, lines, _ = env("run", "demo:count-errors", "--trajectory", "-", "--full", "--save", str(saved),
                           stdin=json.dumps(calls))  # fmt: skip
    assert status == 0 and lines[1] == "[turn 1] shell:"
    log = [line for line in lines if line.startswith("    2026-11-01")]
    assert len(log) == 6 and "(+3 lines)" not in "\n".join(lines)  # every line of the output, none cut
    episode = json.loads(saved.read_text())
    assert episode["task"] == "demo:count-errors" and episode["trajectory"] == calls
    assert episode["observations"][0][0]["content"].count("\n") >= 5 and episode["verdict"]["reward"] == 1.0
    status, lines, _ = env("run", "demo:count-errors", "--trajectory", str(saved))
    assert status == 0 and json.loads(lines[-1])["reward"] == 1.0  # the saved episode, played again


def test_a_typed_final_message_is_saved_and_a_bad_save_path_is_refused_first(env, tmp_path):
    saved = tmp_path / "sum.json"
    typed = "python code='print(sum(i * i for i in range(1, 101)))'\n" + json.dumps({"end_turn": "\\boxed{338350}"})
    status, lines, _ = env("run", "demo:sum-python", "--save", str(saved), stdin=typed + "\n")
    assert status == 0 and json.loads(saved.read_text())["final_message"] == "\\boxed{338350}"
    status, lines, _ = env("run", "demo:sum-python", "--trajectory", str(saved))
    assert status == 0  # played again with the message it ended with
    status, lines, err = env("run", "demo:sum-python", "--save", str(tmp_path / "no" / "such.json"), stdin="")
    assert status == 2 and lines == [] and "--save:" in err  # refused before any session
    status, _, err = env("run", "demo:sum-python", stdin='[{"name": "python"}]\n')
    assert status == 2 and "is no tool name" in err


def test_a_blank_line_ends_the_turn_and_the_end_of_stdin_scores(env):
    status, lines, _ = env("run", "demo:count-errors", stdin=json.dumps(RIGHT) + "\n\n")
    assert status == 0 and json.loads(lines[-1])["reward"] == 1.0
    status, lines, _ = env("run", "demo:count-errors", stdin="")
    assert status == 1 and json.loads(lines[-1])["reward"] == 0.0


@pytest.mark.parametrize(
    ("args", "stdin", "problem"),
    [
        (("run", "demo"), "", "SOURCE:TASK_ID: 'demo': address a task as SOURCE:TASK_ID"),
        (("run", "demo:nope"), "", "SOURCE:TASK_ID: demo has no task 'nope'"),
        (("run", "demo:count-errors", "--trajectory", "missing.json"), "", "--trajectory: missing.json: No such file"),
        (("run", "demo:count-errors", "--trajectory", "-"), "{not json", "--trajectory: - is not JSON"),
        (("run", "demo:count-errors", "--trajectory", "-"), '[{"name": "shell"}]', "--trajectory: -: give a list of"),
        (("run", "demo:count-errors", "--trajectory", "-"), '[[{"nam": "x"}]]', "turn 1, call 1: name: Field required"),
        (("run", "demo:count-errors"), '{"name": "shell", "arguments": 3}\n', "stdin line 1: arguments: "),
        (("run", "demo:count-errors"), "{ls\n", "stdin line 1: not JSON"),
        (("run", "demo:count-errors"), "shell ls\n", "stdin line 1: 'ls': give each argument as key=value"),
        (("run", "demo:count-errors"), "shell command='ls\n", "stdin line 1: cannot split the line"),
    ],
)
def test_bad_input_is_one_line_naming_the_field_and_status_2(env, args, stdin, problem):
    status, lines, err = env(*args, stdin=stdin)
    assert status == 2
    [line] = err.strip().splitlines()
    assert line.startswith("groupscore env run: ") and problem in line, line
    assert not any(line.startswith("{") for line in lines)  # no verdict printed


def test_the_exit_status_is_the_verdicts(env, monkeypatch):
    """0 solved, 1 judged and not solved, 3 infra_error: a script can tell a wrong answer from a broken session."""
    from groupscore.env import verdict_status
    from groupscore.schema.verdict import Verdict

    assert verdict_status(Verdict(reward=1.0, status="correct")) == 0
    for status in ("incorrect", "partial", "no_answer", "unparsable", "timeout", "error"):
        assert verdict_status(Verdict(reward=0.0, status=status)) == 1
    assert verdict_status(Verdict(reward=0.0, status="infra_error", details={"infra": "sandbox"})) == 3
    status, lines, _ = env("run", "demo:kv-rename", stdin=json.dumps({"end_turn": "done"}) + "\n")
    assert status == 1 and json.loads(lines[-1])["status"] != "correct"


@pytest.mark.slow  # four episodes; make test-fast plays an oracle through check env: (test_env_checks.py)
@pytest.mark.parametrize("task", ["demo:count-errors", "demo:top-customer", "demo:kv-rename", "demo:sum-python"])
def test_every_demo_tasks_own_solution_solves_it_with_oracle(env, task):
    status, lines, _ = env("run", task, "--oracle")
    assert status == 0 and json.loads(lines[-1])["reward"] == 1.0


def test_oracle_is_refused_in_one_line_with_a_trajectory_or_for_a_task_without_a_solution(env, tmp_path):
    status, _, err = env("run", "demo:count-errors", "--oracle", "--trajectory", "-")
    assert status == 2 and "--oracle plays the task's own solution" in err
    tasks = tmp_path / "t.yaml"
    tasks.write_text("- {id: t, prompt: hi, tools: [shell], checkers: [{kind: tests, files: {test.sh: 'true'}}]}\n")
    status, _, err = env("run", f"{tasks}:t", "--oracle")
    assert status == 2 and "has no solution of its own" in err


def test_show_prints_a_saved_episode_as_a_transcript_and_refuses_what_it_cannot_read(env, tmp_path):
    saved = tmp_path / "kv.json"
    assert env("run", "demo:kv-rename", "--oracle", "--save", str(saved))[0] == 0
    status, lines, _ = env("show", str(saved))
    assert status == 0 and lines[0] == "task demo:kv-rename (seed 0)"
    assert lines[1:3] == ['[turn 1] get({"key": "draft"})', "    v1"] and lines[-1] == "verdict: correct, reward 1.0"
    (tmp_path / "rows.jsonl").write_text('{"a": 1}\n')
    for args, problem in [
        ((str(tmp_path / "missing.json"),), "No such file"),
        ((str(tmp_path / "rows.jsonl"), "--line", "3"), "--line 3: the file has 1 lines"),
        ((str(tmp_path / "rows.jsonl"),), "not an episode `env run --save` wrote"),
    ]:
        status, _, err = env("show", *args)
        assert status == 2 and problem in err and len(err.strip().splitlines()) == 1, err


def test_a_task_whose_own_solution_is_malformed_is_refused_in_one_line_and_fails_check_env(env, tmp_path):
    from groupscore.testing.env_checks import check_environment
    from groupscore.testing.report import CheckStatus

    tasks = tmp_path / "t.yaml"
    tasks.write_text(
        "- {id: t, prompt: hi, tools: [shell], checkers: [{kind: tests, files: {test.sh: 'true'}}],"
        " metadata: {solution: [[{nme: shell}]]}}\n"
    )
    status, _, err = env("run", f"{tasks}:t", "--oracle")
    assert status == 2 and "metadata.solution: not turns of tool calls" in err and len(err.strip().splitlines()) == 1
    report = check_environment(f"env:{tasks}:t")
    oracle_row = next(r for r in report.results if r.name == "env.oracle_passes")
    assert oracle_row.status is CheckStatus.FAIL


def test_show_refuses_a_record_of_another_shape_in_one_line(env, tmp_path):
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps({"trajectory": 3, "observations": "x"}))
    status, _, err = env("show", str(odd))
    assert status == 2 and "not the shape env show reads" in err and len(err.strip().splitlines()) == 1
