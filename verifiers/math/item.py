"""The math item: a completion and a reference answer, with the extraction and comparison knobs."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from groupscore.schema.item import ItemBase
from groupscore.verifiers.math.conventions import Order, Percent, Profile


class MathItem(ItemBase):
    verifier: Literal["math"] = "math"
    answer: str = Field(
        description="Reference answer as datasets store it: plain, LaTeX, $...$ or \\boxed{}; a JSON number is read "
        "as its text (GSM8K-style integer columns)."
    )
    strict: bool = Field(
        default=False, description="Several different boxed answers score as a hedge; no last-number fallback."
    )
    rel_tol: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="Relative tolerance of the numeric comparison. Unset: 1e-6, and a written decimal is also held to "
        "the precision it is written to (`2000000.5` is neither 2000000 nor 2000001). Set: this tolerance as stated, "
        "whatever the digits.",
    )
    # Comparison conventions (docs/verifiers/math-conventions.md): None takes the profile's value.
    profile: Profile = Field(
        default="default",
        description="A bundle of the conventions below: default (for RL: the value as written, no second reading), "
        "math_verify (Math-Verify's choices: percent both, equations' last side unchecked).",
    )
    percent: Percent | None = Field(
        default=None, description="`10\\%` is 10 (number, default), 0.1 (fraction), or either (both)."
    )
    decimal_comma: bool | None = Field(
        default=None,
        description="`1,5` is the decimal 1.5 where it cannot be a thousands group (default false: the list 1, 5).",
    )
    significant_digits: int | None = Field(
        default=None,
        ge=1,
        le=15,
        description="Also accept a decimal that correctly rounds the exact reference to at least this many "
        "significant digits (`0.3333` for 1/3 with 4). Default: none, the item's rel_tol only.",
    )
    order: Order | None = Field(
        default=None,
        description="written (default): tuples are ordered, lists and sets are not; any: tuples too "
        "are compared order-free.",
    )
    rename_variables: bool | None = Field(
        default=None,
        description="Accept an answer in one variable under another name (`f(y) = y^2` for "
        "`f(x) = x^2`). Default false.",
    )
    clock_12h: bool | None = Field(
        default=None,
        description="A clock time without a.m./p.m. matches the same hour on a 12-hour clock (`9:00` for `9:00 p.m.`). "
        "Default false: a bare time is read on a 24-hour clock (`9:00` is 9 a.m., `21:00` 9 p.m.).",
    )
    scale_words: bool | None = Field(
        default=None,
        description="Read scale words as their factor (`3 \\text{ million}` = 3000000, `2 \\text{ dozen}` = 24). "
        "Default false: a scale word is part of the answer, and only the same words on the reference match it.",
    )
    scientific_tolerance: bool | None = Field(
        default=None,
        description="A decimal mantissa in scientific notation is a rounded value, matched within rel_tol "
        "(`2.000001 \\times 10^{6}` for 2000000). Default false: it is read exactly, like the same number written out.",
    )
    check_equations: bool | None = Field(
        default=None,
        description="An answer written as an equation (`2+3=5`, `x = 5+5+1 = 11`) states its last side only if "
        "every closed side before it equals it (default true: `3 = 4` states nothing). false: the last side counts.",
    )
    timeout_s: float = Field(default=2.0, gt=0.0, le=60.0, description="Wall-clock budget for this verdict.")
    question: str | None = Field(
        default=None,
        max_length=100_000,
        description="The problem statement, if known: for a numeric reference, an arithmetic "
        "expression copied from it is not an answer and scores 0.",
    )
    reference: Literal["extract", "raw"] = Field(
        default="extract",
        description="extract: the answer field may be a solution (a MATH solution with its \\boxed{}, a GSM8K one "
        "ending in `#### 72`, 'Final Answer: ...') or wrapped in $..$/\\(..\\)/\\[..\\]; its final answer is "
        "read the way a completion's is, and several boxes / 'A or B' / `x_1 = a, x_2 = b` are several "
        "answers. raw: the field is the answer as stored.",
    )
    fallback: bool = Field(
        default=True,
        description="Read answers without an explicit marker: a completion that is only an answer, the one value of "
        "a prose 'Final Answer: The largest $n$ is 34.', the last formula or number. false: a box, "
        "<answer> tag, `####`, 'Final answer:' or 'the answer is' is required.",
    )

    @field_validator("answer", mode="before")
    @classmethod
    def _number_as_text(cls, value: object) -> object:
        # A number is a reference like any other (the TRL adapter already turns int columns into text); a bool is
        # not a number here.
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        return value
