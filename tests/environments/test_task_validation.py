"""A task author's broken class source is refused when the task loads, in one line naming the line: found only in the
jail, every session of the task would be infra_error, which trainers mask, and the task would drop out of training
unnoticed."""

from __future__ import annotations

import subprocess
import sys

import pytest
from pydantic import ValidationError

from groupscore.environments import Task, load_source

GOOD = "class Bank:\n    def deposit(self, amount: int):\n        return amount\n"


def task(source: str, class_name: str = "Bank", **more) -> Task:
    return Task.model_validate(
        {
            "id": "t",
            "turns": [{"messages": [{"role": "user", "content": "deposit 5"}]}],
            "classes": [{"class_name": class_name, "source": source, **more}],
            "checkers": [{"kind": "state", "reference": [[{"name": "deposit", "arguments": {"amount": 5}}]]}],
        }
    )


def test_a_good_source_and_a_class_bound_by_import_or_assignment_load():
    assert task(GOOD).classes[0].class_name == "Bank"
    assert task("from collections import OrderedDict as Bank\n")
    assert task("class _B:\n    pass\nBank = _B\n")


@pytest.mark.parametrize(
    ("source", "class_name", "problem"),
    [
        ("class Bank:\n    def deposit(self, amount:\n        return 1\n", "Bank", "source: line 2: "),
        (GOOD, "Vault", "source: defines no class 'Vault' at its top level"),
        ("def make():\n    class Bank:\n        pass\n", "Bank", "defines no class 'Bank'"),
    ],
)
def test_a_broken_source_is_refused_naming_the_line_or_the_class(source, class_name, problem):
    with pytest.raises(ValidationError, match=problem):
        task(source, class_name)


def test_a_broken_encoder_is_refused_too():
    with pytest.raises(ValidationError, match="encoder: line 1: "):
        task(GOOD, encoder="def public_state(x) return x\n")


def test_every_bundled_class_source_still_loads():
    tasks = load_source("demo")
    assert any(t.classes for t in tasks)


def test_env_list_names_the_broken_task_file_in_one_line(tmp_path):
    bad = tmp_path / "bank.yaml"
    bad.write_text(
        "- id: deposit\n  prompt: deposit 5\n  classes:\n    - class_name: Bank\n      source: |\n"
        "        class Bank:\n            def deposit(self, amount:\n                return 1\n"
        "  checkers: [{kind: state, reference: [[{name: deposit, arguments: {amount: 5}}]]}]\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "groupscore", "env", "list", str(bad)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "line 2" in done.stderr and str(bad) in done.stderr


SAYS_HI = (
    "- id: good\n  prompt: say hi\n  tools: [shell]\n"
    "  checkers: [{kind: final_message, item: {verifier: math, answer: '1'}}]\n"
)


def test_every_bad_task_of_a_file_is_named_with_a_hint_and_the_good_ones_still_load(tmp_path):
    """A typo is named as the typo (not as 'turns: at least 1 item'); each bad task has its line; `env list` lists
    the good ones, `env run FILE:good` runs one, and a taskset (everything else) refuses the file whole."""
    from groupscore.environments import SourceError, load_task
    from groupscore.environments.sources import BadTasks

    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(
        SAYS_HI
        + "- id: typo\n  promt: say hi\n  tools: [shell]\n"
        + "  checkers: [{kind: final_message, item: {verifier: math, answer: '1'}}]\n"
        + "- id: no-checkers\n  prompt: say hi\n  tools: [shell]\n"
        + SAYS_HI.replace("id: good", "id: twice")
        + SAYS_HI.replace("id: good", "id: twice").replace("say hi", "say bye")
    )
    with pytest.raises(BadTasks) as raised:
        load_source(str(tasks))
    assert raised.value.problems == [
        f"{tasks}: task 2: 'promt': not a task field (did you mean 'prompt'?)",
        f"{tasks}: task 3: checkers: Field required",
        f"{tasks}: task id 'twice' appears 2 times",  # which one is meant cannot be told: neither runs
    ]
    assert [t.id for t in raised.value.good] == ["good"]
    assert load_task(f"{tasks}:good").id == "good"  # the good task of a file with bad ones still runs alone
    for bad, why in [("typo", "'promt': not a task field"), ("twice", "appears 2 times"), ("nope", "no task 'nope'")]:
        with pytest.raises(SourceError) as refused:
            load_task(f"{tasks}:{bad}")
        assert why in str(refused.value) and "\n" not in str(refused.value)  # that task's problem, in one line
    done = subprocess.run(
        [sys.executable, "-m", "groupscore", "env", "list", str(tasks)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2 and done.stdout.startswith("good\tturns=1")
    assert done.stderr.strip().splitlines() == [f"groupscore env list: {p}" for p in raised.value.problems]


def test_check_env_of_a_missing_task_says_the_task_is_missing_not_the_source():
    from groupscore.environments import SourceError
    from groupscore.testing.env_checks import check_environment

    with pytest.raises(SourceError, match="demo has no task 'nope'"):
        check_environment("env:demo:nope")
