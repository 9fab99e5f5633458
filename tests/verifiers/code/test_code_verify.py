"""The code verifier end to end: test styles, comparison modes, limits, statuses, C/C++, and failure handling."""

from __future__ import annotations

import math

import pytest
from helpers import py

from groupscore.sandbox import SandboxUnavailable
from groupscore.verifiers.code import sandbox_jobs
from groupscore.verifiers.code.compare import json_values_equal, stdout_matches
from groupscore.verifiers.code.item import CodeItem
from groupscore.verifiers.code.jail_runner import NotPlainData, decode_value, encode_value
from groupscore.verifiers.code.verify import score_code
from groupscore.verifiers.registry import parse_item, score_item

# -- pure parts ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        0,
        -7,
        10**30,
        1.5,
        float("inf"),
        "é",
        b"\x00\xff",
        1 + 2j,
        [1, (2, 3)],
        (),
        {1: "a", (2, 3): [None]},
        {1, 2},
        frozenset({"x"}),
        {"nested": [{"deep": (1.0, False)}]},
    ],
)
def test_codec_round_trips_plain_values_with_their_types(value):
    back = decode_value(encode_value(value))
    assert back == value and type(back) is type(value)


def test_codec_nan_round_trips():
    assert math.isnan(decode_value(encode_value(float("nan"))))


def nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


class FakeInt:
    __class__ = property(lambda self: int)  # passes isinstance(x, int), is no int

    def __eq__(self, other):
        return True


# ids by name: a FakeInt's would carry its address, which differs between pytest-xdist's workers
@pytest.mark.parametrize(
    "value",
    [object(), iter([1]), FakeInt(), lambda: 1, nested(300), [object()]],
    ids=["object", "iterator", "fake-int", "lambda", "nested-300", "list-of-object"],
)
def test_codec_refuses_anything_but_builtin_data(value):
    with pytest.raises(NotPlainData):
        encode_value(value)


