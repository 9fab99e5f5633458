"""Tasks that know themselves: every task carries the address a service on another host resolves (`harbor:NAME`,
`demo:ID`, `bfcl:ID`, or the user's path as given), and loading one Harbor task builds that task's state alone."""

from __future__ import annotations

import pytest

from groupscore.environments import SourceError, load_source, load_task, sources
from groupscore.environments import harbor as harbor_module


@pytest.mark.parametrize("address", ["harbor:csv-column-sum", "demo:count-errors"])
def test_a_bundled_task_carries_its_portable_address(address):
    task = load_task(address)
    assert task.address == address and "/" not in task.source


def test_every_task_of_a_source_carries_its_address():
    assert all(t.address == f"harbor:{t.id}" for t in load_source("harbor"))


def test_a_users_folder_keeps_the_path_as_given(tmp_path):
    d = tmp_path / "tasks" / "one"
    (d / "tests").mkdir(parents=True)
    (d / "task.toml").write_text("")
    (d / "instruction.md").write_text("Do it.\n")
    (d / "tests" / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
    task = load_task(f"{tmp_path / 'tasks'}:one")
    assert task.address == f"{tmp_path / 'tasks'}:one"
    assert load_task(task.address).id == "one"


def test_loading_one_harbor_task_builds_its_state_alone(monkeypatch):
    built: list[str] = []
    real = harbor_module.with_built_state
    monkeypatch.setattr(
        harbor_module, "with_built_state", lambda task, image: built.append(task.id) or real(task, image)
    )
    sources._one_harbor_task.cache_clear()
    load_task("harbor:top-ips")
    assert built == ["top-ips"]


@pytest.mark.parametrize("task_id", ["..", ".", "../harbor/top-ips", "top-ips/../csv-column-sum"])
def test_a_task_id_is_never_a_path(task_id):
    with pytest.raises(SourceError):
        load_task(f"harbor:{task_id}")


def test_the_seed_reaches_the_tools_and_the_checker():
    from groupscore.environments import Task, ToolCall, replay

    test = '[ "$(cat /app/seen)" = "$GROUPSCORE_SEED" ] && echo 1 > /logs/verifier/reward.txt\n'
    task = Task.model_validate(
        {
            "id": "seeded",
            "turns": [{"messages": [{"role": "user", "content": "Write down your seed."}]}],
            "tools": ["shell"],
            "checkers": [{"kind": "tests", "files": {"test.sh": test}}],
        }
    )
    write = [[ToolCall(name="shell", arguments={"command": "echo $GROUPSCORE_SEED > seen"})]]
    assert replay(task, write, seed=7).reward == 1.0
    assert replay(task, [[ToolCall(name="shell", arguments={"command": "echo 8 > seen"})]], seed=7).reward == 0.0
