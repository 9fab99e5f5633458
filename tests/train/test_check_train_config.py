"""`groupscore check TRAIN.yaml --cases ...`: every reward a training config pays (its composite service reward, each
user reward function) is checked before training, each with its own table; the worst result is the exit code."""

from __future__ import annotations

import json
from pathlib import Path

from groupscore.cli import main

CASES = Path(__file__).resolve().parents[2] / "fixtures" / "checks" / "math_cases.jsonl"
RECIPES = Path(__file__).resolve().parents[2] / "recipes"


def write_config(tmp_path: Path, rewards_py: str | None) -> Path:
    text = (
        "run_dir: r\nmodel: {tiny: {}}\ntaskset: {train: a.jsonl, eval_split: 0.1}\n"
        "service:\n  reward:\n    components:\n      - {name: correct, weight: 1.0}\n"
        "      - {name: boxed, verifier: format, weight: 0.2, params: {regex: '(?s).*boxed.*'}}\n"
    )
    if rewards_py is not None:
        (tmp_path / "my_rewards.py").write_text(rewards_py)
        text += "rewards:\n  functions:\n    - {function: 'my_rewards.py:score'}\n"
    path = tmp_path / "train.yaml"
    path.write_text(text)
    return path


def check(config: Path, tmp_path: Path, capsys) -> tuple[int, str, dict]:
    report = tmp_path / "report.json"
    code = main(
        ["check", str(config), "--cases", str(CASES), "--report", str(report), "--checks", "determinism,edge_inputs"]
    )
    out = capsys.readouterr().out
    return code, out, json.loads(report.read_text())


def test_the_service_reward_and_each_function_get_a_table_and_the_report_lists_both(tmp_path, capsys):
    fine = "def score(prompts, completions, **kwargs):\n    return [min(1.0, len(c) / 100) for c in completions]\n"
    code, out, report = check(write_config(tmp_path, fine), tmp_path, capsys)
    assert code == 0, out
    assert "== train.yaml: service.reward (correct, boxed)" in out and "my_rewards.py:score" in out
    assert [t["exit_code"] for t in report["targets"]] == [0, 0] and report["exit_code"] == 0


def test_a_broken_reward_function_fails_the_config(tmp_path, capsys):
    crashes = "def score(prompts, completions, **kwargs):\n    return [1.0 / len(c) for c in completions]\n"
    code, _, report = check(write_config(tmp_path, crashes), tmp_path, capsys)
    assert code == 1 and report["targets"][0]["exit_code"] == 0 and report["targets"][1]["exit_code"] == 1
    assert "ZeroDivisionError" in json.dumps(report["targets"][1])


def test_the_tutor_recipe_can_be_checked_as_it_stands(tmp_path, capsys):
    code, out, report = check(RECIPES / "tutor-qwen2.5-0.5b.yaml", tmp_path, capsys)
    assert len(report["targets"]) == 2 and "tutor_rewards.py:worked_steps" in out
    # the math cases have no FINAL line, so the gated service reward pays 0 throughout: the checks still run clean
    assert code in (0, 1) and all(t["exit_code"] != 2 for t in report["targets"]), out


def test_a_config_that_names_no_reward_says_what_to_check_instead(tmp_path, capsys):
    path = tmp_path / "bare.yaml"
    path.write_text("run_dir: r\nmodel: {tiny: {}}\ntaskset: {train: a.jsonl, eval_split: 0.1}\n")
    code = main(["check", str(path), "--cases", str(CASES), "--report", str(tmp_path / "r.json")])
    err = capsys.readouterr().err
    assert code == 2 and "names no reward to check" in err and "groupscore check math" in err
