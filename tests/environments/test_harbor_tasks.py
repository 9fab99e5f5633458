"""The bundled Harbor tasks through real sessions: each task's oracle (`solution/solve.sh`, run as one shell call)
scores 1, and each of its wrong solutions (plausible mistakes, in data/harbor_wrong/<task>/) scores less. Runs go
four at a time, as a trainer's group would: a session is mostly waiting on its jail."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from groupscore.environments import replay
from groupscore.environments.harbor import load_harbor

BUNDLED = Path(__file__).resolve().parents[2] / "environments" / "data" / "harbor"
WRONG = Path(__file__).resolve().parent / "data" / "harbor_wrong"
TASK_IDS = sorted(p.name for p in BUNDLED.iterdir() if (p / "task.toml").is_file())
WRONG_RUNS = [(t, p.name) for t in TASK_IDS for p in sorted((WRONG / t).glob("wrong_*.sh"))]


@pytest.fixture(scope="module")
def tasks(jail_available):
    # Built once per module: the RUN steps run in a jail the first time, then come from the cache.
    return {task.id: task for task in load_harbor(BUNDLED)}


def _run_all(runs):
    def one(run):
        task, script = run
        return replay(task, [[{"name": "shell", "arguments": {"command": script}}]])

    with ThreadPoolExecutor(4) as pool:
        return list(pool.map(one, runs))


def test_every_oracle_scores_one(tasks):
    verdicts = _run_all([(tasks[t], tasks[t].metadata["solution_text"]) for t in TASK_IDS])
    failed = {t: (v.status, v.details) for t, v in zip(TASK_IDS, verdicts, strict=True) if v.reward != 1.0}
    assert not failed, failed


def test_every_wrong_solution_scores_less_than_one(tasks):
    verdicts = _run_all([(tasks[t], (WRONG / t / w).read_text()) for t, w in WRONG_RUNS])
    paid = {f"{t}/{w}": (v.reward, v.status) for (t, w), v in zip(WRONG_RUNS, verdicts, strict=True) if v.reward >= 1.0}
    masked = [f"{t}/{w}" for (t, w), v in zip(WRONG_RUNS, verdicts, strict=True) if v.status == "infra_error"]
    assert not paid and not masked, (paid, masked)


def test_every_task_has_an_oracle_and_two_wrong_solutions():
    assert len(TASK_IDS) >= 20
    for task_id in TASK_IDS:
        assert (BUNDLED / task_id / "solution" / "solve.sh").is_file()
        assert len(list((WRONG / task_id).glob("wrong_*.sh"))) >= 2, task_id
