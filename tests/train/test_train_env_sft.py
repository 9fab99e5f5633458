"""The cold start on environment episodes trains on the model's own turns only: the reference episode is cut where
each model turn ends, the tool results and the header after them are the environment's (the same text a rollout
masks, suffix_after_turn), and the SFT row's labels are -100 on them (train/env_tasks.py, train/sft.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from groupscore.environments import load_source
from groupscore.train.demo import TASKSETS
from groupscore.train.env_tasks import reference_messages, render_env_tasks
from groupscore.train.sft import episode_row, sft_rows
from groupscore.train.task import TaskRow
from groupscore.train.tiny_model import TOOL_MARKERS, TOOL_TEMPLATE, build_tokenizer
from groupscore.train.toolcalls import suffix_after_turn

DATA = Path(__file__).with_name("data")
# (tests/train/data/llama3_style.jinja renders a call's turn without the blank line its generation prompt ends with,
# so no episode there is a continuation of its prompt: it gets no worked solution at all.)
CALC = load_source(str(TASKSETS / "calc" / "heldout.yaml"))[:3]
TEMPLATES = [
    (TOOL_TEMPLATE, "</s>", "hermes"),
    ((DATA / "qwen25_style.jinja").read_text(), "<|im_end|>", "hermes"),
    ((DATA / "smollm2.jinja").read_text(), "<|im_end|>", "smollm2"),
]


def tokenizer_with(template: str, eos: str):
    corpus = [t.turns[0].messages[0]["content"] + str(t.metadata) for t in CALC]
    tokenizer = build_tokenizer(corpus, 96)
    tokenizer.add_tokens(TOOL_MARKERS)
    tokenizer.chat_template = template
    tokenizer.add_special_tokens({"eos_token": eos})
    return tokenizer


@pytest.mark.parametrize(("template", "eos", "fmt"), TEMPLATES, ids=["tiny", "qwen2.5", "smollm2"])
def test_an_episodes_solution_trains_the_models_turns_and_masks_what_the_tools_said(template, eos, fmt):
    tokenizer = tokenizer_with(template, eos)
    for task in render_env_tasks([TaskRow(t.id, "", None, {}, env=t) for t in CALC], tokenizer, fmt):
        parts = task.solution_parts
        assert parts is not None and "".join(text for text, _ in parts) == task.solution
        trained = [text for text, on in parts if on]
        masked = [text for text, on in parts if not on]
        results = [str(r) for turn in task.env.metadata["outputs"] for r in turn]
        answer = str(task.env.metadata["answer"])
        calls = [m for m in reference_messages(task.env) if m["role"] == "assistant" and m.get("tool_calls")]
        assert len(trained) == len(calls) + 1 and answer in trained[-1]  # each call turn, then the answer
        assert all(text.endswith(eos) for text in trained)  # a turn ends at its end-of-turn token, as generated
        for turn_results, text in zip(task.env.metadata["outputs"], masked, strict=False):
            assert text == suffix_after_turn(tokenizer, fmt, [str(r) for r in turn_results])  # what a rollout masks
        assert not any(result in text for text in trained for result in results if result not in answer)

        row = episode_row(tokenizer, task.prompt, parts)
        learned = [t for t, label in zip(row["input_ids"], row["labels"], strict=True) if label != -100]
        assert learned == [t for text in trained for t in tokenizer(text, add_special_tokens=False)["input_ids"]]
        assert len(row["input_ids"]) > len(learned) > 0


def test_an_episode_whose_parts_could_not_be_cut_trains_whole_and_the_others_stay_masked(capsys):
    tokenizer = tokenizer_with(TOOL_TEMPLATE, "</s>")
    cut, uncut = render_env_tasks([TaskRow(t.id, "", None, {}, env=t) for t in CALC[:2]], tokenizer, "hermes")
    uncut = TaskRow(uncut.id, uncut.prompt, uncut.solution, {}, env=uncut.env)  # as a template that cannot be cut
    rows = sft_rows(tokenizer, [cut, uncut])
    assert "1 of 2 episodes train on their whole text" in capsys.readouterr().out
    masked = [label == -100 for label in rows[0]["labels"]]
    prompt_len = len(tokenizer(cut.prompt, add_special_tokens=False)["input_ids"])
    assert any(masked[prompt_len:]) and not all(masked[prompt_len:])  # tool output masked inside the solution
    whole = rows[1]["labels"][len(tokenizer(uncut.prompt, add_special_tokens=False)["input_ids"]) :]
    assert whole and -100 not in whole  # the whole solution, then its end-of-sequence token
    assert rows[1]["input_ids"][-1] == tokenizer.eos_token_id
