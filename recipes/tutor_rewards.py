"""The tutor recipe's own reward: credit for worked steps before the FINAL line (TRL's reward-function signature).

A policy optimises against whatever pays, so a "step" must carry arithmetic (a digit and an operator or `=`), a step
repeated counts once, and the credit stops at four steps: padding the answer with filler or copies earns nothing.
"""

from __future__ import annotations

import re

_STEP = re.compile(r"\d\s*[-+*/×÷=]|[-+*/×÷=]\s*\d")


def worked_steps(prompts: list[str], completions: list[str], **kwargs: object) -> list[float]:
    rewards = []
    for completion in completions:
        body = completion.rsplit("\nFINAL:", 1)[0] if "\nFINAL:" in completion else ""
        steps = {line.strip() for line in body.splitlines() if _STEP.search(line)}
        rewards.append(min(len(steps), 4) / 4)
    return rewards