class AlwaysEqualInt(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


class LyingList(list):
    def __iter__(self):
        return iter(["lie"])

    def copy(self):
        return ["lie"]


def test_codec_reads_subclasses_as_their_base_data_ignoring_overrides():
    import collections

    assert decode_value(encode_value(AlwaysEqualInt(5))) == 5 and decode_value(encode_value(AlwaysEqualInt(5))) != 6
    assert decode_value(encode_value(LyingList([1, 2]))) == [1, 2]
    assert decode_value(encode_value(collections.Counter("aab"))) == {"a": 2, "b": 1}
    point = collections.namedtuple("Point", "x y")(1, 2)
    assert type(decode_value(encode_value(point))) is tuple and decode_value(encode_value(point)) == (1, 2)
    assert type(decode_value(encode_value(collections.OrderedDict(a=1)))) is dict


def test_stdout_comparison_modes():
    assert stdout_matches("3\n", "3\n", "exact") and not stdout_matches("3", "3\n", "exact")
    assert stdout_matches("1  2\n3   \n\n", "1 2\n3", "whitespace")
    assert not stdout_matches("1 2 3", "1 2\n3", "whitespace")  # lines still count
    assert stdout_matches("0.3333333 x\n1e3", "0.33333333 x 1000", "float", 1e-6)
    assert not stdout_matches("0.334", "0.333", "float", 1e-6)
    assert not stdout_matches("1 2", "1 2 3", "float")
    assert stdout_matches("nan inf", "nan inf", "float")


def test_json_value_comparison():
    assert json_values_equal((1, [2, (3,)]), [1, [2, [3]]])  # JSON has no tuples
    assert not json_values_equal({1, 2}, [1, 2])
    assert json_values_equal([0.1 + 0.2, {"a": 1.0000001}], [0.3, {"a": 1}], float_tol=1e-6)
    assert not json_values_equal([0.1 + 0.2], [0.3])


# -- through the sandbox -------------------------------------------------------------------------------------------


def test_call_tests_use_json_semantics_and_optional_tolerance():
    program = "def pair(x):\n    return (x, x / 3)\n"
    exact = {"type": "call", "fn": "pair", "args": [1], "expected": [1, 1 / 3]}
    loose = {"type": "call", "fn": "pair", "args": [1], "expected": [1, 0.333333], "float_tol": 1e-5}
    strict = {"type": "call", "fn": "pair", "args": [1], "expected": [1, 0.333333]}
    verdict = score_code(CodeItem(completion=py(program), tests=[exact, loose, strict]))
    assert verdict.details["public_passed"] == 2 and verdict.status == "partial"


def test_kwargs_and_nested_structures_reach_the_function():
    program = "def f(xs, *, scale=1):\n    return {str(k): v * scale for k, v in xs.items()}\n"
    test = {
        "type": "call",
        "fn": "f",
        "args": [{"a": [1], "b": [2, 3]}],
        "kwargs": {"scale": 2},
        "expected": {"a": [1, 1], "b": [2, 3, 2, 3]},
    }
    assert score_code(CodeItem(completion=py(program), tests=[test])).reward == 1.0


def test_residual_assertions_see_builtin_exceptions_and_are_flagged_weaker():
    program = "def root(x):\n    if x < 0:\n        raise ValueError('negative')\n    return x ** 0.5\n"
    code = "try:\n    root(-1)\nexcept ValueError:\n    pass\nelse:\n    assert False\nassert root(4) == 2.0"
    verdict = score_code(CodeItem(completion=py(program), tests=[{"type": "assert", "code": code}]))
    assert verdict.reward == 1.0 and verdict.details["weaker_mode"] is True and "weaker mode" in verdict.reason
    wrong = score_code(
        CodeItem(completion=py("def root(x):\n    return abs(x) ** 0.5\n"), tests=[{"type": "assert", "code": code}])
    )
    assert wrong.reward == 0.0


def test_converted_asserts_are_not_weaker_mode():
    verdict = score_code(
        CodeItem(
            completion=py("def sq(x):\n    return x * x\n"),
            tests=[
                {"type": "assert", "code": "assert sq(3) == 9"},
                {"type": "assert", "code": "assert abs(sq(0.5) - 0.25) < 1e-9"},
            ],
        )
    )
    assert verdict.reward == 1.0 and verdict.details["weaker_mode"] is False


def test_stop_on_first_failure_counts_nothing_after_it():
    program = "def inc(x):\n    return x + 1 if x != 2 else 0\n"
    tests = [{"type": "call", "fn": "inc", "args": [i], "expected": i + 1} for i in range(5)]
    assert score_code(CodeItem(completion=py(program), tests=tests)).reward == pytest.approx(4 / 5)
    stopped = score_code(CodeItem(completion=py(program), tests=tests, stop_on_first_failure=True))
    assert stopped.reward == pytest.approx(2 / 5)


def test_all_tests_timing_out_is_status_timeout():
    program = "def spin(x):\n    while True:\n        pass\n"
    tests = [{"type": "call", "fn": "spin", "args": [i], "expected": 0} for i in range(2)]
    verdict = score_code(CodeItem(completion=py(program), tests=tests, time_limit_s=0.5))
    assert verdict.status == "timeout" and verdict.reward == 0.0
    assert "took longer than 0.5s" in verdict.reason


def test_import_that_never_finishes_is_a_timeout():
    verdict = score_code(
        CodeItem(
            completion=py("while True:\n    pass\ndef f():\n    return 1\n"),
            tests=[{"type": "call", "fn": "f", "expected": 1}],
            time_limit_s=0.5,
        )
    )
    assert verdict.status == "timeout"


def test_memory_hog_fails_its_test_only():
    program = "def f(n):\n    if n:\n        return len(bytearray(n << 20))\n    return 0\n"
    tests = [
        {"type": "call", "fn": "f", "args": [2000], "expected": 2000 << 20},
        {"type": "call", "fn": "f", "args": [0], "expected": 0},
    ]
    verdict = score_code(CodeItem(completion=py(program), tests=tests, memory_mb=128))
    assert verdict.details["public_passed"] == 1


def test_same_item_same_verdict():
    program = "def uniq(words):\n    return list(set(words))\n"
    item = CodeItem(
        completion=py(program),
        tests=[
            {
                "type": "call",
                "fn": "uniq",
                "args": [["pear", "fig", "kiwi", "plum"]],
                "expected": ["pear", "fig", "kiwi", "plum"],
            }
        ],
    )
    first, second = score_code(item), score_code(item)
    assert first.model_dump() == second.model_dump()


def test_python_stdio_tests():
    tests = [
        {"type": "stdio", "stdin": "3\n1 2 3\n", "stdout": "6\n"},
        {"type": "stdio", "stdin": "2\n0.1 0.2\n", "stdout": "0.3", "compare": "float"},
        {"type": "stdio", "stdin": "1\n5\n", "stdout": "5", "compare": "exact"},
    ]
    program = "n = int(input())\nprint(sum(float(x) if '.' in x else int(x) for x in input().split()))\n"
    verdict = score_code(CodeItem(completion=py(program), tests=tests))
    assert verdict.details["public_passed"] == 2  # the exact test expects no newline
    assert "exact comparison" in verdict.reason


C_SUM = '#include <stdio.h>\nint main(void){long a,b; if(scanf("%ld %ld",&a,&b)!=2) return 1; printf("%ld\\n", a+b); return 0;}\n'
CPP_SUM = '#include <iostream>\nint main(){long a,b; std::cin>>a>>b; std::cout<<a+b<<"\\n";}\n'
SUM_TESTS = [{"type": "stdio", "stdin": "1 2\n", "stdout": "3\n"}]
SUM_HIDDEN = [
    {"type": "stdio", "stdin": "40 2\n", "stdout": "42\n"},
    {"type": "stdio", "stdin": "5 0\n", "stdout": "5\n"},
]


@pytest.mark.parametrize("language,program", [("c", C_SUM), ("cpp", CPP_SUM)])
def test_c_and_cpp_stdio(language, program):
    good = score_code(
        CodeItem(language=language, completion=f"```{language}\n{program}```", tests=SUM_TESTS, hidden_tests=SUM_HIDDEN)
    )
    assert good.reward == 1.0 and good.status == "correct"
    wrong = program.replace("a+b", "a-b")
    bad = score_code(
        CodeItem(language=language, completion=f"```{language}\n{wrong}```", tests=SUM_TESTS, hidden_tests=SUM_HIDDEN)
    )
    assert bad.details["public_passed"] == 0 and bad.details["hidden_passed"] == 1  # only 5 - 0 == 5 + 0


@pytest.mark.parametrize("language", ["c", "cpp"])
def test_compile_error_is_an_error_verdict_with_reward_zero(language):
    verdict = score_code(CodeItem(language=language, completion=f"```{language}\nint main( {{\n```", tests=SUM_TESTS))
    assert verdict.status == "error" and verdict.reward == 0.0
    assert verdict.details["compile_error"] is True and "compile error" in verdict.reason


def test_call_tests_need_python():
    verdict = score_code(
        CodeItem(language="c", completion=f"```c\n{C_SUM}```", tests=[{"type": "call", "fn": "main", "expected": 0}])
    )
    assert verdict.status == "error" and "need language python" in verdict.reason


def test_no_program_is_no_answer_and_no_tests_is_an_error():
    no_code = score_code(CodeItem(completion="I would add the numbers.", tests=SUM_TESTS))
    assert no_code.status == "no_answer" and no_code.reward == 0.0 and no_code.details["public_total"] == 1
    assert score_code(CodeItem(completion=py("print(1)"))).status == "error"


def test_sandbox_unavailable_is_an_infra_error_verdict_and_nothing_runs(monkeypatch):
    def refuse(*args, **kwargs):
        raise SandboxUnavailable("nsjail cannot start: shared library libnl-route-3.so.200 is missing")

    monkeypatch.setattr(sandbox_jobs, "run_many", refuse)
    verdict = score_code(
        CodeItem(completion=py("def f():\n    return 1\n"), tests=[{"type": "call", "fn": "f", "expected": 1}])
    )
    assert verdict.status == "infra_error" and verdict.reward == 0.0  # nothing judged the program
    assert "sandbox unavailable" in verdict.reason and "libnl-route" in verdict.reason


def test_registry_routes_code_items_here():
    item = parse_item(
        {
            "verifier": "code",
            "id": 7,
            "completion": py("def f(x):\n    return x * 2\n"),
            "tests": [{"type": "assert", "code": "assert f(2) == 4"}],
            "hidden_tests": [{"type": "call", "fn": "f", "args": [5], "expected": 10}],
        }
    )
    verdict = score_item(item)
    assert verdict.id == 7 and verdict.reward == 1.0


def test_humaneval_style_body_completion():
    prompt = 'def add(a: int, b: int) -> int:\n    """Add two numbers."""\n'
    test = "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(-1, 1) == 0\n"
    item = CodeItem(
        completion="    return a + b\n",
        prompt=prompt,
        tests=[{"type": "humaneval", "test": test, "entry_point": "add"}],
    )
    assert score_code(item).reward == 1.0
    item = CodeItem(
        completion="    return a - b\n",
        prompt=prompt,
        tests=[{"type": "humaneval", "test": test, "entry_point": "add"}],
    )
    assert score_code(item).reward == 0.0  # one failing assert fails the whole check


def test_a_task_function_named_like_a_builtin_is_taken_from_the_program_by_import_only():
    # A builtin name in a test is Python's (a program must not change a test's meaning, see test_code_shadowing);
    # a task function named like one is tested with `from solution import max`, or with a call test.
    program = "def max(xs):\n    return sorted(xs)[-2]  # the task: second largest\n"
    item = CodeItem(
        completion=py(program),
        tests=[
            {"type": "assert", "code": "from solution import max\nassert max([1, 5, 3]) == 3"},
            {"type": "call", "fn": "max", "args": [[1, 5, 3]], "expected": 3},
        ],
    )
    verdict = score_code(item)
    assert verdict.reward == 1.0 and verdict.details["weaker_mode"] is False
