"""Each adapter's exact wire shape against a real loopback server: TRL, verl, OpenRLHF /get_reward, SandboxFusion /run_code."""

from __future__ import annotations

import asyncio
import base64
import inspect

import pytest

from groupscore.client import verl
from groupscore.client.adapters import compute_score, compute_score_batch, trl_reward_func

pytestmark = pytest.mark.service(workers=2)  # the `url` and `http` fixtures (conftest.py)


FORMAT_SPEC = {
    "components": [
        {"name": "correct", "weight": 1.0},
        {"name": "format", "weight": 0.2, "verifier": "format", "params": {"tags": ["think", "answer"]}},
    ]
}


# -- TRL -------------------------------------------------------------------------------------------------------------------


def _trl_batch():
    # What GRPOTrainer passes: conversational completions, dataset columns repeated per completion, and its hooks.
    completions = [
        [{"role": "assistant", "content": "<think>2+2</think><answer>\\boxed{4}</answer>"}],
        [{"role": "assistant", "content": "\\boxed{4}"}],
        [{"role": "assistant", "content": "<think>hm</think><answer>\\boxed{5}</answer>"}],
        [{"role": "assistant", "content": "```python\nprint(1)\n```"}],
    ]
    prompts = [[{"role": "user", "content": "2+2?"}]] * 3 + [[{"role": "user", "content": "print 1"}]]
    columns = {
        "answer": [4, 4, 4, None],
        "verifier": ["math", "math", "math", "code"],
        "tests": [None, None, None, '[{"type": "stdio", "stdout": "1"}]'],
    }
    return prompts, completions, columns


def test_trl_reward_function_has_grpo_signature_and_returns_none_where_it_does_not_apply(url):
    logged: list[tuple[str, float]] = []
    reward = trl_reward_func(url, verifier="math", reward=FORMAT_SPEC, name="math_fmt")
    assert reward.__name__ == "math_fmt"
    prompts, completions, columns = _trl_batch()
    rewards = reward(
        prompts=prompts,
        completions=completions,
        completion_ids=[[1]] * 4,
        trainer_state=None,
        log_extra=lambda *a: None,
        log_metric=lambda name, value: logged.append((name, value)),
        **columns,
    )
    assert rewards[:3] == pytest.approx([1.0, 1.0 / 1.2, 0.2 / 1.2]) and rewards[3] is None
    metrics = dict(logged)
    assert metrics["math_fmt/correct"] == pytest.approx(2 / 3)
    assert metrics["math_fmt/format"] == pytest.approx(2 / 3)
    assert metrics["math_fmt/error_rate"] == 0.0
    code_reward = trl_reward_func(url, verifier="code")
    assert code_reward(prompts=prompts, completions=completions, **columns) == [None, None, None, 1.0]


def test_trl_async_reward_function_and_single_component(url):
    reward = trl_reward_func(url, verifier="math", reward=FORMAT_SPEC, component="format", asynchronous=True)
    assert inspect.iscoroutinefunction(reward)
    prompts, completions, columns = _trl_batch()
    rewards = asyncio.run(reward(prompts=prompts, completions=completions, **columns))
    assert rewards == [1.0, 0.0, 1.0, None]
    with pytest.raises(ValueError, match="not in the reward spec"):
        trl_reward_func(url, reward=FORMAT_SPEC, component="nope")


def test_trl_plain_text_completions_and_renamed_columns(url):
    reward = trl_reward_func(url, verifier="math", columns={"answer": "solution"}, kind_column=None)
    assert reward(prompts=["q", "q"], completions=["\\boxed{3}", "\\boxed{2}"], solution=["3", "3"]) == [1.0, 0.0]


# -- verl --------------------------------------------------------------------------------------------------------------


def test_verl_compute_score_math_and_code(url, monkeypatch):
    monkeypatch.setenv("GROUPSCORE_URL", url)
    monkeypatch.setattr(verl, "_clients", {})  # a client for this module's service, not one an earlier test made
    assert compute_score("openai/gsm8k", "so #### \\boxed{72}", "72", {"split": "train"}) == {
        "score": 1.0,
        "acc": 1.0,
        "infra_error": 0.0,
    }
    assert compute_score("openai/gsm8k", "\\boxed{71}", "72")["score"] == 0.0
    code = "```python\nprint(sum(map(int, input().split())))\n```"
    truth = '{"inputs": ["1 2\\n", "5 5\\n"], "outputs": ["3\\n", "10\\n"]}'
    assert compute_score("codecontests", code, truth, None) == {"score": 1.0, "acc": 1.0, "infra_error": 0.0}
    batch = compute_score_batch(["lighteval/MATH", "codecontests"], ["\\boxed{\\frac{1}{2}}", code], ["0.5", truth])
    assert [b["score"] for b in batch] == [1.0, 1.0]


