"""task.toml as Harbor reads it: every field honoured, or the task refused in one line naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from groupscore.environments import SourceError
from groupscore.environments.harbor import load_harbor_task
from groupscore.environments.harbor_config import parse_task_config


def task_dir(root: Path, toml: str, dockerfile: str | None = None) -> Path:
    d = root / "t"
    (d / "tests").mkdir(parents=True)
    (d / "task.toml").write_text(toml)
    (d / "instruction.md").write_text("Do it.\n")
    (d / "tests" / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
    (d / "solution").mkdir()
    (d / "solution" / "solve.sh").write_text('echo "$HINT" > /app/hint\n')
    if dockerfile is not None:
        (d / "environment").mkdir()
        (d / "environment" / "Dockerfile").write_text(dockerfile)
    return d


FULL = """version = "1.0"
[metadata]
difficulty = "easy"
[verifier]
timeout_sec = 900.0
env = { MODE = "strict" }
[agent]
timeout_sec = 1200.0
[solution]
env = { HINT = "x" }
[environment]
build_timeout_sec = 120.0
cpus = 2
memory_mb = 2048
storage_mb = 256
env = { GREETING = "hi" }
"""


def test_every_resource_and_timeout_is_honoured(tmp_path):
    """As found: a task asking for 2 GB got 512 MB, and [verifier] env was dropped, with no message."""
    t = load_harbor_task(task_dir(tmp_path, FULL))
    assert t.limits.memory_mb == 2048 and t.limits.disk_mb == 256 and t.limits.episode_time_s == 1200.0
    (checker,) = t.checkers
    assert checker.timeout_s == 900.0 and checker.env == {"MODE": "strict"}
    assert t.env == {"GREETING": "hi"}
    assert t.metadata["cpus"] == 2 and t.metadata["solution_env"] == {"HINT": "x"}
    assert t.metadata["difficulty"] == "easy" and t.metadata["build_timeout_s"] == 120.0
    assert "task_toml_notes" not in t.metadata


def test_legacy_sizes_are_read():
    config = parse_task_config({"environment": {"memory": "2G", "storage": "512M"}})
    assert config.environment.memory_mb == 2048 and config.environment.storage_mb == 512


@pytest.mark.parametrize(
    ("toml", "field"),
    [
        ("[environment]\ngpus = 1\n", "environment.gpus"),
        ('[environment]\nos = "windows"\n', "environment.os"),
        ("[environment]\nmemory_mb = 8\n", "environment.memory_mb"),
        ('[environment]\nmemory = "lots"\n', "environment"),
        ('[environment]\nmemory = "1G"\nmemory_mb = 2048\n', "environment"),
        ("[agent]\ntimeout_sec = -1\n", "agent.timeout_sec"),
        ("[verifier]\ntimeout_sec = 99999\n", "verifier.timeout_sec"),
        ('[verifier]\nenv = { KEY = "${HOST_SECRET}" }\n', "verifier.env"),
        ('[environment]\nenv = { KEY = "${HOME:-x}" }\n', "environment.env"),
        ('[[environment.mcp_servers]]\nname = "m"\n', "environment.mcp_servers"),
        ('[environment]\ndocker_image = "org/img:1"\n', "environment.docker_image"),
        ('[environment]\nworkdir = "/elsewhere"\n', "environment.workdir"),
        ("verifier = 3\n", "verifier"),
    ],
)
def test_what_a_jail_cannot_do_refuses_the_task_in_one_line(tmp_path, toml, field):
    with pytest.raises(SourceError) as err:
        load_harbor_task(
            task_dir(tmp_path, toml, dockerfile="FROM python:3.11\nWORKDIR /app\n" if "workdir" in toml else None)
        )
    message = str(err.value)
    assert "\n" not in message and f"task.toml: {field}" in message, message


def test_what_a_jail_does_differently_is_noted(tmp_path):
    toml = '[environment]\nallow_internet = true\nhealthcheck = { command = "true" }\nfuture_key = 1\n[agent]\nuser = "root"\n'
    notes = load_harbor_task(task_dir(tmp_path, toml)).metadata["task_toml_notes"]
    assert any("no network" in n for n in notes) and any("agent.user" in n for n in notes)
    assert "environment.future_key: not read" in notes and any("healthcheck" in n for n in notes)


def test_the_verifiers_env_reaches_the_test_and_not_the_agent(tmp_path):
    from groupscore.environments import ToolCall, replay

    toml = '[verifier]\ntimeout_sec = 30\nenv = { EXPECT = "42" }\n'
    d = task_dir(tmp_path, toml)
    (d / "tests" / "test.sh").write_text('[ "$(cat /app/answer)" = "$EXPECT" ] && echo 1 > /logs/verifier/reward.txt\n')
    t = load_harbor_task(d)
    seen: list[str] = []
    verdict = replay(
        t,
        [[ToolCall(name="shell", arguments={"command": 'echo "[$EXPECT]"; echo 42 > answer'})]],
        observe=lambda _t, _c, obs: seen.append(obs.content),
    )
    assert verdict.reward == 1.0 and seen[0].startswith("[]")
