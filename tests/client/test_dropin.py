"""Drop-in everywhere: adapters configured the way each trainer configures rewards (TRL one request per batch for
several components, verl's reward_kwargs, OpenRLHF's reward file), SandboxFusion's ping and "not supported" answer,
and the command line as a Unix tool (suffix-chosen languages, stdin, closed pipes, --verifier, "did you mean", the
check preflight and its progress line)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from helpers import groupscore

from groupscore.client import verl
from groupscore.client.adapters import trl_reward_funcs, trl_reward_weights
from groupscore.client.http import ScoreClient
from groupscore.client.openrlhf import openrlhf_reward_func

ROOT = Path(__file__).resolve().parents[2]
SPEC = {
    "components": [
        {"name": "correct", "weight": 1.0},
        {"name": "format", "weight": 0.5, "verifier": "format", "params": {"tags": ["answer"]}},
        {"name": "short", "weight": 0.5, "verifier": "length", "params": {"unit": "chars", "max": 100}},
    ]
}


class CountingClient(ScoreClient):
    """Answers /v1/score locally and counts requests: correct for `\\boxed{<answer>}`, every component 1 or 0."""

    def __init__(self) -> None:  # no HTTP clients
        self.urls, self.token, self.requests = ["http://fake"], None, 0

    def score_raw(self, items, reward=None, deadline_s=None):
        self.requests += 1
        out = []
        for item in items:
            right = item["completion"] == f"\\boxed{{{item.get('answer')}}}"
            components = {"correct": float(right), "format": 1.0, "short": 0.0}
            out.append(
                {
                    "id": item["id"],
                    "reward": float(right),
                    "status": "correct" if right else "incorrect",
                    "components": components,
                }
            )
        return out


# -- TRL ---------------------------------------------------------------------------------------------------------


def test_trl_components_as_separate_reward_functions_cost_one_request_per_batch():
    client = CountingClient()
    funcs = trl_reward_funcs(client, SPEC)
    batch = {"prompts": ["q", "q"], "completions": ["\\boxed{4}", "\\boxed{5}"], "answer": ["4", "4"]}
    assert [f(**batch) for f in funcs] == [[1.0, 0.0], [1.0, 1.0], [0.0, 0.0]]
    assert [f.__name__ for f in funcs] == ["groupscore_math_correct", "groupscore_math_format", "groupscore_math_short"]
    assert client.requests == 1
    [f(**{**batch, "completions": ["\\boxed{4}", "\\boxed{4}"]}) for f in funcs]  # the next batch: one more
    assert client.requests == 2
    assert trl_reward_weights(SPEC) == [0.5, 0.25, 0.25]


def test_trl_async_components_gathered_together_share_one_request():
    sent = []

    class AsyncCounting:
        async def score_raw(self, items, reward=None, deadline_s=None):
            sent.append(len(items))
            await asyncio.sleep(0.05)
            return CountingClient().score_raw(items)

        async def aclose(self):
            pass

    funcs = trl_reward_funcs(["http://fake"], SPEC, asynchronous=True)
    scorer = funcs[0].__closure__  # the shared scorer is reached through the closures; swap its per-loop clients
    shared = next(c.cell_contents for c in scorer if hasattr(c.cell_contents, "clients"))
    shared.clients.get = lambda: _ready(AsyncCounting())
    batch = {"prompts": ["q"], "completions": ["\\boxed{4}"], "answer": ["4"]}

    async def step():
        return await asyncio.gather(*(f(**batch) for f in funcs))

    assert asyncio.run(step()) == [[1.0], [1.0], [0.0]] and sent == [1]


async def _ready(value):
    return value


def test_trl_reward_weights_refuse_a_gate_and_keep_clipped_sum_weights():
    with pytest.raises(ValueError, match="gate"):
        trl_reward_weights({"components": [{"name": "a"}, {"name": "b", "gate": True}]})
    spec = {"components": [{"name": "a", "weight": 0.7}, {"name": "b", "weight": 0.3}], "normalize": "clipped_sum"}
    assert trl_reward_weights(spec) == [0.7, 0.3]


# -- verl ---------------------------------------------------------------------------------------------------------


@pytest.fixture
def fresh_verl(monkeypatch):
    monkeypatch.setattr(verl, "_options", {})
    monkeypatch.setattr(verl, "_clients", {})
    monkeypatch.delenv("GROUPSCORE_URL", raising=False)


def test_verl_url_and_token_come_from_reward_kwargs_and_are_never_ignored(fresh_verl):
    options = verl.options_for({"url": ["http://10.0.0.5:8000", "http://10.0.0.6:8000"], "token": "t"})
    client = verl.client_for(options)
    assert client.urls == ["http://10.0.0.5:8000", "http://10.0.0.6:8000"] and client.token == "t"
    with pytest.raises(TypeError, match=r"'urll'.*did you mean 'url'"):
        verl.compute_score("openai/gsm8k", "x", "1", urll="http://10.0.0.5:8000")
    # verl's reward loop adds its reward model's router and tokenizer to the call: accepted, unused
    assert verl._ours({"url": "http://a:1", "reward_router_address": None, "reward_model_tokenizer": None}) == {
        "url": "http://a:1"
    }
    with pytest.raises(ValueError, match=r"reward_kwargs\.url"):
        verl.compute_score("openai/gsm8k", "x", "1", url="10.0.0.5:8000")


def test_verl_kind_comes_from_an_explicit_overridable_table_never_a_substring(fresh_verl):
    assert verl.verl_item("openai/gsm8k", "x", "1", None)["verifier"] == "math"
    assert verl.verl_item("taco", "x", {"inputs": [[1]], "outputs": [[1]], "fn_name": "f"}, None)["verifier"] == "code"
    with pytest.raises(ValueError, match=r"data_source 'my_code_apps_set'.*data_source_kinds"):
        verl.verl_item("my_code_apps_set", "x", "1", None)  # "apps" and "code" inside it mean nothing
    options = verl.options_for(
        {"data_source_kinds": {"openai/gsm8k": "code", "mine": "math"}, "options": {"strict": 1}}
    )
    assert verl.verl_item("mine", "x", "1", None, options=options) == {
        "verifier": "math",
        "completion": "x",
        "answer": "1",
        "strict": 1,
    }
    assert verl.verl_item("openai/gsm8k", "x", {"tests": []}, None, options=options)["verifier"] == "code"
    assert "strict" not in verl.verl_item("openai/gsm8k", "x", {"tests": []}, None, options=options)
    with pytest.raises(ValueError, match="did you mean 'strict'"):
        verl.options_for({"options": {"strikt": True}})


# -- OpenRLHF -------------------------------------------------------------------------------------------------------


def test_openrlhf_reward_file_mode_scores_the_response_after_the_prompt():
    client = CountingClient()
    reward_func = openrlhf_reward_func(client, reward=SPEC)
    out = reward_func(["<s>Q?\\boxed{4}", "Q?\\boxed{3}"], ["Q?", "Q?"], ["4", "4"])
    rewards = out["rewards"].tolist() if hasattr(out["rewards"], "tolist") else out["rewards"]
    assert rewards == [1.0, 0.0] and client.requests == 1
    assert list(out["extra_logs"]) == ["correct", "invalid", "infra_error", "format", "short"]


# -- SandboxFusion ------------------------------------------------------------------------------------------------


def test_sandbox_fusion_ping_and_a_language_the_sandbox_does_not_run(url):
    assert httpx.get(f"{url}/v1/ping").json() == "pong"
    answer = httpx.post(f"{url}/run_code", json={"code": "#eval 1", "language": "lean"}, timeout=30).json()
    assert answer["status"] == "Failed" and answer["run_result"]["return_code"] == 127
    assert "not supported" in answer["run_result"]["stderr"]


# -- the command line ---------------------------------------------------------------------------------------------


def test_sandbox_run_takes_the_language_from_the_suffix_and_stdin_from_a_pipe(tmp_path):
    program = tmp_path / "rev.c"
    program.write_text('#include <stdio.h>\nint main(){char s[64];scanf("%63s",s);printf("C:%s\\n",s);return 0;}\n')
    out = groupscore("sandbox", "run", str(program), input="hello\n", timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["stdout"] == "C:hello\n"
    script = tmp_path / "echo.py"
    script.write_text("print(input()[::-1])\n")
    out = groupscore("sandbox", "run", str(script), "--stdin", "-", input="abc\n", timeout=120)
    assert json.loads(out.stdout)["stdout"] == "cba\n"
    out = groupscore("sandbox", "run", str(tmp_path / "x.rb2"), timeout=60)
    assert out.returncode == 2 and "--language" in out.stderr


def test_a_closed_output_pipe_ends_the_command_quietly(tmp_path):
    script = tmp_path / "many.py"
    script.write_text("for i in range(200000): print(i)\n")
    shell = f"{sys.executable} -m groupscore sandbox run {script} | head -c 10; exit ${{PIPESTATUS[0]}}"
    done = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, timeout=120)
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr
    assert done.returncode in (0, 141)


def test_score_reads_stdin_writes_stdout_and_takes_a_kind_for_bare_lines():
    lines = '{"id": 1, "completion": "\\\\boxed{4}", "answer": 4}\n'
    out = groupscore("score", "-", "--no-progress", "--verifier", "math", input=lines, timeout=120)
    assert out.returncode == 0 and json.loads(out.stdout)["status"] == "correct"
    out = groupscore("score", "-", "--no-progress", input=lines, timeout=120)
    reason = json.loads(out.stdout)["reason"]
    assert out.returncode == 1 and "verifier: missing" in reason and "math, code" in reason
    out = groupscore("score", "-", "--verifier", "mth", input=lines, timeout=60)
    assert out.returncode == 2 and "did you mean 'math'" in out.stderr


def test_misspelt_commands_and_options_get_a_did_you_mean():
    out = groupscore("serv", timeout=60)
    assert out.returncode == 2 and "did you mean serve" in out.stderr
    out = groupscore("check", "math", "--cases", "x.jsonl", "--reward-rnge", "0,1", timeout=60)
    assert out.returncode == 2 and "did you mean --reward-range" in out.stderr


def test_serve_help_describes_every_option_and_the_settings_with_defaults():
    out = groupscore("serve", "--help", timeout=60).stdout
    for option, default in (
        ("--host", "127.0.0.1"),
        ("--port", "8000"),
        ("--workers", "usable core"),
        ("--token", "no auth"),
    ):
        line = " ".join(out.split(option, 2)[-1].split()[:40])
        assert default in line, (option, line)
    assert "GROUPSCORE_MAX_ITEMS (default 16384)" in out and "GROUPSCORE_DEADLINE_S (default 300.0)" in out


def test_check_compares_the_signature_with_the_case_columns_before_running(tmp_path):
    module = tmp_path / "rewards.py"
    module.write_text(
        "def accuracy(prompts, completions, ground_truth, **kwargs):\n    return [1.0] * len(completions)\n"
    )
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(json.dumps({"prompt": "p", "completion": "c", "answer": str(i)}) + "\n" for i in range(3)))
    out = groupscore("check", f"{module}:accuracy", "--cases", str(cases), timeout=120, cwd=tmp_path)
    assert out.returncode == 2 and out.stdout == ""
    (line,) = out.stderr.strip().splitlines()
    assert "needs column `ground_truth`; cases have prompt, completion, answer" in line


def test_check_prints_a_progress_line_per_group_on_a_large_case_file(tmp_path):
    module = tmp_path / "rewards.py"
    module.write_text("def constant(prompts, completions, **kwargs):\n    return [0.0] * len(completions)\n")
    cases = tmp_path / "cases.jsonl"
    cases.write_text(
        "".join(json.dumps({"prompt": "p", "completion": f"c{i}", "answer": "1"}) + "\n" for i in range(250))
    )
    env = {**os.environ, "HYPOTHESIS_MAX_EXAMPLES": "5"}
    out = groupscore(
        "check",
        f"{module}:constant",
        "--cases",
        str(cases),
        "--checks",
        "determinism",
        "--report",
        str(tmp_path / "r.json"),
        timeout=300,
        cwd=tmp_path,
        env=env,
    )
    progress = [
        line for line in out.stderr.splitlines() if line.startswith("groupscore check: ") and " on 250 cases" in line
    ]
    assert [line.split()[2] for line in progress][:2] == ["returns", "determinism"], out.stderr


def test_openrlhf_get_reward_scores_with_the_services_default_spec():
    from groupscore.service.embedded import start_embedded
    from groupscore.service.settings import Settings, SettingsError

    with pytest.raises((SettingsError, ValueError), match=r"openrlhf_reward|components"):
        Settings(openrlhf_reward='{"components": []}')
    spec = json.dumps(
        {"components": [{"name": "correct"}, {"name": "fmt", "verifier": "format", "params": {"tags": ["answer"]}}]}
    )
    with start_embedded(workers=1, env={"GROUPSCORE_OPENRLHF_REWARD": spec}) as url:
        body = {"query": ["Q?<answer>\\boxed{4}</answer>"], "prompts": ["Q?"], "labels": ["4"]}
        answer = httpx.post(f"{url}/get_reward", json=body, timeout=60).json()
    assert answer["rewards"] == [1.0] and answer["extra_logs"]["fmt"] == [1.0]


def test_misspelt_field_and_setting_names_get_the_closest_known_one(tmp_path):
    from groupscore.variables import unknown_variables

    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"components": [{"name": "correct", "wieght": 1.0}]}))
    item = '{"id": 1, "verifier": "math", "completion": "\\\\boxed{4}", "anwser": "4"}\n'
    out = groupscore("score", "-", "--no-progress", "--reward", str(spec), input=item, timeout=60)
    assert out.returncode == 2 and "did you mean 'weight'" in out.stderr
    out = groupscore("score", "-", "--no-progress", input=item, timeout=60)
    assert "math.anwser: Extra inputs are not permitted (did you mean 'answer'?)" in json.loads(out.stdout)["reason"]
    misspelt = "GROUPSCORE_" + "WORKES"  # built, so that the tree names no variable that is not a setting
    warnings = unknown_variables({misspelt: "4", "GROUPSCORE_PORT": "1", "GROUPSCORE_FULL_PIN_CHECK": "1"})
    assert warnings == [
        f"warning: {misspelt} is not a groupscore setting and is ignored; did you mean GROUPSCORE_WORKERS?"
    ]


def test_the_readme_trl_example_trains_with_its_three_rewards_and_weights(url, tmp_path):
    """examples/trl_grpo.py --train, as written but for the service's address, on a tiny random Llama saved to a
    folder (the example's MODEL_OR_PATH), two GRPO steps on CPU."""
    pytest.importorskip("trl")
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tokens = ["<pad>", "<s>", "</s>", "<unk>", *"0123456789", "\\", "b", "o", "x", "e", "d", "{", "}", " ", "?"]
    core = Tokenizer(models.WordLevel({t: i for i, t in enumerate(tokens)}, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(pattern="", behavior="isolated")
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="<pad>", bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokens),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=128,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    model_dir = tmp_path / "tiny"
    LlamaForCausalLM(config).save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    example = tmp_path / "trl_grpo.py"
    example.write_text((ROOT / "examples" / "trl_grpo.py").read_text().replace("http://127.0.0.1:8000", url))
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    before = _score_requests(url)
    done = subprocess.run(
        [sys.executable, str(example), "--train", str(model_dir)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    logged = done.stdout.strip().splitlines()[-1]  # the first step's reward logs: each function on its own, and the sum
    for name in ("groupscore_math_correct", "groupscore_math_format", "groupscore_math_short"):
        assert f"'rewards/{name}/mean'" in logged, logged
    # Two steps generate at most two batches; three reward functions that each sent their own would need six.
    assert 1 <= _score_requests(url) - before <= 2


def _score_requests(url: str) -> float:
    """POST /v1/score requests the service has answered, from its /metrics."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("groupscore_requests_total{") and 'endpoint="/v1/score"' in line
    )
