"""Program extraction from completions: fences, languages, block choice, unfenced code, prompts."""

from typing import get_args

from groupscore.cli import SANDBOX_LANGUAGES
from groupscore.sandbox import LANGUAGES, MAIN_FILE
from groupscore.verifiers.code.extract import LANGUAGE_TAGS, Language, ProgramExtraction, extract_program
from groupscore.verifiers.text import fenced_blocks

PY = ProgramExtraction("python")


def test_last_python_block_is_the_default():
    text = "First try:\n```python\nx = 1\n```\nBetter:\n```py\nx = 2\n```\n"
    assert extract_program(text, PY) == "x = 2\n"


def test_first_and_longest_choices():
    text = "```python\na = 1\nb = 2\n```\n```python\nc = 3\n```"
    assert extract_program(text, ProgramExtraction("python", block="first")) == "a = 1\nb = 2\n"
    assert extract_program(text, ProgramExtraction("python", block="longest")) == "a = 1\nb = 2\n"
    assert extract_program(text, ProgramExtraction("python", block="last")) == "c = 3\n"
    assert extract_program(text, ProgramExtraction("python", block="all")) == "a = 1\nb = 2\n\nc = 3\n"


def test_blocks_of_other_languages_are_ignored():
    text = "```python\nprint(1)\n```\n```bash\necho hi\n```\n"
    assert extract_program(text, PY) == "print(1)\n"


def test_only_other_language_blocks_means_no_program():
    assert extract_program("```cpp\nint main(){}\n```", PY) is None


def test_untagged_block_is_used_when_no_tagged_one():
    assert extract_program("Here:\n```\nprint(2)\n```", PY) == "print(2)\n"


def test_tagged_block_wins_over_untagged():
    assert (
        extract_program("```\nplain = 1\n```\n```python\ntagged = 1\n```\n```\nlast_plain = 1\n```", PY)
        == "tagged = 1\n"
    )


def test_unterminated_fence_runs_to_the_end():
    assert extract_program("Answer:\n```python\ndef f():\n    return 1\n", PY) == "def f():\n    return 1\n"


def test_unfenced_python_is_used_when_it_parses():
    assert extract_program("def f(x):\n    return x + 1\n", PY) == "def f(x):\n    return x + 1\n"


def test_unfenced_prose_is_no_program():
    assert extract_program("I think the answer is to add one to x.", PY) is None
    assert extract_program("", PY) is None
    assert extract_program("   \n", PY) is None


def test_c_and_cpp_tags():
    text = "```c++\n#include <cstdio>\nint main(){return 0;}\n```"
    assert extract_program(text, ProgramExtraction("cpp")).startswith("#include <cstdio>")
    assert (
        extract_program("```c\nint main(void){return 0;}\n```", ProgramExtraction("c")) == "int main(void){return 0;}\n"
    )
    assert extract_program("```cpp\nint main(){}\n```", ProgramExtraction("c")) is None


def test_unfenced_c_needs_a_telltale():
    assert extract_program('#include <stdio.h>\nint main(){puts("x");}\n', ProgramExtraction("c")) is not None
    assert extract_program("Just print x.", ProgramExtraction("c")) is None


def test_prompt_prefix_for_body_completions():
    prompt = 'def add(a, b):\n    """Add."""\n'
    assert (
        extract_program("    return a + b\n", ProgramExtraction("python", prompt=prompt))
        == prompt + "    return a + b\n"
    )
    # A full definition in a fence after the prompt simply redefines the function.
    full = "```python\ndef add(a, b):\n    return a + b\n```"
    assert (
        extract_program(full, ProgramExtraction("python", prompt=prompt))
        == prompt + "def add(a, b):\n    return a + b\n"
    )


def test_prompt_without_final_newline_gets_one_before_a_full_definition():
    prompt = 'def add(a, b):\n    """Add."""'
    got = extract_program(
        "```python\ndef add(a, b):\n    return a + b\n```", ProgramExtraction("python", prompt=prompt)
    )
    assert got == prompt + "\ndef add(a, b):\n    return a + b\n"


def test_body_only_completion_parses_with_the_prompt():
    prompt = "def f(x):\n"
    assert extract_program("    return x\n", ProgramExtraction("python", prompt=prompt)) == "def f(x):\n    return x\n"
    assert extract_program("    return x\n", PY) is None  # alone it is an indented fragment


def test_fence_with_attributes_and_tildes():
    blocks = fenced_blocks("~~~python title=x\na = 1\n~~~\n````py\n```\nb = 2\n````\n")
    assert [(b.tag, b.code) for b in blocks] == [("python", "a = 1\n"), ("py", "```\nb = 2\n")]


def test_empty_blocks_are_skipped():
    assert extract_program("```python\n```\n```python\nx = 1\n```\n```python\n\n```", PY) == "x = 1\n"


def test_pathological_unfenced_text_is_no_program_not_a_crash():
    assert extract_program("-" * 200_000 + "1", PY) is None
    assert extract_program("(" * 100_000, PY) is None
    assert extract_program("x = 1\x00", PY) is None


def test_the_item_languages_are_the_sandboxs():
    # The item's Literal is a type and cannot be built from the sandbox's tuple; this keeps the two one list.
    assert set(get_args(Language)) == set(LANGUAGES) == set(MAIN_FILE) == set(LANGUAGE_TAGS) == set(SANDBOX_LANGUAGES)