# -- OpenRLHF ------------------------------------------------------------------------------------------------------------


def test_openrlhf_get_reward_wire_shape(http):
    prompts = ["<user>2+2?</user>", "<user>1+1?</user>", "<user>3*3?</user>"]
    responses = ["\\boxed{4}", "\\boxed{3}", "\\boxed{9}"]
    body = {"query": [p + r for p, r in zip(prompts, responses)], "prompts": prompts, "labels": ["4", "2", "9"]}
    answer = http.post("/get_reward", json=body)
    assert answer.status_code == 200
    payload = answer.json()
    assert set(payload) == {"rewards", "scores", "extra_logs"}
    assert payload["rewards"] == [1.0, 0.0, 1.0] and payload["scores"] == [1.0, 0.0, 1.0]
    assert payload["extra_logs"]["correct"] == [1.0, 0.0, 1.0]
    assert all(len(v) == 3 for v in payload["extra_logs"].values())
    # Labels may carry a whole item's reference fields; extra OpenRLHF fields are ignored.
    code_label = '{"verifier": "code", "tests": [{"type": "stdio", "stdin": "", "stdout": "hi"}]}'
    mixed = {
        "query": ["Say hi.```python\nprint('hi')\n```"],
        "prompts": ["Say hi."],
        "labels": [code_label],
        "stop_reason": ["stop"],
    }
    assert http.post("/get_reward", json=mixed).json()["rewards"] == [1.0]
    assert http.post("/get_reward", json={"query": ["a", "b"], "prompts": ["", ""], "labels": ["1"]}).status_code == 422


def test_openrlhf_request_without_prompts_is_422_not_the_prompts_box_scored(http):
    # The question itself holds a boxed 4; without prompts the service used to score the whole query and pay 1.0.
    query = ["Solve: is it \\boxed{4}? Answer: I do not know."]
    answer = http.post("/get_reward", json={"query": query, "labels": ["4"]})
    assert answer.status_code == 422
    assert any(problem["field"] == "body.prompts" for problem in answer.json()["detail"])


def test_openrlhf_request_without_labels_is_422_not_silent_zeros(http):
    body = {"query": ["Q: 2+2? \\boxed{4}"], "prompts": ["Q: 2+2? "]}
    answer = http.post("/get_reward", json=body)
    assert answer.status_code == 422
    assert any(problem["field"] == "body.labels" for problem in answer.json()["detail"])
    # OpenRLHF sends null labels when --label_key is not set: as useless as none, and said so.
    nulls = http.post("/get_reward", json={**body, "labels": [None]})
    assert nulls.status_code == 422 and "--label_key" in nulls.text and "'answer'" in nulls.text
    assert http.post("/get_reward", json={**body, "labels": [""]}).status_code == 422
    # Labels of another kind that lack what that kind needs: a 422 naming the field, not an error verdict per sample.
    code = http.post("/get_reward", json={**body, "labels": ['{"verifier": "code", "language": "python"}']})
    assert code.status_code == 422 and "'tests' or 'hidden_tests'" in code.text


def test_openrlhf_prompt_not_in_query_is_422_and_padding_before_it_is_fine(http):
    mismatch = {"query": ["<pad>Q: 2+2? \\boxed{4}"], "prompts": ["Q: 3+3? "], "labels": ["4"]}
    answer = http.post("/get_reward", json=mismatch)
    assert answer.status_code == 422 and "does not contain its prompt" in answer.text
    # Left padding decoded into the query (OpenRLHF decodes whole sequences) does not hide the prompt.
    padded = {
        "query": ["<pad><pad>Q: 2+2 = \\boxed{5}? A: \\boxed{4}"],
        "prompts": ["Q: 2+2 = \\boxed{5}? A: "],
        "labels": ["4"],
    }
    assert http.post("/get_reward", json=padded).json()["rewards"] == [1.0]


# -- SandboxFusion --------------------------------------------------------------------------------------------------------


def _run_code(http, **fields):
    # The request verl's sandbox_fusion reward sends.
    body = {
        "compile_timeout": 10,
        "run_timeout": 5,
        "memory_limit_MB": 256,
        "stdin": "",
        "language": "python",
        "files": {},
        "fetch_files": [],
        **fields,
    }
    answer = http.post("/run_code", json=body)
    assert answer.status_code == 200
    payload = answer.json()
    assert set(payload) == {"status", "message", "compile_result", "run_result", "executor_pod_name", "files"}
    return payload


