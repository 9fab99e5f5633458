"""Hypothesis strategies for edge-case completions, to fuzz any reward function from a pytest suite.

from hypothesis import given, settings
from groupscore.testing import assert_handles, strategies

@settings(max_examples=50, deadline=None)
@given(strategies.completions(base="The answer is \\\\boxed{4}."))
def test_my_reward_survives(completion):
    assert_handles(my_reward, completion, answer="4")
"""

from __future__ import annotations

import json

from hypothesis import strategies as st

from groupscore.testing.edges import EDGE_BUILDERS, EDGE_TEXTS, MB

_WHITESPACE = " \t\n\r\x0b\x0c\u00a0\u1680\u2000\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff\u200b"
_RTL = "\u05d0\u05d1\u05d2\u05ea\u0627\u0628\u062c\u062f\u0660\u0661\u0664\u06f4\u202b\u202e\u200f\u2067\u202c\u2069"
_EMOJI = ["🤔", "💯", "🔟", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇫🇷", "❤️", "🙂", "\ufe0f", "\u200d", "🧮"]
_LATEX_PIECES = [
    "\\boxed{",
    "\\fbox{",
    "\\frac{",
    "\\dfrac",
    "{",
    "}",
    "}}",
    "\\left(",
    "\\right]",
    "$",
    "$$",
    "^",
    "_",
    "\\sqrt",
    "\\sqrt[",
    "\\text{",
    "\\\\",
    "&",
    "\\begin{pmatrix}",
    "\\end{bmatrix}",
    "\\pm",
    "!",
    "10^{10^{",
    "\\infty",
    "1",
    "42",
    "x",
    "=",
    ",",
    " ",
    "\\,",
    "\\%",
    "\\$",
    "\\",
]
_FENCE_PIECES = [
    "```",
    "```python",
    "```py",
    "```cpp",
    "~~~",
    "````",
    "\n",
    "print(1)",
    "def f(x:",
    "    return",
    "import sys",
    "sys.exit(0)",
    "`",
    "```\n```",
    "# ```",
    "'''",
    '"""',
]
_TAG_PIECES = ["<think>", "</think>", "<answer>", "</answer>", "<", ">", "</", "/>", "<answer", " ", "\n", "42"]
_FILLERS = ["Let me think again. ", "a", "=", "\\boxed{1}", "9", " ", "\n", "🙂", "(", "<answer>"]


def empty_or_whitespace() -> st.SearchStrategy[str]:
    return st.text(alphabet=_WHITESPACE, max_size=64)


def unicode_text(max_size: int = 300) -> st.SearchStrategy[str]:
    """Any text (every Unicode category but lone surrogates, which no tokenizer emits)."""
    return st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=max_size)


def rtl_text(max_size: int = 80) -> st.SearchStrategy[str]:
    return st.text(alphabet=_RTL + "0123456789 =", max_size=max_size)


def emoji_text(max_size: int = 40) -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from([*_EMOJI, " ", "42", "\\boxed{"]), max_size=max_size).map("".join)


def combining_marks(base: st.SearchStrategy[str] | None = None) -> st.SearchStrategy[str]:
    """Text with combining marks stacked on its characters (Zalgo)."""
    marks = st.text(alphabet=[chr(c) for c in range(0x300, 0x370)] + ["\u20dd", "\u0489"], min_size=1, max_size=8)
    base = base if base is not None else st.text(alphabet="0123456789abcx=+ ", min_size=1, max_size=20)
    return st.tuples(base, marks).map(lambda t: "".join(ch + t[1] for ch in t[0]))


def with_null_bytes(base: str | st.SearchStrategy[str] = "") -> st.SearchStrategy[str]:
    """The base text with NUL characters inserted at drawn positions."""
    bases = st.just(base) if isinstance(base, str) else base

    def insert(pair: tuple[str, list[int]]) -> str:
        text, positions = pair
        for pos in sorted(positions, reverse=True):
            cut = pos % (len(text) + 1)
            text = text[:cut] + "\x00" + text[cut:]
        return text

    return st.tuples(bases, st.lists(st.integers(0, 10**6), min_size=1, max_size=5)).map(insert)


