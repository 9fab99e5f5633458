"""TRL's environment_factory on groupscore sessions: the tool methods read back (through transformers' own reader) as
the tools' schemas, reset/step/get_reward against a real service, and TRL's GRPOTrainer driving the class for two
steps with every session it opened closed at the end of its batch (counted on the service's /metrics)."""

from __future__ import annotations

import os

import httpx
import pytest

from groupscore.client.trl_env import environment_factory, python_type, tool_method

RIGHT = "grep -c ' ERROR ' app.log > errors.txt"  # demo:count-errors: the count of ERROR lines, written to errors.txt
WRONG = "echo 7 > errors.txt"


def sessions_metrics(url: str) -> dict[str, float]:
    """The service's session counters: open, opened_total, closed_total, reaped_total."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    out = {}
    for line in text.splitlines():
        if line.startswith("groupscore_sessions_"):
            name, value = line.split(" ")
            out[name.removeprefix("groupscore_sessions_")] = float(value)
    return out


# -- the tool methods --------------------------------------------------------------------------------------------


def test_a_tool_method_reads_back_through_transformers_as_the_tools_schema():
    get_json_schema = pytest.importorskip("transformers.utils").get_json_schema
    schema = {
        "type": "function",
        "function": {
            "name": "move",
            "description": "Move a file. Returns: the new path.",
            "parameters": {
                "type": "object",
                "properties": {
                    "source": {"type": "string", "description": "the file\nto move"},
                    "mode": {"type": "string", "enum": ["copy", "rename"], "description": "how"},
                    "tags": {"type": "array", "items": {"type": "integer"}, "description": "labels"},
                    "force": {"type": "boolean"},
                },
                "required": ["source", "mode"],
            },
        },
    }
    method = tool_method(schema)
    read = get_json_schema(method)["function"]
    assert read["name"] == "move" and read["description"] == "Move a file. Returns - the new path."
    assert read["parameters"]["required"] == ["source", "mode"]
    props = read["parameters"]["properties"]
    assert props["source"] == {"type": "string", "description": "the file to move"}
    assert props["mode"] == {"type": "string", "enum": ["copy", "rename"], "description": "how"}
    assert props["tags"] == {"type": "array", "items": {"type": "integer"}, "nullable": True, "description": "labels"}
    assert props["force"] == {"type": "boolean", "nullable": True, "description": "boolean"}


def test_a_tool_call_sends_only_the_arguments_the_model_gave():
    class Recorder:
        def _step(self, name, arguments):
            return f"{name} {arguments}"

    schema = {"name": "ls", "parameters": {"properties": {"path": {"type": "string"}, "all": {"type": "boolean"}}}}
    assert tool_method(schema)(Recorder(), path="/app") == "ls {'path': '/app'}"


@pytest.mark.parametrize("name", ["reset", "get_reward", "_private", "two words"])
def test_a_tool_name_that_cannot_be_a_method_of_the_environment_is_refused(name):
    with pytest.raises(ValueError, match="cannot be a method"):
        tool_method({"name": name, "parameters": {}})


def test_json_types_map_to_annotations_transformers_reads():
    assert python_type({"type": "number"}) is float
    assert python_type({"type": ["string", "null"]}) == (str | None)
    assert python_type({}) is python_type({"type": "mystery"})  # Any: an empty schema


# -- against the service -----------------------------------------------------------------------------------------


def test_reset_step_and_reward_through_the_service_and_every_session_closed(url):
    before = sessions_metrics(url)
    Env = environment_factory(url, ["demo:count-errors", "demo:top-customer"], group_size=2)
    assert [r["task"] for r in Env.rows] == ["demo:count-errors", "demo:top-customer"]
    assert Env.rows[0]["prompt"][-1]["role"] == "user"
    assert {"shell", "sqlite", "write_file"} <= {s["function"]["name"] for s in Env.tool_schemas}
    right, wrong, lost = Env(), Env(), Env()
    assert right.reset(**Env.rows[0]) is None  # the row has the prompt: nothing to append
    assert "ERROR" in wrong.reset(task="demo:count-errors")  # no prompt: the task's user message, for TRL to append
    lost.reset(task="demo:top-customer")
    right.shell(command=RIGHT)
    wrong.shell(command=WRONG)
    Env.sessions.close(lost._session.session_id)  # the service loses it before it is scored
    # A group of two per task, opened by the first reset of each: count-errors' two in use, top-customer's spare.
    assert sessions_metrics(url)["open"] - before["open"] == 3
    assert [right.get_reward(), wrong.get_reward(), lost.get_reward()] == [1.0, 0.0, None]
    after = sessions_metrics(url)
    assert after["open"] == before["open"]
    assert after["opened_total"] - before["opened_total"] == 2 + 4  # probes, then one group per task
    assert Env.close_all() == 0


def test_reset_closes_the_session_a_batch_left_without_rewards(url):
    Env = environment_factory(url, "demo:count-errors")
    env = Env()
    env.reset(task="demo:count-errors")
    first = env._session.session_id
    env.reset(task="demo:count-errors")  # a batch that failed before get_reward: its session is closed here
    assert Env.sessions.close(first) is False
    assert Env.close_all() == 1  # the one still open


def test_a_row_without_the_task_column_says_which_columns_it_has(url):
    Env = environment_factory(url, "demo:count-errors", task_column="env_task")
    with pytest.raises(KeyError, match=r"column 'env_task'.*\['prompt', 'task'\]"):
        Env().reset(prompt="hi", task="demo:count-errors")


# -- TRL's GRPOTrainer -------------------------------------------------------------------------------------------


def scripted_tool_model(tmp_path, Env):
    """A tiny random Llama with Qwen2.5's chat template (TRL parses its tool calls) whose `generate` is scripted:
    on the first turn even rollouts call the shell tool with the right command, odd ones with a wrong one; after a
    tool result, every rollout ends its turn."""
    import json

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    from trl.chat_template_utils import qwen2_5_chat_template

    from groupscore.train.tiny_model import build_tokenizer

    def call(command: str) -> str:
        return f'<tool_call>\n{{"name": "shell", "arguments": {json.dumps({"command": command})}}}\n</tool_call>'

    corpus = [call(RIGHT), call(WRONG), "done", json.dumps(Env.rows), json.dumps(Env.tool_schemas)]
    tokenizer = build_tokenizer(corpus, 400)
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    tokenizer.eos_token = "<|im_end|>"
    tokenizer.chat_template = qwen2_5_chat_template
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    turns = [tokenizer.encode(text + "<|im_end|>", add_special_tokens=False) for text in (call(RIGHT), call(WRONG))]
    done = tokenizer.encode("done<|im_end|>", add_special_tokens=False)

    def generate(input_ids, **kwargs):
        rows = [done if "<tool_response>" in tokenizer.decode(ids) else turns[i % 2] for i, ids in enumerate(input_ids)]
        width = max(map(len, rows))
        completions = torch.tensor([r + [tokenizer.pad_token_id] * (width - len(r)) for r in rows])
        return torch.cat([input_ids, completions], dim=1)

    model.generate = generate
    return model, tokenizer


def test_trl_grpo_trainer_runs_two_steps_on_sessions_and_closes_each_batch(url, tmp_path, monkeypatch):
    pytest.importorskip("trl")
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    monkeypatch.setitem(os.environ, "CUDA_VISIBLE_DEVICES", "")
    before = sessions_metrics(url)
    Env = environment_factory(url, ["demo:count-errors"], group_size=4)
    model, tokenizer = scripted_tool_model(tmp_path, Env)
    open_after_step = []

    class CountOpen(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            open_after_step.append(sessions_metrics(url)["open"] - before["open"])

    config = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        max_steps=2,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=128,
        logging_steps=1,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
    )
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        args=config,
        train_dataset=Dataset.from_list(Env.rows * 4),
        environment_factory=Env,
        callbacks=[CountOpen()],
    )
    trainer.train()
    logs = [h for h in trainer.state.log_history if "rewards/GroupscoreEnv/mean" in h]
    assert len(logs) == 2
    for log in logs:
        assert log["rewards/GroupscoreEnv/mean"] == 0.5  # half the group wrote the right count
        assert log["tools/call_frequency"] == 1.0 and log["tools/failure_frequency"] == 0.0
    assert open_after_step == [0, 0]  # each batch's sessions were closed by its own rewards, not at the end
    after = sessions_metrics(url)
    assert after["opened_total"] - before["opened_total"] == 1 + 2 * 4  # the probe, then two batches of a group
    assert after["closed_total"] - before["closed_total"] == 1 + 2 * 4
    assert after["reaped_total"] == before["reaped_total"]
    assert Env.close_all() == 0
