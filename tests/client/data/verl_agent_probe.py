"""Runs in the verl venv (.venv-verl), started by tests/client/test_verl_agent.py: verl's own AgentLoopWorker, built
from verl's generated trainer config, runs groupscore's agent loop on a batch against a real service, its LLM server
replaced by a scripted one that answers with token ids of a tiny byte-level tokenizer. Prints, as one JSON line per
batch, what verl made of each sample: reward, response mask, the text the mask keeps and the text it masks.

    python verl_agent_probe.py URL DEAD_URL     (DEAD_URL: where no service listens)

Two batches: [solve, solve, no-env, unreachable] (a GRPO group of two that solves demo:count-errors, a session that
cannot start, a service that cannot be reached), then [wrong, two-turns] (a wrong answer: reward 0, not masked; a
task whose second user turn comes when the model ends its first), then [unknown] (a task the service does not have:
the batch fails).
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import numpy as np
import verl
from omegaconf import OmegaConf
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import LlamaConfig, PreTrainedTokenizerFast
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
from verl.protocol import DataProto
from verl.workers.rollout.replica import TokenOutput

from groupscore.client import verl_agent

HERE = Path(__file__).resolve().parent
TASKS = HERE / "verl_tasks.yaml"
EXAMPLES = HERE.parents[2] / "examples"
EXAMPLE_URL = "http://127.0.0.1:8000"
CALL = '<tool_call>{"name": "shell", "arguments": {"command": "%s"}}</tool_call><|im_end|>'
# What the scripted model says, turn by turn, in each case: a tool call, then a message of its own.
SCRIPTS = {
    "solve": [CALL % "grep -c ' ERROR ' app.log | tee errors.txt", "I wrote the count to errors.txt.<|im_end|>"],
    "wrong": [CALL % "echo 7 > errors.txt", "Done.<|im_end|>"],
    "two-turns": [CALL % "echo 1 > a.txt", "Done.<|im_end|>", CALL % "echo 2 >> a.txt", "Appended.<|im_end|>"],
    "no-env": ['<tool_call>{"name": "hi", "arguments": {}}</tool_call><|im_end|>', "Hi!<|im_end|>"],
}
TASK_OF = {
    "solve": "demo:count-errors",
    "wrong": "demo:count-errors",
    "no-env": f"{TASKS}:no-env",
    "two-turns": f"{TASKS}:two-turns",
    "unreachable": "demo:count-errors",
    "unknown": "demo:no-such-task",
}
AGENT_OF = {"unreachable": "groupscore-unreachable"}  # the loop's entry that names the dead URL
BATCHES = (["solve", "solve", "no-env", "unreachable"], ["wrong", "two-turns"])


def tiny_model(folder: Path) -> None:
    """A byte-level tokenizer (every byte a token, no merges) with a Hermes-style chat template, and a config."""
    vocab = {char: i for i, char in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
    )
    tokenizer.chat_template = (HERE / "tiny_chat_template.jinja").read_text()
    tokenizer.save_pretrained(folder)
    LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        architectures=["LlamaForCausalLM"],
    ).save_pretrained(folder)


class ScriptedServer:
    """verl's LLMServerClient as the agent loop sees it: `generate` answers the episode's next scripted turn, picked
    by what the prompt holds (the case's marker in the task's first message)."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self.cases = ["solve"]
        self.turns: dict[str, int] = defaultdict(int)

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs) -> TokenOutput:
        prompt = self.tokenizer.decode(prompt_ids)
        markers = {"Greet the user": "no-env", "Write the line 1": "two-turns"}
        case = next((c for marker, c in markers.items() if marker in prompt), self.cases[0])
        turn = self.turns[request_id]
        self.turns[request_id] += 1
        text = SCRIPTS[case][min(turn, len(SCRIPTS[case]) - 1)]
        token_ids = self.tokenizer.encode(text, add_special_tokens=False)
        log_probs = [-0.5] * len(token_ids) if sampling_params.get("logprobs") else None
        return TokenOutput(token_ids=token_ids, log_probs=log_probs, stop_reason="completed")