def truncated(base: str | st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """A prefix of the base, as a completion cut off by the token limit."""
    bases = st.just(base) if isinstance(base, str) else base
    return st.tuples(bases, st.integers(0, 10**6)).map(lambda t: t[0][: t[1] % (len(t[0]) + 1)])


def huge_text(min_size: int = MB) -> st.SearchStrategy[str]:
    """At least `min_size` characters (1 MB by default), built by repetition so drawing stays cheap."""
    return st.tuples(st.sampled_from(_FILLERS), st.sampled_from(["", "The answer is \\boxed{4}.", "```python\n"])).map(
        lambda t: t[1] + t[0] * (min_size // len(t[0]) + 1)
    )


def malformed_latex(max_pieces: int = 40) -> st.SearchStrategy[str]:
    """LaTeX-ish fragments glued at random: unbalanced braces, `\\boxed{` left open, stray commands."""
    return st.lists(st.sampled_from(_LATEX_PIECES), min_size=1, max_size=max_pieces).map("".join)


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=12,
)


def malformed_json() -> st.SearchStrategy[str]:
    """JSON text broken as model output breaks it: cut short, single quotes, trailing commas, NaN, raw newlines."""
    documents = _JSON_VALUES.map(json.dumps)
    breakages = st.sampled_from(["cut", "quotes", "comma", "nan", "newline", "python"])

    def breaking(t: tuple[str, str, int]) -> str:
        text, how, at = t
        if how == "cut":
            return text[: at % max(1, len(text))]
        if how == "quotes":
            return text.replace('"', "'")
        if how == "comma":
            return text.replace("]", ",]").replace("}", ",}") if ("]" in text or "}" in text) else text + ","
        if how == "nan":
            return text.replace("0", "NaN", 1) if "0" in text else '{"x": NaN, "y": Infinity}'
        if how == "newline":
            return text.replace(" ", "\n\x00 ", 1)
        return text.replace("null", "None").replace("true", "True").replace("false", "False")

    return st.tuples(documents, breakages, st.integers(0, 10**6)).map(breaking)


def broken_code_fences(max_pieces: int = 20) -> st.SearchStrategy[str]:
    """Markdown code fences left open, nested, mislabelled or empty, around half-written code."""
    return st.lists(st.sampled_from(_FENCE_PIECES), min_size=1, max_size=max_pieces).map("".join)


def broken_tags(max_pieces: int = 20) -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(_TAG_PIECES), min_size=1, max_size=max_pieces).map("".join)


def named_edge_cases(base: str = "") -> st.SearchStrategy[str]:
    """The fixed edge completions `groupscore check` always runs (see groupscore.testing.edges)."""
    return st.sampled_from(sorted(EDGE_TEXTS)).map(EDGE_TEXTS.__getitem__) | st.sampled_from(sorted(EDGE_BUILDERS)).map(
        lambda name: EDGE_BUILDERS[name](base)
    )


def completions(base: str | None = None, *, huge: bool = True) -> st.SearchStrategy[str]:
    """Any edge-case completion; with `base` (a real completion) also its truncations and corruptions."""
    options = [
        empty_or_whitespace(),
        unicode_text(),
        rtl_text(),
        emoji_text(),
        combining_marks(),
        malformed_latex(),
        malformed_json(),
        broken_code_fences(),
        broken_tags(),
        named_edge_cases(base or ""),
    ]
    if huge:
        options.append(huge_text())
    if base:
        options += [truncated(base), with_null_bytes(base), combining_marks(st.just(base[:200]))]
        # Corruptions appended to the real completion, which keeps the parts a reward looks for.
        options.append(st.tuples(st.just(base), malformed_latex() | broken_code_fences() | broken_tags()).map("".join))
    return st.one_of(options)
