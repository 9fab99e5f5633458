"""The code item and its test styles. Expected values stay on the host: see the code verifier."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from groupscore.schema.item import ItemBase
from groupscore.verifiers.code.extract import BlockChoice, Language


class _Test(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    time_limit_s: float | None = Field(
        default=None, gt=0.0, le=60.0, description="Overrides the item's per-test limit."
    )


class StdioTest(_Test):
    type: Literal["stdio"] = "stdio"
    stdin: str = ""
    stdout: str
    compare: Literal["exact", "whitespace", "float"] = "whitespace"
    float_tol: float = Field(default=1e-6, ge=0.0)


class CallTest(_Test):
    type: Literal["call"] = "call"
    fn: str
    args: list[Any] = Field(default_factory=list)
    kwargs: dict[str, Any] = Field(default_factory=dict)
    expected: Any = None
    float_tol: float | None = Field(
        default=None, ge=0.0, description="Compare numbers within this tolerance (absolute, relative above 1)."
    )


class AssertTest(_Test):
    type: Literal["assert"] = "assert"
    code: str = Field(description="One MBPP-style assert line, e.g. `assert f(2) == 4`.")


class HumanEvalTest(_Test):
    type: Literal["humaneval"] = "humaneval"
    test: str = Field(description="HumanEval's test code defining check(candidate).")
    entry_point: str


CodeTest = Annotated[StdioTest | CallTest | AssertTest | HumanEvalTest, Field(discriminator="type")]


class CodeItem(ItemBase):
    verifier: Literal["code"] = "code"
    language: Language = "python"
    tests: list[CodeTest] = Field(default_factory=list, description="Public tests.")
    hidden_tests: list[CodeTest] = Field(
        default_factory=list, description="Only counts of these ever leave the verifier."
    )
    block: BlockChoice = Field(
        default="last", description="Which fenced block of the language is the program ('all': every one, in order)."
    )
    prompt: str | None = Field(
        default=None, description="Prepended to the program (HumanEval-style completions of a function body)."
    )
    time_limit_s: float = Field(default=5.0, gt=0.0, le=60.0, description="Per-test wall-clock limit.")
    memory_mb: int = Field(default=512, ge=16, le=16384)
    python_env: str | None = Field(
        default=None,
        pattern=r"^(?:[A-Za-z0-9][A-Za-z0-9_.-]{0,63})?$",
        description="Python items: the sandbox's named environment (third-party packages such as numpy) to run in; "
        'default: the service\'s (GROUPSCORE_SANDBOX_PYTHON_ENV), else the standard library alone; "": none.',
    )
    stop_on_first_failure: bool = False
