"""Each task's prompt as the model will see it: rendered once, with the tokenizer's chat template when it has one."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from groupscore.train.task import TaskRow

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


def render_prompts(
    tasks: list[TaskRow], tokenizer: PreTrainedTokenizerBase, chat_template: bool | str, system_prompt: str | None
) -> list[TaskRow]:
    """Each prompt rendered once (the system prompt, the conversation or the user turn, the assistant header), so
    SFT, preflight, GRPO and evaluation all see the same text. Without a chat template: the system prompt and the
    user text, a blank line apart; a conversation then has nothing to render it."""
    use_template = bool(tokenizer.chat_template) if chat_template == "auto" else bool(chat_template)
    if use_template and not tokenizer.chat_template:
        raise ValueError(
            f"model.chat_template: true, but the tokenizer of {tokenizer.name_or_path} has no chat template; use an "
            "instruct model or set model.chat_template: false"
        )
    out = []
    for task in tasks:
        if use_template:
            turns = [{"role": m.role, "content": m.content} for m in task.messages or ()] or [
                {"role": "user", "content": task.prompt}
            ]
            if system_prompt is not None and turns[0]["role"] != "system":
                turns.insert(0, {"role": "system", "content": system_prompt})
            out.append(replace(task, prompt=_rendered(tokenizer, turns)))
        elif task.messages is not None and len(task.messages) > 1:
            raise ValueError(
                f"task {task.id}: a conversational prompt needs a chat template, and {tokenizer.name_or_path} has none "
                "(model.chat_template); give plain-text prompts or an instruct model"
            )
        else:
            text = task.prompt if system_prompt is None else f"{system_prompt}\n\n{task.prompt}"
            out.append(replace(task, prompt=text))
    return out


def _rendered(tokenizer: PreTrainedTokenizerBase, turns: list[dict[str, str]]) -> str:
    text = tokenizer.apply_chat_template(turns, tokenize=False, add_generation_prompt=True)
    if not isinstance(text, str):  # tokenize=False renders text; anything else is a transformers change to notice
        raise TypeError(f"apply_chat_template(tokenize=False) returned {type(text).__name__}, not text")
    return text
