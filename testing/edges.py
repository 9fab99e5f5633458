"""Named edge-case completions that no reward function may crash or hang on.

Each builder takes the case's own completion text and returns the edge completion, so that truncations and
mutations stay close to what the reward normally sees. The hypothesis strategies draw from the same builders.
"""

from __future__ import annotations

from collections.abc import Callable

MB = 1 << 20


def _truncate_half(text: str) -> str:
    return text[: len(text) // 2]


def _truncate_last_char(text: str) -> str:
    return text[:-1]


def _truncate_in_box(text: str) -> str:
    # Cut right after the last opening of \boxed{ (or mid-answer-tag), as a completion hitting max_tokens would be.
    for marker in ("\\boxed{", "<answer>", "```"):
        at = text.rfind(marker)
        if at >= 0:
            return text[: at + len(marker) + 1]
    return text[: max(1, len(text) * 3 // 4)]


def _with_nulls(text: str) -> str:
    middle = len(text) // 2
    return "\x00" + text[:middle] + "\x00\x00" + text[middle:] + "\x00"


def _huge_prose(text: str) -> str:
    filler = "Let me double-check the previous step once more. "
    return filler * (MB // len(filler) + 1) + text


def _huge_line(text: str) -> str:
    return text + "=" * MB  # one 1 MB line with no break: line-based regexes and splitters


def _huge_number(text: str) -> str:
    return "The answer is \\boxed{" + "9" * 100_000 + "}"


def _huge_open_tags(text: str) -> str:
    # A megabyte of opening tags with no closing one: `<answer>(.*?)</answer>` rescans the rest from every opening.
    return "<think>" + "<answer>" * (MB // 8)


def _huge_open_boxes(text: str) -> str:
    return "\\boxed{" * (MB // 7)


EDGE_TEXTS: dict[str, str] = {
    "empty": "",
    "whitespace": " \n\t  \r\n \u00a0\u3000 ",
    "single_char": "}",
    "unicode_mixed": "答案是 ４２ — ½ ≈ 0.5, ∞ ≤ ∑ⁿ xᵢ, ﬁnal: Ⅻ",
    "rtl": "\u202eThe answer is 42\u202c الجواب هو ٤٢ התשובה היא 42",
    "emoji": "🤔 Let me think... 💯 The answer is 🔟 👍🏽 👨‍👩‍👧‍👦 \\boxed{🙂}",
    "combining_marks": "The a\u0301nswer i\u0336s 4\u0332\u03012 Z\u0351\u0364\u0300a\u0360\u0313l\u0489g\u0308o\u0301",
    "control_chars": "\x1b[31mred\x1b[0m\r\b\x7f\u200b\ufeff\u2028\u2029\x0c\x0b answer",
    "null_only": "\x00" * 64,
    "latex_unclosed_box": "The answer is \\boxed{",
    "latex_unbalanced": "So \\boxed{\\frac{1}{2} and then }}}{{{ \\left( \\sqrt{2",
    "latex_deep_nesting": "\\boxed{" + "{" * 500 + "1" + "}" * 500 + "}",
    "latex_pathological": "\\boxed{10^{10^{10^{10^{10}}}} + 9999999999! + \\frac{\\frac{\\frac{1}{0}}{0}}{}}",
    "latex_bad_commands": "\\begin{pmatrix} 1 & 2 \\\\ \\frac{}{} \\end{bmatrix} \\undefined{x} $$ $ \\",
    "json_truncated": '{"answer": "42", "steps": [1, 2',
    "json_malformed": '{\'answer\': 42, "a": [1, 2,], "b": NaN, "c": Infinity, }',
    "json_deep": "[" * 20_000,
    "fence_unclosed": "Here is the program:\n```python\ndef f(x):\n    return x +\n",
    "fence_empty": "```python\n```",
    "fence_mismatched": "````python\nprint(1)\n```\n``` ```python\n~~~",
    "fence_wrong_language": "```pythn\nprint(1)\n```\n```\nimport sys\n```",
    "tags_broken": "<think>hmm</answer><answer><think></think></answer><answer>",
    "parens_deep": "(" * 5_000 + "1" + ")" * 4_999,
}

EDGE_BUILDERS: dict[str, Callable[[str], str]] = {
    "truncated_half": _truncate_half,
    "truncated_last_char": _truncate_last_char,
    "truncated_in_answer": _truncate_in_box,
    "null_bytes_inside": _with_nulls,
    "huge_prose_1mb": _huge_prose,
    "huge_line_1mb": _huge_line,
    "huge_number": _huge_number,
    "huge_open_tags": _huge_open_tags,
    "huge_open_boxes": _huge_open_boxes,
}


def edge_completions(completion: str) -> dict[str, str]:
    """Every named edge completion, built around a case's own completion text."""
    out = dict(EDGE_TEXTS)
    out.update({name: build(completion) for name, build in EDGE_BUILDERS.items()})
    return out
