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
