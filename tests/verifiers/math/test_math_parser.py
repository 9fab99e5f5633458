"""Answer extraction: every supported form, its priority, strict mode, reference parsing, and linear time on 1 MB."""

from __future__ import annotations

import time

import pytest

from groupscore.schema.boxes import boxed_contents
from groupscore.verifiers.math.boxes import box_spans_from_end
from groupscore.verifiers.math.parser import (
    LENIENT,
    NO_FALLBACK,
    STRICT,
    box_run,
    extract_answer,
)
from groupscore.verifiers.math.reference import parse_gold

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
    assert [c for _, _, c in box_spans_from_end(text, 1, 100)[0]] == ["7"]
    spans, overlong = box_spans_from_end(r"\boxed{\boxed{1}} x \boxed{2}", 5, 100)
    assert [c for _, _, c in spans] == [r"\boxed{1}", "2"] and not overlong


@pytest.mark.parametrize(
    "stored, expected",
    [
        ("42", "42"),
        ("$\\frac{1}{2}$", "\\frac{1}{2}"),
        ("\\boxed{3}", "3"),
        ("$\\boxed{x+1}$", "x+1"),
        ("Janet sells 16 - 3 - 4 = 9 eggs.\n#### 18", "18"),
    ],
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


@pytest.mark.parametrize(
    "stored, expected",
    [
        # A MATH solution: its box; GSM8K: the `####` line; the boxed line of "So the answer is: \[\boxed{..}\]".
        (r"Since $3 \cdot 4 = 12$, the total is $\boxed{12}$.", "12"),
        (" So the answer is: \\[ \\boxed{32349} \\]", "32349"),
        ("She has 3 + 4 = <<3+4=7>>7 cats.\n#### 7", "7"),
        # Wrappers around the whole reference.
        ("\\(x^2\\)", "x^2"),
        ("\\[ 9 \\]", "9"),
        ("$$(2, 2), (6, 2)$$", "(2, 2), (6, 2)"),
        # A solution without a box: its final-answer sentence, or the answer-is sentence.
        ("First 2 + 2 = 4. Final Answer: The final answer is $28 \\%$. I hope it is correct.", "28 \\%"),
        ("We add the parts and simplify, so the answer is 0.25 + 3.", "0.25 + 3"),
        # Several answers: several boxes in one run, "A or B", numbered unknowns, a set in plain braces.
        ("\\(\\boxed{1}\\) and \\(\\boxed{-2}\\).", "1, -2"),
        ("\\boxed{1} papers and \\boxed{2} bins", "1, 2"),
        ("$(11,7)or(7,11)$", "(11,7), (7,11)"),
        ("$x_{1}=\\frac{1}{2},\\quadx_{2}=-3$", "\\frac{1}{2}, -3"),
        ("$${1,2,3}$$", "\\{1,2,3\\}"),
        # ... but boxes with reasoning between them are a correction: the last one counts.
        ("\\boxed{1} no no no no no \\boxed{2}", "2"),
        # Doubled backslashes before command names, thousands separators, an unclosed box.
        ("$\\\\left(\\\\frac{1}{5},\\\\frac{1}{6}\\\\right)$", "\\left(\\frac{1}{5},\\frac{1}{6}\\right)"),
        ("$10,\\!000$", "10000"),
        ("\\boxed{W = 1", "W = 1"),
    ],
)
def test_a_reference_is_read_the_way_a_completion_is(stored, expected):
    assert parse_gold(stored) == expected


def test_reference_raw_keeps_the_field_as_stored():
    assert parse_gold("  $\\boxed{12}$ ", "raw") == "$\\boxed{12}$"
    assert parse_gold("a solution... #### 7", "raw") == "a solution... #### 7"


@pytest.mark.parametrize(
    "written, number",
    [
        ("10,\\!000", "10000"),
        ("11,\\! 111,\\! 111,\\! 100", "11111111100"),
        ("1{,}000{,}000", "1000000"),
        ("10\\,000", "10000"),
        ("\\$16,\\!386.20", "\\$16386.20"),
        ("1,00,000", "100000"),
        ("2,50,00,000", "25000000"),
    ],
)
def test_thousands_separators_make_one_number_not_a_list(written, number):
    assert answer(f"so the total is $\\boxed{{{written}}}$.") == number


@pytest.mark.parametrize("written", ["1, 2", "12,34,567", "(1,\\!2)", "3,\\ 4"])
def test_lists_are_not_read_as_grouped_numbers(written):
    assert answer(f"\\boxed{{{written}}}") == written


@pytest.mark.parametrize(
    "completion, expected",
    [
        ("Answer $ 9 $", "9"),
        ("Answer \\[ 9 \\]", "9"),
        ("Answer \\( (9+1) \\)", "(9+1)"),
        ("Final Answer: The largest $n$ is 34.", "34"),
        ("Final Answer: The volume of $ABCDEFGH$ is 120. I hope it is correct.", "120"),
        ("Final Answer: Jane started growing Sphere 3 hours ago. I hope it is correct.", "3"),
        ("So the answer is the point $(1, 2)$ on the line.", "(1, 2)"),
        # The last explicit statement wins over an earlier box (the model boxed an intermediate step).
        (
            "so $\\boxed{255}$ is the interest. Final Answer: The final answer is $10,455$. I hope it is correct.",
            "10,455",
        ),
    ],
)
def test_answers_without_a_box(completion, expected):
    assert answer(completion) == expected


@pytest.mark.parametrize(
    "completion",
    [
        "Final Answer: The value is either 6 or 7.",  # a hedge stays whole (and unparsable)
        "Final Answer: It is 5 or maybe 6.",
        "Final Answer: In 2 hours she earns 120 dollars.",  # two values in one sentence: no single answer
    ],
)
def test_a_prose_sentence_with_several_values_is_not_reduced(completion):
    found = extract_answer(completion)
    assert found is not None and found.source == "final_answer" and " " in found.text


def test_fallback_off_requires_an_explicit_marker():
    assert answer("I had 3 apples and ate 1, so 2 are left.", NO_FALLBACK) is None
    assert answer("\\dfrac{9}{7}", NO_FALLBACK) is None
    assert answer("Final Answer: The largest $n$ is 34.", NO_FALLBACK) == "The largest $n$ is 34"
    assert answer("\\boxed{34}", NO_FALLBACK) == "34"
    assert answer("#### 72", NO_FALLBACK) == "72"


@pytest.mark.parametrize(
    "completion, group",
    [
        ("\\boxed{1} and \\boxed{2} and \\boxed{3}", ("1", "2", "3")),
        ("\\boxed{1},\\boxed{2},\\boxed{3}", ("1", "2", "3")),
        ("$$\\boxed{(2, 2)} \\quad \\text{and} \\quad \\boxed{(6, 2)}$$", ("(2, 2)", "(6, 2)")),
        ("\\( y_1 = \\boxed{x+1} \\) and \\( y_2 = \\boxed{x-1} \\)", ("x+1", "x-1")),
        ("first \\boxed{6}. Then we check the case n = 3 again and get \\boxed{7}", ()),  # a correction, not a list
        ("Adding the rows gives \\boxed{3}. Wait, no: \\boxed{4}", ()),  # a word of reasoning: a correction
        ("\\boxed{3} \\boxed{4}", ("3", "4")),  # whatever the reference: the same text, the same answer
        ("\\boxed{(3, 3)} \\text{ for part (a) and } \\boxed{(1, 1)}", ("(3, 3)", "(1, 1)")),
        ("\\boxed{5}", ()),
        ("<answer>\\boxed{3}, \\boxed{4}</answer> and later \\boxed{9}", ("3", "4")),
    ],
)
def test_the_run_of_boxes_a_completion_ends_with(completion, group):
    assert box_run(completion) == group
    assert extract_answer(completion).text == (group[-1] if group else extract_answer(completion).text)


@pytest.mark.parametrize(
    "completion, expected",
    [
        ("Final Answer: The final answer is $12$ and $13$. I hope it is correct.", "12, 13"),
        ('Final Answer: The final answer is \\"$12 $ and $13 $\\". I hope it is correct.', "12 , 13"),
        ("The final answer is $1$, $2$, and $3$.", "1, 2, 3"),
        ("The final answer is $6$ or $7$.", "6 or 7"),  # a hedge stays a hedge (it read as 6 before)
        ("The final answer is $6$. I hope it is correct.", "6"),
    ],
)
def test_several_formulas_joined_by_words_are_one_answer(completion, expected):
    assert answer(completion) == expected


@pytest.mark.parametrize(
    "stored",
    [
        "x_1 = 1, " * (MB // 9),
        "\\boxed{1} and " * (MB // 14),
        "$" * MB,
        "{" * MB,
        "1 or " * (MB // 5),
        "The answer is " * (MB // 14),
        "\\\\frac" * (MB // 7),
        "10,\\!000" * (MB // 8),
    ],
    ids=lambda s: repr(s[:12]),
)
def test_reading_a_reference_is_fast_on_one_megabyte(stored):
    started = time.perf_counter()
    parse_gold(stored)
    assert time.perf_counter() - started < 1.5


@pytest.mark.parametrize(
    "completion, expected",
    [
        ("Therefore the area is \\(\\frac{9\\pi}{4}\\).", "\\frac{9\\pi}{4}"),
        ("Therefore the area is\n\\[\\frac{9\\pi}{4}\\]", "\\frac{9\\pi}{4}"),
        ("Thus the sum is $$\\frac{3}{28}$$ in lowest terms", "\\frac{3}{28}"),
        ("the area is \\(\\frac{9}{4}\\) and then 7 more", "7"),  # a number after the formula is later
    ],
)
def test_the_last_formula_is_read_whole_not_its_last_digit(completion, expected):
    assert answer(completion) == expected
