"""The bundled Harbor tasks through real sessions: each task's oracle (`solution/solve.sh`, run as one shell call)
scores 1, and each of its wrong solutions (plausible mistakes, in data/harbor_wrong/<task>/) scores less."""

from __future__ import annotations

from pathlib import Path

import pytest

from groupscore.environments.harbor import load_harbor

try:
    from groupscore.environments import replay
except ImportError:  # the session core is not there yet
    replay = None

pytestmark = pytest.mark.skipif(replay is None, reason="groupscore.environments.replay is not importable yet")

BUNDLED = Path(__file__).resolve().parents[2] / "environments" / "data" / "harbor"
WRONG = Path(__file__).resolve().parent / "data" / "harbor_wrong"
TASK_IDS = sorted(p.name for p in BUNDLED.iterdir() if (p / "task.toml").is_file())
WRONG_RUNS = [(t, p.name) for t in TASK_IDS for p in sorted((WRONG / t).glob("wrong_*.sh"))]


@pytest.fixture(scope="module")
def tasks(jail_available):
    # Built once per module: the RUN steps run in a jail the first time, then come from the cache.
    return {task.id: task for task in load_harbor(BUNDLED)}


def _reward(task, script: str):
    result = replay(task, [[{"name": "shell", "arguments": {"command": script}}]])
    verdict = result[0] if isinstance(result, tuple) else result
    return verdict


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_the_oracle_scores_one(tasks, task_id):
    task = tasks[task_id]
    verdict = _reward(task, task.metadata["solution_text"])
    assert verdict.reward == 1.0, f"{task_id}: {verdict.status} {verdict.details}"


@pytest.mark.parametrize(("task_id", "wrong"), WRONG_RUNS)
def test_a_wrong_solution_scores_less_than_one(tasks, task_id, wrong):
    verdict = _reward(tasks[task_id], (WRONG / task_id / wrong).read_text())
    assert verdict.status != "infra_error", f"{task_id} {wrong}: {verdict.details}"
    assert verdict.reward < 1.0, f"{task_id} {wrong} passed"


def test_every_task_has_an_oracle_and_two_wrong_solutions():
    assert len(TASK_IDS) >= 20
    for task_id in TASK_IDS:
        assert (BUNDLED / task_id / "solution" / "solve.sh").is_file()
        assert len(list((WRONG / task_id).glob("wrong_*.sh"))) >= 2, task_id
