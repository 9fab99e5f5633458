"""Config and taskset errors name the file and the field path (or line), so a user can fix them without a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from groupscore.cli import main
from groupscore.train.config import load_config
from groupscore.train.taskset import load_tasks

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "tasks"  # deliberately bad rows
TASKSETS = Path(__file__).resolve().parents[2] / "train" / "tasks"  # the bundled tasksets
VALID = f"""
run_dir: runs/x
model: {{tiny: {{}}}}
taskset: {{train: {TASKSETS}/arith/train.jsonl, eval: {TASKSETS}/arith/heldout.jsonl}}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


def error_of(tmp_path: Path, text: str) -> str:
    with pytest.raises(ValueError) as info:
        load_config(write(tmp_path, text))
    return str(info.value)


def test_valid_config_loads_with_defaults_from_the_field(tmp_path):
    config = load_config(write(tmp_path, VALID + "grpo: {}\n"))
    assert (config.grpo.num_generations, config.grpo.beta, config.grpo.temperature) == (8, 0.04, 0.9)
    assert config.sft is None and config.merge is None  # stages are optional
    assert Path(config.taskset.train.path).is_absolute() and config.run_dir.is_absolute()


def test_taskset_paths_are_relative_to_the_config_file(tmp_path):
    (tmp_path / "data").mkdir()
    config = load_config(
        write(tmp_path, "run_dir: r\nmodel: {tiny: {}}\ntaskset: {train: data/t.jsonl, eval: data/e.jsonl}\n")
    )
    assert config.taskset.train.path == str(tmp_path / "data" / "t.jsonl")


def test_paths_given_by_set_start_at_the_current_directory(tmp_path, monkeypatch):
    # A recipe lives in recipes/; the user types --set paths from where they stand (the README's commands do).
    recipes, work = tmp_path / "recipes", tmp_path / "work"
    recipes.mkdir()
    (work / "standin").mkdir(parents=True)
    config_path = write(recipes, "run_dir: r\nmodel: {path: Qwen/Qwen2.5-0.5B-Instruct}\ntaskset: {train: t.jsonl}\n")
    monkeypatch.chdir(work)
    sets = ["model.path=./standin", "taskset.train=data/train.parquet", "taskset.eval={path: data/d, split: test}"]
    config = load_config(config_path, sets=sets)
    assert config.model.path == str(work / "standin")
    assert config.taskset.train.path == str(work / "data" / "train.parquet")
    assert (config.taskset.eval.path, config.taskset.eval.split) == (str(work / "data" / "d"), "test")
    assert load_config(config_path, sets=["taskset.eval.path=e.csv"]).taskset.eval.path == str(work / "e.csv")
    # a hub id stays a hub id; the file's own paths still start at its folder
    config = load_config(config_path, sets=["model.path=Qwen/Qwen2.5-1.5B-Instruct", "taskset.eval=e.jsonl"])
    assert config.model.path == "Qwen/Qwen2.5-1.5B-Instruct" and config.taskset.train.path == str(recipes / "t.jsonl")


def test_wrong_value_names_the_field_path(tmp_path):
    message = error_of(tmp_path, VALID + "grpo: {num_generations: 1}\n")
    assert "config.yaml" in message and "grpo.num_generations" in message and "greater than or equal to 2" in message


def test_unknown_field_is_refused_with_its_path(tmp_path):
    message = error_of(tmp_path, VALID + "grpo: {num_generation: 8}\n")
    assert "grpo.num_generation" in message and "Extra inputs are not permitted" in message


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (
            "grpo: {num_generation: 8}\n",
            "grpo.num_generation: Extra inputs are not permitted (did you mean 'num_generations'?)",
        ),
        ("sft: {max_step: 3}\n", "sft.max_step: Extra inputs are not permitted (did you mean 'max_steps'?)"),
        ("evall: {samples: 4}\n", "evall: Extra inputs are not permitted (did you mean 'eval'?)"),
        ("grpo: {zzzz: 1}\n", "grpo.zzzz: Extra inputs are not permitted\n"),  # nothing close: no guess
    ],
)
def test_a_misspelt_key_gets_the_closest_field_of_its_own_section(tmp_path, text, line):
    assert line in error_of(tmp_path, VALID + text) + "\n"


def test_several_errors_are_reported_together(tmp_path):
    message = error_of(tmp_path, VALID + "grpo: {beta: -1, temperature: zero}\n")
    assert "grpo.beta" in message and "grpo.temperature" in message


def test_model_needs_exactly_one_source(tmp_path):
    text = VALID.replace("model: {tiny: {}}", "model: {tiny: {}, path: some/model}")
    assert "exactly one of model.path, model.tiny, model.smollm2" in error_of(tmp_path, text)


def test_eval_k_must_fit_the_samples(tmp_path):
    assert "every k must lie in 1..samples (4)" in error_of(tmp_path, VALID + "eval: {samples: 4, k: [1, 8]}\n")


def test_merge_needs_both_cold_start_and_grpo(tmp_path):
    assert "merge blends" in error_of(tmp_path, VALID + "merge: {ratio: 0.7}\n")


def test_grpo_needs_the_held_out_evaluation_that_selects_its_checkpoint(tmp_path):
    assert "selects its checkpoint by held-out pass@1" in error_of(tmp_path, VALID + "grpo: {}\neval: null\n")


def test_composite_reward_is_checked_by_the_service_schema(tmp_path):
    text = VALID + "service: {reward: {components: [{name: ok, verifier: chess}]}}\n"
    assert "service.reward.components.0.verifier" in error_of(tmp_path, text)


def test_not_yaml_and_not_a_mapping(tmp_path):
    assert "not valid YAML" in error_of(tmp_path, "run_dir: [unclosed\n")
    assert "expected a mapping" in error_of(tmp_path, "- just\n- a list\n")


def test_missing_file_is_a_file_not_found_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="config file not found"):
        load_config(tmp_path / "nope.yaml")


def test_cli_prints_one_clear_error_and_exits_2(tmp_path, capsys):
    code = main(["train", str(write(tmp_path, VALID + "grpo: {num_generations: 1}\n")), "--dry-run"])
    err = capsys.readouterr().err
    assert code == 2 and "grpo.num_generations" in err and "Traceback" not in err


def test_taskset_problems_are_all_reported_with_line_numbers():
    with pytest.raises(ValueError) as info:
        load_tasks(FIXTURES / "broken.jsonl")
    message = str(info.value)
    assert "broken.jsonl:2: duplicate id 'ok-1'" in message
    assert "broken.jsonl:3: not JSON" in message
    assert "broken.jsonl:4: missing item" in message
    assert "broken.jsonl:5: item:" in message and "chess" in message
    assert "broken.jsonl:6: item must be an object without a completion" in message
    assert "broken.jsonl:7: item: math.rel_tol" in message


def test_bundled_taskset_loads_with_disjoint_splits():
    train, held = load_tasks(TASKSETS / "arith" / "train.jsonl"), load_tasks(TASKSETS / "arith" / "heldout.jsonl")
    assert len(train) == 240 and len(held) == 60
    assert not {t.prompt for t in train} & {t.prompt for t in held}  # held-out prompts are never trained on