def test_sandbox_fusion_run_code_python_success_and_failure(http):
    ok = _run_code(http, code="print(input()[::-1])", stdin="abc\n")
    assert ok["status"] == "Success" and ok["compile_result"] is None
    assert ok["run_result"]["status"] == "Finished" and ok["run_result"]["return_code"] == 0
    assert ok["run_result"]["stdout"] == "cba\n" and isinstance(ok["run_result"]["execution_time"], float)
    failed = _run_code(http, code="import sys; print('x', file=sys.stderr); sys.exit(4)")
    assert failed["status"] == "Failed" and failed["run_result"]["return_code"] == 4
    assert "x" in failed["run_result"]["stderr"]
    slow = _run_code(http, code="while True: pass", run_timeout=1)
    assert slow["status"] == "Failed" and slow["run_result"]["status"] == "TimeLimitExceeded"


def test_sandbox_fusion_run_code_is_isolated(http):
    escaped = _run_code(
        http, code="import socket\ns = socket.create_connection(('127.0.0.1', 80), timeout=1)\nprint('connected')"
    )
    assert escaped["status"] == "Failed" and "connected" not in escaped["run_result"]["stdout"]
    secret = _run_code(http, code="print(open('/etc/shadow').read())")
    assert secret["status"] == "Failed"


def test_sandbox_fusion_cpp_compile_files_and_languages(http):
    built = _run_code(
        http, language="cpp", code='#include <cstdio>\nint main(){int a;scanf("%d",&a);printf("%d\\n",a*3);}', stdin="7"
    )
    assert built["status"] == "Success" and built["compile_result"]["status"] == "Finished"
    assert built["run_result"]["stdout"] == "21\n"
    broken = _run_code(http, language="cpp", code="int main( {")
    assert broken["status"] == "Failed" and broken["run_result"] is None
    assert broken["compile_result"]["return_code"] != 0
    data = base64.b64encode(b"41").decode()
    fetched = _run_code(
        http,
        code="n = int(open('in.txt').read())\nopen('out.txt', 'w').write(str(n + 1))",
        files={"in.txt": data},
        fetch_files=["out.txt"],
    )
    assert fetched["status"] == "Success" and base64.b64decode(fetched["files"]["out.txt"]) == b"42"
    # A language the sandbox does not run: SandboxFusion's own answer for a missing toolchain (Failed, 127), which its
    # client does not retry, unlike SandboxError.
    other = _run_code(http, language="lean", code="#eval 1")
    assert other["status"] == "Failed" and other["run_result"]["return_code"] == 127
    assert "not supported" in other["run_result"]["stderr"]


def test_trl_reward_functions_run_inside_a_real_grpo_trainer_step(url, tmp_path):
    # One GRPO step of a tiny random Llama on CPU: TRL itself calls the sync and the async reward function, passes its
    # dataset columns and hooks, and logs the per-component means they report through log_metric.
    torch = pytest.importorskip("torch")
    datasets = pytest.importorskip("datasets")
    trl = pytest.importorskip("trl")
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(["<pad>", "<s>", "</s>", "<unk>", "1", "2", "4", "+", "=", "?", "<", ">"])}
    tokenizer_core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tokenizer_core.pre_tokenizer = pre_tokenizers.Split(pattern="", behavior="isolated")
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer_core, pad_token="<pad>", bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=len(vocab),
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=2,
            max_position_embeddings=64,
            pad_token_id=0,
            bos_token_id=1,
            eos_token_id=2,
        )
    )
    dataset = datasets.Dataset.from_dict({"prompt": ["1+1=?", "2+2=?"], "answer": ["2", "4"]})
    seen: list[tuple[list[str], list]] = []

    def recording(func):
        def wrapper(prompts, completions, **kwargs):
            rewards = func(prompts=prompts, completions=completions, **kwargs)
            seen.append((sorted(kwargs), rewards))
            return rewards

        wrapper.__name__ = func.__name__
        return wrapper

    sync_reward = recording(trl_reward_func(url, verifier="math", name="math"))
    async_reward = trl_reward_func(url, verifier="math", reward=FORMAT_SPEC, name="math_fmt", asynchronous=True)
    args = trl.GRPOConfig(
        output_dir=str(tmp_path),
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=6,
        max_steps=1,
        logging_steps=1,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
        bf16=False,
    )
    trainer = trl.GRPOTrainer(
        model=model,
        reward_funcs=[sync_reward, async_reward],
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
    )
    trainer.train()
    assert len(seen) == 1
    columns, rewards = seen[0]
    assert {"answer", "log_metric", "trainer_state"} <= set(columns) and len(rewards) == 2
    assert all(r in (0.0, 1.0) for r in rewards)
    logged = trainer.state.log_history[0]
    assert {
        "rewards/math/mean",
        "rewards/math_fmt/mean",
        "math/error_rate",
        "math_fmt/format",
        "math_fmt/correct",
    } <= set(logged)
    assert logged["math/error_rate"] == 0.0 and logged["math_fmt/error_rate"] == 0.0
