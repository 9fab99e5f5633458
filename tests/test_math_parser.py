"""Answer extraction: every supported form, its priority, strict mode, gold parsing, and linear time on 1 MB."""

from __future__ import annotations

import time

import pytest

from groupscore.verifiers.math.parser import LENIENT, STRICT, boxed_contents, boxes_from_end, extract_answer, parse_gold

MB = 1 << 20


def answer(completion: str, config=LENIENT) -> str | None:
    found = extract_answer(completion, config)
    return None if found is None else found.text


@pytest.mark.parametrize(
    "completion, expected, source",
    [
        (r"so $\boxed{\frac{\sqrt{3}}{2}}$.", r"\frac{\sqrt{3}}{2}", "boxed"),
        (r"first \boxed{6}, no wait: \boxed{7}", "7", "boxed"),
        (r"\fbox{42}", "42", "boxed"),
        (r"\boxed{\{1, 2\}}", r"\{1, 2\}", "boxed"),
        (r"\boxed{\boxed{3}}", "3", "boxed"),
        (r"\boxed 5", "5", "boxed"),
        (r"got \boxed{3} then truncated \boxed{4", "3", "boxed"),
        ("Natalia sold 48 clips.\n#### 72", "72", "gsm8k"),
        ("Work...\nFinal answer: 42", "42", "final_answer"),
        ("Work...\nFINAL: x = 3", "x = 3", "final_answer"),
        ("**Final Answer:** **12**", "12", "final_answer"),
        ("Final Answer: The final answer is $\\frac{9}{7}$. I hope it is correct.", r"\frac{9}{7}", "final_answer"),
        ("The final answer is $\\$24$. I hope it is correct.", r"\$24", "final_answer"),
        ("So the answer is 3.5.", "3.5", "answer_is"),
        ("The answer is 17, since 17 is prime and 19 is too large.", "17", "answer_is"),
        ("The answer is \\(x^2\\).", "x^2", "answer_is"),
        ("<think>maybe \\boxed{4}</think><answer>5</answer>", "5", "answer_tag"),
        ("<answer>\\boxed{6}</answer>", "6", "boxed"),
        ("I had 3 apples and ate 1, so 2 are left.", "2", "last_number"),
        ("The sum is -12.5 in total", "-12.5", "last_number"),
    ],
)
def test_each_answer_form_is_extracted(completion, expected, source):
    found = extract_answer(completion)
    assert found is not None
    assert (found.text, found.source) == (expected, source)


def test_a_box_beats_a_number_written_after_it():
    assert answer(r"\boxed{12}. Check: 12 - 5 = 7") == "12"


def test_strict_mode_turns_off_the_last_number_fallback():
    assert answer("I had 3 apples and ate 1, so 2 are left.", STRICT) is None
    assert answer("Final answer: 2", STRICT) == "2"


def test_strict_mode_reports_every_top_level_box():
    found = extract_answer(r"\boxed{6} hmm \boxed{\boxed{7}} and \boxed{8}", STRICT)
    assert found is not None and found.boxes == ("6", r"\boxed{7}", "8")


def test_no_answer_at_all():
    assert extract_answer("I am not sure how to solve this.") is None
    assert extract_answer("") is None


def test_an_overlong_answer_is_flagged_not_returned_whole():
    found = extract_answer("\\boxed{" + "1+" * 5000 + "1}")
    assert found is not None and found.too_long and len(found.text) <= LENIENT.max_answer_chars


def test_boxed_contents_matches_nested_and_escaped_braces():
    text = r"a \boxed{\frac{1}{2}} b \boxed{\{x \mid x > 0\}} c \fbox{7}"
    assert [c for _, c in boxed_contents(text)] == [r"\frac{1}{2}", r"\{x \mid x > 0\}", "7"]
    assert boxes_from_end(text, 1, 100) == (["7"], False)
    assert boxes_from_end(r"\boxed{\boxed{1}} x \boxed{2}", 5, 100) == ([r"\boxed{1}", "2"], False)


@pytest.mark.parametrize(
    "stored, expected",
    [("42", "42"), ("$\\frac{1}{2}$", "$\\frac{1}{2}$"), ("\\boxed{3}", "3"), ("$\\boxed{x+1}$", "x+1"),
     ("Janet sells 16 - 3 - 4 = 9 eggs.\n#### 18", "18")],
)
def test_gold_answers_are_read_as_datasets_store_them(stored, expected):
    assert parse_gold(stored) == expected


@pytest.mark.parametrize(
    "completion",
    [
        "{" * MB,
        "}" * MB,
        "\\boxed{" * (MB // 7),
        "\\boxed{1}" * (MB // 9),
        "1" * MB,
        "the answer is " * (MB // 14),
        "Final answer: " * (MB // 14),
        "final " * (MB // 6),
        "$" * MB,
        "<answer>" * (MB // 8),
        "\\boxed{" + "{}" * (MB // 2) + "}",
        "a" * MB + "\\boxed{3}",
    ],
    ids=lambda c: repr(c[:12]),
)
@pytest.mark.parametrize("config", [LENIENT, STRICT], ids=["lenient", "strict"])
def test_extraction_is_fast_on_one_megabyte(completion, config):
    started = time.perf_counter()
    extract_answer(completion, config)
    # Linear scans take tens of milliseconds; a quadratic one would take minutes.
    assert time.perf_counter() - started < 1.5


def test_a_truncated_box_falls_back_to_the_other_forms():
    assert answer("The answer is 5. Let me box it: \\boxed{") == "5"
    assert answer("\\boxed{3} and then \\boxed{4") == "3"
