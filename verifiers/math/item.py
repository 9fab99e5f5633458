"""The math item: a completion and a reference answer, with the extraction and comparison knobs."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from groupscore.verifiers.schema import ItemBase


class MathItem(ItemBase):
    verifier: Literal["math"] = "math"
    answer: str = Field(description="Reference answer as datasets store it: plain, LaTeX, $...$ or \\boxed{}.")
    strict: bool = Field(default=False, description="Several different boxed answers score as a hedge; no last-number fallback.")
    rel_tol: float = Field(default=1e-6, ge=0.0, le=1.0, description="Relative tolerance of the numeric comparison.")
    timeout_s: float = Field(default=2.0, gt=0.0, le=60.0, description="Wall-clock budget for this verdict.")
    question: str | None = Field(default=None, max_length=100_000,
                                 description="The problem statement, if known: for a numeric reference, an arithmetic "
                                             "expression copied from it is not an answer and scores 0.")
