"""Pulls the program out of a completion: fenced blocks of the item's language, or the whole text when it is code."""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from typing import Literal

from groupscore.verifiers.text import fenced_blocks

# The sandbox's languages (groupscore.sandbox.LANGUAGES; tests/verifiers/code/test_code_extract.py checks they are one
# list).
Language = Literal["python", "c", "cpp", "javascript", "typescript", "java", "go", "rust", "bash"]
BlockChoice = Literal["last", "first", "longest", "all"]

# Info-string words (lowercased) that name each language; an untagged fence counts for any language.
LANGUAGE_TAGS: dict[str, frozenset[str]] = {
    "python": frozenset({"python", "py", "python3", "py3"}),
    "c": frozenset({"c", "h"}),
    "cpp": frozenset({"cpp", "c++", "cc", "cxx", "hpp", "h++"}),
    "javascript": frozenset({"javascript", "js", "node", "nodejs", "mjs", "cjs"}),
    "typescript": frozenset({"typescript", "ts"}),
    "java": frozenset({"java"}),
    "go": frozenset({"go", "golang"}),
    "rust": frozenset({"rust", "rs"}),
    "bash": frozenset({"bash", "sh", "shell"}),
}

_C_LIKE = re.compile(r"#\s*include\s*[<\"]|\bint\s+main\s*\(|\bvoid\s+main\s*\(")
# Unfenced text counts as a program of these languages when it has one of their telltales.
_TELLTALE = {
    "c": _C_LIKE,
    "cpp": _C_LIKE,
    "javascript": re.compile(r"\bfunction\b|=>|\bconsole\.log\(|\brequire\(|^\s*(?:const|let)\s+\w+\s*=", re.M),
    "typescript": re.compile(r"\bfunction\b|=>|\bconsole\.log\(|^\s*(?:const|let)\s+\w+\s*[:=]", re.M),
    "java": re.compile(r"\bclass\s+\w+\s*\{|\bstatic\s+void\s+main\s*\("),
    "go": re.compile(r"^\s*package\s+main\b|^\s*func\s+\w+\s*\(", re.M),
    "rust": re.compile(r"^\s*(?:pub\s+)?fn\s+\w+\s*[<(]", re.M),
    "bash": re.compile(r"\A#!\s*/(?:usr/)?bin/(?:env\s+)?(?:ba)?sh\b|^\s*(?:echo|read|printf)\b", re.M),
}


@dataclass(frozen=True)
class ProgramExtraction:
    """Which program to take from a completion."""

    language: Language = "python"
    block: BlockChoice = "last"
    prompt: str | None = None  # prepended to what is extracted (HumanEval-style body completions)


def looks_like_program(code: str, language: Language, prompt: str | None = None) -> bool:
    """Whether unfenced text is the program itself: Python that parses (after the prompt), or another language's code
    with one of its telltales (`#include`, `func main(`, `class X {`, ...)."""
    if not code.strip():
        return False
    if language == "python":
        return _parses((prompt or "") + code)
    return bool(_TELLTALE[language].search(code))


def extract_program(completion: str, config: ProgramExtraction = ProgramExtraction()) -> str | None:
    """The program to run, or None when the completion holds none (status no_answer)."""
    blocks = [b for b in fenced_blocks(completion) if b.code.strip()]
    tags = LANGUAGE_TAGS[config.language]
    chosen = [b for b in blocks if b.tag in tags] or [b for b in blocks if b.tag == ""]
    if chosen:
        if config.block == "first":
            code = chosen[0].code
        elif config.block == "all":  # a solution split over several blocks (helpers, then the function)
            code = "\n".join(b.code for b in chosen)
        elif config.block == "longest":
            code = max(chosen, key=lambda b: len(b.code)).code  # max keeps the first of equal lengths
        else:
            code = chosen[-1].code
    elif blocks:
        return None  # fenced code, but all of it in other languages
    elif looks_like_program(completion, config.language, config.prompt):
        code = completion
    else:
        return None
    if config.prompt:
        # A body completion continues the prompt's function; a full definition after it simply redefines it.
        joined = config.prompt + code
        if config.language == "python" and not _parses(joined) and _parses(config.prompt + "\n" + code):
            joined = config.prompt + "\n" + code  # a prompt without a final newline, then a full definition
        return joined
    return code


@functools.lru_cache(maxsize=8)
def parse_python(code: str) -> ast.Module | None:
    """The program's syntax tree, or None when it does not parse. Cached for the few calls one item makes on the same
    text (is it a program? does it continue the prompt? which builtins does it define?): callers must not change it."""
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # ValueError: null bytes
        return None


def _parses(code: str) -> bool:
    return parse_python(code) is not None