def trainer_config(model: Path, loops: Path):
    """verl's own trainer config (the generated ppo_trainer.yaml), set as a user sets it for multi-turn agents."""
    config = OmegaConf.load(Path(verl.__file__).parent / "trainer" / "config" / "_generated_ppo_trainer.yaml")
    overrides = OmegaConf.from_dotlist(
        [
            f"actor_rollout_ref.model.path={model}",
            "actor_rollout_ref.rollout.name=vllm",  # the engine a user names; the scripted server stands in for it
            "actor_rollout_ref.rollout.prompt_length=4096",
            "actor_rollout_ref.rollout.response_length=1024",
            "actor_rollout_ref.rollout.multi_turn.enable=true",
            "actor_rollout_ref.rollout.multi_turn.format=hermes",
            "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=4",
            f"actor_rollout_ref.rollout.agent.agent_loop_config_path={loops}",
            "actor_rollout_ref.rollout.agent.default_agent_loop=groupscore",
        ]
    )
    return OmegaConf.merge(config, overrides)


def spans(tokenizer, response: list[int], mask: list[int]) -> tuple[str, str]:
    """The text of the response tokens the mask keeps (the model's), and of those it masks (everything else)."""
    kept = [t for t, m in zip(response, mask, strict=True) if m]
    masked = [t for t, m in zip(response, mask, strict=True) if not m and t != tokenizer.pad_token_id]
    return tokenizer.decode(kept), tokenizer.decode(masked)


async def run_batch(worker: AgentLoopWorker, tokenizer, cases: list[str]) -> list[dict]:
    worker.llm_client.cases = [c for c in cases if c in ("solve", "wrong")]
    tasks = [TASK_OF[case] for case in cases]
    batch = DataProto.from_dict(
        non_tensors={
            "raw_prompt": np.array([[{"role": "user", "content": task}] for task in tasks], dtype=object),
            "agent_name": np.array([AGENT_OF.get(case, "groupscore") for case in cases], dtype=object),
            "extra_info": np.array([{"task": task, "seed": i} for i, task in enumerate(tasks)], dtype=object),
            "data_source": np.array(["groupscore"] * len(cases), dtype=object),
        }
    )
    output = await worker.generate_sequences(batch)
    rows = []
    for i, case in enumerate(cases):
        mask = output.batch["response_mask"][i].tolist()
        response = output.batch["responses"][i].tolist()
        kept, masked = spans(tokenizer, response, mask)
        rows.append(
            {
                "case": case,
                "reward": float(output.batch["rm_scores"][i].sum()),
                "mask_ones": int(sum(mask)),
                "response_tokens": int(output.batch["attention_mask"][i, -len(mask) :].sum()),
                "kept": kept,
                "masked": masked,
                "status": output.non_tensor_batch["groupscore_status"][i],
                "infra_error": int(output.non_tensor_batch["groupscore_infra_error"][i]),
                "tool_calls": int(output.non_tensor_batch["groupscore_tool_calls"][i]),
                "num_turns": int(output.non_tensor_batch["__num_turns__"][i]),
                "reward_extra_keys": list(output.meta_info.get("reward_extra_keys", [])),
            }
        )
    return rows


def main() -> None:
    url, dead_url = sys.argv[1:3]
    with tempfile.TemporaryDirectory() as tmp:
        model, loops = Path(tmp) / "model", Path(tmp) / "agent_loops.yaml"
        tiny_model(model)
        # The file of agent loops as examples/verl_agent_loop.yaml has it, with this test's service, and a second
        # entry whose service is not there.
        example = (EXAMPLES / "verl_agent_loop.yaml").read_text().replace(EXAMPLE_URL, url)
        dead = (
            "- name: groupscore-unreachable\n  _target_: groupscore.client.verl_agent.GroupscoreAgentLoop\n  url: {}\n"
        )
        loops.write_text(example + dead.format(dead_url))
        worker = AgentLoopWorker(trainer_config(model, loops), llm_client=None)
        worker.llm_client = ScriptedServer(worker.tokenizer)
        batches = [asyncio.run(run_batch(worker, worker.tokenizer, cases)) for cases in BATCHES]
        infra_count = list(verl_agent.infra_count())
        try:  # a row naming a task the service does not have: the batch fails, loudly
            asyncio.run(run_batch(worker, worker.tokenizer, ["unknown"]))
            unknown = "no error"
        except ValueError as exc:
            unknown = str(exc)
        report = {"batches": batches, "infra_count": infra_count, "unknown": unknown, "module": verl_agent.__file__}
        print(json.dumps(report))


if __name__ == "__main__":
    main()
