"""groupscore's verl agent loop (client/verl_agent.py), run by verl's own AgentLoopWorker against a real service.

verl lives in a venv of its own (.venv-verl, `make verl-venv`: verl 0.9.1, CPU torch and groupscore-client on Python
3.11, as a verl user has them); tests/client/data/verl_agent_probe.py runs there, with this checkout's client/ and
schema/ on its path ahead of the installed copy, and prints what verl made of two batches; this module checks it.
The LLM server is scripted (token ids of a tiny byte-level tokenizer): no GPU rollout and no model run here.

Cost: about 20 s on a quiet machine (importing torch and verl in the child ~5 s, the client's retries against the
unreachable service ~10 s); 50-75 s was seen here with the machine's load average near 30. Slow tier.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest
from distributions import CLIENT_DIST, ROOT

DATA = Path(__file__).resolve().parent / "data"
VERL_PYTHON = ROOT / ".venv-verl" / "bin" / "python"

pytestmark = [pytest.mark.slow, pytest.mark.service(workers=1, env={"GROUPSCORE_TASK_DIRS": str(DATA)})]


@pytest.fixture(scope="module")
def probe(url, tmp_path_factory) -> dict:
    if not VERL_PYTHON.exists():
        pytest.skip(
            "NO VERL VENV: the verl agent loop is untested here; `make verl-venv` makes .venv-verl (make test does)"
        )
    from groupscore.service.embedded import free_port

    work = tmp_path_factory.mktemp("verl")
    package = work / "path" / "groupscore"  # the working tree's client, as groupscore-client installs it
    package.mkdir(parents=True)
    shutil.copy(CLIENT_DIST / "groupscore" / "__init__.py", package / "__init__.py")
    for folder in ("client", "schema"):
        (package / folder).symlink_to(ROOT / folder)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV",) and "GROUPSCORE" not in k}
    env["PYTHONPATH"] = str(work / "path")
    dead = f"http://127.0.0.1:{free_port()}"
    result = subprocess.run(
        [str(VERL_PYTHON), str(DATA / "verl_agent_probe.py"), url, dead],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
    report = json.loads(result.stdout.strip().splitlines()[-1])  # verl prints lines of its own before
    report["stderr"] = result.stderr
    report["metrics"] = httpx.get(f"{url}/metrics").text
    return report


def rows(probe: dict, case: str) -> list[dict]:
    return [row for batch in probe["batches"] for row in batch if row["case"] == case]


def test_the_loop_ran_is_this_checkouts(probe):
    assert Path(probe["module"]).resolve() == (ROOT / "client" / "verl_agent.py").resolve()


def test_a_scripted_trajectory_that_solves_count_errors_gets_reward_1(probe):
    group = rows(probe, "solve")
    assert len(group) == 2  # a GRPO group: two sessions of one task, side by side in one batch
    for row in group:
        assert row["reward"] == 1.0 and row["status"] == "correct" and row["infra_error"] == 0
        assert row["tool_calls"] == 1 and row["num_turns"] == 3  # the prompt, a tool call, a final message
        # The model's tokens are trained on; the tool's output (the count, 3) and the template around it are not.
        assert "grep -c ' ERROR ' app.log" in row["kept"] and row["kept"].endswith("errors.txt.<|im_end|>")
        assert row["masked"] == "<|im_start|>tool\n3\n<|im_end|>\n<|im_start|>assistant\n"
        assert 0 < row["mask_ones"] < row["response_tokens"]


def test_a_wrong_answer_gets_reward_0_and_is_trained_on(probe):
    (row,) = rows(probe, "wrong")
    assert row["reward"] == 0.0 and row["status"] == "incorrect" and row["infra_error"] == 0
    assert row["mask_ones"] > 0 and "echo 7 > errors.txt" in row["kept"]


def test_a_second_user_turn_comes_when_the_model_ends_its_first_and_is_masked(probe):
    (row,) = rows(probe, "two-turns")
    assert row["reward"] == 1.0 and row["status"] == "correct"
    assert row["tool_calls"] == 2 and row["num_turns"] == 6  # the prompt, four model turns, the second user turn
    assert "Now append the line 2 to a.txt." in row["masked"]
    assert "echo 1 > a.txt" in row["kept"] and "echo 2 >> a.txt" in row["kept"] and "append" not in row["kept"]


def test_a_session_that_cannot_start_is_masked_whole_and_counted(probe):
    (row,) = rows(probe, "no-env")
    assert row["status"] == "infra_error" and row["infra_error"] == 1
    assert row["reward"] == 0.0 and row["mask_ones"] == 0 and row["response_tokens"] > 1 and row["kept"] == ""
    assert "could not start" in row["masked"]  # the model was told, and none of it is trained on
    assert "groupscore-test-no-such-env" in probe["stderr"] and "masked as infra_error" in probe["stderr"]


def test_an_unreachable_service_is_masked_and_counted(probe):
    (row,) = rows(probe, "unreachable")
    assert row["status"] == "infra_error" and row["infra_error"] == 1
    assert row["reward"] == 0.0 and row["mask_ones"] == 0 and row["response_tokens"] == 1
    assert "no session opened" in probe["stderr"]


def test_a_task_the_service_does_not_have_fails_the_batch_never_masked(probe):
    assert probe["unknown"].startswith("groupscore cannot open 'demo:no-such-task'")
    assert "HTTP 422" in probe["unknown"] and "no task 'no-such-task'" in probe["unknown"]


def test_the_worker_counts_its_masked_episodes_and_verl_logs_them_per_sample(probe):
    assert probe["infra_count"] == [2, 6]
    for batch in probe["batches"]:
        for row in batch:
            assert row["reward_extra_keys"] == ["groupscore_infra_error", "groupscore_tool_calls", "groupscore_turns"]


def test_every_session_the_loop_opened_is_closed(probe):
    counts = {
        line.split()[0]: float(line.split()[1])
        for line in probe["metrics"].splitlines()
        if line.startswith("groupscore_sessions_")
    }
    assert counts["groupscore_sessions_opened_total"] == 5  # solve x2, no-env, wrong, two-turns; none at the dead URL
    assert counts["groupscore_sessions_open"] == 0
    assert counts["groupscore_sessions_closed_total"] == 5 and counts["groupscore_sessions_reaped_total"] == 0
