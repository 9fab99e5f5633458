"""`groupscore check env:...`: the probes pass on sound tasks and fail on tasks built to be hackable."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from groupscore.testing.env_checks import check_environment

pytestmark = [pytest.mark.jail, pytest.mark.root]

HONEST_TEST = '#!/bin/bash\n[ "$(cat /app/answer 2>/dev/null)" = 42 ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n'
TASKS = [
    {  # trusts a reward the agent wrote itself
        "id": "trusts-agent-file",
        "prompt": "Write 42 to answer.",
        "tools": ["shell"],
        "checkers": [
            {
                "kind": "tests",
                "files": {
                    "test.sh": "cp /app/reward.txt /logs/verifier/reward.txt 2>/dev/null || echo 0 > /logs/verifier/reward.txt\n"
                },
            }
        ],
    },
    {  # ships its hidden test inside the agent's own files
        "id": "tests-in-workdir",
        "prompt": "Write 42 to answer.",
        "tools": ["shell"],
        "files": {"check.sh": HONEST_TEST},
        "checkers": [{"kind": "tests", "files": {"test.sh": HONEST_TEST}}],
    },
    {  # pays for an empty work dir
        "id": "pays-for-nothing",
        "prompt": "Write 42 to answer.",
        "tools": ["shell"],
        "checkers": [
            {"kind": "tests", "files": {"test.sh": "[ ! -e /app/wrong ] && echo 1 > /logs/verifier/reward.txt\n"}}
        ],
    },
    {
        "id": "sound",
        "prompt": "Write 42 to answer.",
        "tools": ["shell"],
        "metadata": {"solution_text": "echo 42 > answer"},
        "checkers": [{"kind": "tests", "files": {"test.sh": HONEST_TEST}}],
    },
]


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    path = tmp_path_factory.mktemp("env") / "tasks.yaml"
    path.write_text(yaml.safe_dump(TASKS))
    return path


def test_a_sound_task_passes_every_probe(source):
    report = check_environment(f"env:{source}:sound")
    assert report.ok, report.table()
    assert report.result("env.oracle_passes").status == "PASS"


def test_hackable_tasks_fail_the_probe_that_finds_them(source):
    report = check_environment(f"env:{source}")
    assert "trusts-agent-file" in report.result("env.write_reward_file").detail
    assert "tests-in-workdir: the tests' text reached the agent" in report.result("env.read_tests").detail
    assert "pays-for-nothing" in report.result("env.do_nothing").detail
    assert report.exit_code == 1


def test_the_command_as_a_user_types_it(source, tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "groupscore", "check", f"env:{source}:sound", "--report", "r.json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "env.determinism" in done.stdout
    assert json.loads((tmp_path / "r.json").read_text())["exit_code"] == 0
    bad = subprocess.run(
        [sys.executable, "-m", "groupscore", "check", "env:nowhere:x"], cwd=tmp_path, capture_output=True, text=True
    )
    assert bad.returncode == 2 and "cannot load target" in bad.stderr


def test_late_links_find_a_platform_that_carries_links_resolving_only_in_the_checker(monkeypatch):
    """The late_links probes pass on a bundled Harbor task whose test reads a hidden expected file, and fail on the
    same task when the session agent carries links as it did before this round (its link confinement taken out)."""
    from groupscore.environments import jails

    assert check_environment("env:harbor:dedupe-emails").result("env.late_links_root").status == "PASS"
    # In /tmp itself: the jail's user namespace cannot pass through pytest's 0700 folders to bind the package.
    with tempfile.TemporaryDirectory(dir="/tmp") as top:
        agent = Path(top) / "agent"
        shutil.copytree(jails.AGENT_DIR, agent, ignore=shutil.ignore_patterns("__pycache__"))
        text = (agent / "state.py").read_text()
        carrying = text.replace("    skipped += confine_links(roots)\n", "")
        assert carrying != text
        (agent / "state.py").write_text(carrying)
        for path in (Path(top), agent, *agent.iterdir()):
            path.chmod(0o755)
        monkeypatch.setattr(jails, "AGENT_DIR", agent)
        report = check_environment("env:harbor:dedupe-emails")
    assert report.result("env.oracle_passes").status == "PASS"  # the patched agent ran: its sessions scored
    assert "dedupe-emails: paid 1" in report.result("env.late_links_root").detail
    assert "dedupe-emails: paid 1" in report.result("env.late_links_cwd").detail
