"""`groupscore check` on the command line: the table, the JSON report and the three exit codes."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from helpers import groupscore

ROOT = Path(__file__).resolve().parents[2]
CHECKS = ROOT / "fixtures" / "checks"


def run_check(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    return groupscore("check", *args, cwd=cwd, env=env, timeout=240)


def test_a_bad_reward_exits_1_with_a_table_and_a_json_report(tmp_path):
    report = tmp_path / "report.json"
    done = run_check(
        f"{CHECKS}/planted_rewards.py:loose_format_reward",
        "--cases",
        str(CHECKS / "math_cases.jsonl"),
        "--report",
        str(report),
    )
    assert done.returncode == 1, done.stderr
    assert "CHECK" in done.stdout and "STATUS" in done.stdout
    row = next(line for line in done.stdout.splitlines() if line.startswith("probe.format_only"))
    assert "FAIL" in row
    assert "1 check(s) failed" in done.stderr
    data = json.loads(report.read_text())
    assert data["exit_code"] == 1 and data["summary"]["FAIL"] == 1
    assert {c["name"] for c in data["checks"]} >= {
        "returns",
        "determinism.repeat",
        "determinism.processes",
        "edge_inputs.no_hang",
        "latency",
        "probe.or_hedge",
    }
    latency = next(c for c in data["checks"] if c["name"] == "latency")["data"]["cases"]
    assert latency["n"] == 7 and 0 <= latency["p50_s"] <= latency["p95_s"] <= latency["p99_s"] <= latency["max_s"]


def test_module_function_target_resolves_from_the_current_directory(tmp_path):
    (tmp_path / "my_rewards.py").write_text(
        "def constant(prompts, completions, **kwargs):\n    return [0.0 for _ in completions]\n"
    )
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps({"prompt": "2+2?", "completion": "4", "answer": "4"}) + "\n")
    done = run_check("my_rewards:constant", "--cases", str(cases), "--report", str(tmp_path / "r.json"), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 FAIL" not in done.stdout and "PASS" in done.stdout


def test_a_bad_cases_file_is_a_checker_error_exit_2(tmp_path):
    cases = tmp_path / "cases.jsonl"
    cases.write_text('{"prompt": "a", "completion": "b", "answer": "1"}\n{"prompt": "a", "completion": \n')
    done = run_check("math", "--cases", str(cases), "--report", str(tmp_path / "r.json"))
    assert done.returncode == 2
    assert "groupscore check: error: bad cases: cases.jsonl:2: invalid JSON" in done.stderr
    assert not (tmp_path / "r.json").exists()


def test_a_missing_reference_field_is_a_checker_error_exit_2(tmp_path):
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps({"prompt": "a", "completion": "b"}) + "\n")
    done = run_check("math", "--cases", str(cases), "--report", str(tmp_path / "r.json"))
    assert done.returncode == 2
    assert "cases.jsonl:1: not a valid math item:" in done.stderr and "answer: Field required" in done.stderr


def test_a_target_that_fails_to_import_is_a_checker_error_exit_2(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("import no_such_module_anywhere\n")
    done = run_check(f"{broken}:reward", "--cases", str(CHECKS / "math_cases.jsonl"), "--report", str(tmp_path / "r"))
    assert done.returncode == 2
    assert "cannot load target" in done.stderr and "ModuleNotFoundError" in done.stderr


def test_unknown_target_names_what_is_accepted(tmp_path):
    done = run_check("nonsense", "--cases", str(CHECKS / "math_cases.jsonl"), "--report", str(tmp_path / "r"))
    assert done.returncode == 2
    assert "expected module:function, a verifier kind" in done.stderr


def test_options_set_the_range_and_the_groups(tmp_path):
    report = tmp_path / "r.json"
    done = run_check(
        f"{CHECKS}/planted_rewards.py:signed_correctness_reward",
        "--cases",
        str(CHECKS / "math_cases.jsonl"),
        "--report",
        str(report),
        "--reward-range=-1,1",
        "--checks",
        "determinism,probes",
        "--timeout",
        "5",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads(report.read_text())
    names = {c["name"] for c in data["checks"]}
    assert "determinism.repeat" in names and "probe.or_hedge" in names and "latency" not in names
    assert data["config"]["reward_range"] == [-1.0, 1.0] and data["config"]["timeout_s"] == 5.0


def test_bad_options_are_checker_errors(tmp_path):
    for option in (["--reward-range", "1"], ["--checks", "determinism,vibes"], ["--timeout", "0"]):
        done = run_check("math", "--cases", str(CHECKS / "math_cases.jsonl"), "--report", str(tmp_path / "r"), *option)
        assert done.returncode == 2, option
        assert done.stderr.startswith("groupscore check: error:"), done.stderr
