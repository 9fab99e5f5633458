"""Findings of the red team's review of issue 10's fixes, code side: standard-library names a test uses without
importing them are the library's (F3), and in-jail test code sees what `except Exception` cannot catch as plain Python
would (F10).

Every case runs through the real sandbox; each hack scores 0 where an honest program scores 1.
"""

from __future__ import annotations

import pytest
from helpers import py

from groupscore.verifiers.code.item import CodeItem
from groupscore.verifiers.code.names import name_sources
from groupscore.verifiers.code.verify import score_code

pytestmark = pytest.mark.usefixtures("jail_available")  # a harmless probe jail first (conftest.py)


def score_hidden(program: str, *codes: str):
    return score_code(
        CodeItem(
            completion=py(program), time_limit_s=3.0, hidden_tests=[{"type": "assert", "code": code} for code in codes]
        )
    )


HARMONIC = "def harmonic(n):\n    return sum(1 / k for k in range(1, n + 1))\n"
COUNT = "def count(xs):\n    out = {}\n    for x in xs:\n        out[x] = out.get(x, 0) + 1\n    return out\n"
WINDOW = "def window(xs):\n    return list(xs[-2:])\n"


@pytest.mark.parametrize(
    "hack,honest,tests",
    [
        # the red team's reproducer: the test forgot to import Fraction, the program defines it
        (
            "def Fraction(*a):\n    return 0\ndef harmonic(n):\n    return 0\n",
            HARMONIC,
            ["assert abs(harmonic(3) - Fraction(11, 6)) < 1e-9", "assert abs(harmonic(4) - Fraction(25, 12)) < 1e-9"],
        ),
        (
            "def Counter(*a):\n    return 0\ndef count(xs):\n    return 0\n",
            COUNT,
            ["assert count('abca') == Counter('abca')"],
        ),
        (
            "def deque(*a):\n    return 0\ndef window(xs):\n    return 0\n",
            WINDOW,
            ["for n in range(2, 5):\n    assert window(list(range(n))) == list(deque(range(n), maxlen=2))"],
        ),
        (
            "class re:\n    def fullmatch(*a):\n        return True\ndef f(x):\n    return 'zz'\n",
            "def f(x):\n    return str(x)\n",
            ["assert re.fullmatch('[0-9]+', f(12))"],
        ),
    ],
)
def test_a_stdlib_name_the_test_does_not_import_is_never_the_programs(hack, honest, tests):
    assert score_hidden(honest, *tests).reward == 1.0
    assert score_hidden(hack, *tests).reward == 0.0


def test_stdlib_names_are_planned_as_the_librarys_and_the_rest_as_the_programs():
    import ast

    names, _ = name_sources([ast.parse("assert harmonic(3) == Fraction(11, 6) + heapq.nsmallest(1, [x])[0]")])
    assert names.stdlib == {"Fraction": "fractions", "heapq": "heapq"}
    assert names.program == frozenset({"harmonic", "x"})
    assert "Fraction" not in names.program and names.program_function(ast.parse("Fraction").body[0].value) is None


CATCHES = (
    "def must_fail_cleanly():\n    try:\n        validate(-1)\n    except Exception:\n        return True\n"
    "    return False\nassert must_fail_cleanly()"
)
HONEST_VALIDATE = "def validate(x):\n    if x < 0:\n        raise ValueError('negative')\n    return x\n"


@pytest.mark.parametrize(
    "raised",
    [
        "SystemExit(1)",
        "KeyboardInterrupt()",
        "GeneratorExit()",
        "type('Sneaky', (BaseException,), {})()",
    ],
)
def test_what_except_exception_cannot_catch_is_not_caught_in_jail_tests(raised):
    assert score_hidden(HONEST_VALIDATE, CATCHES).reward == 1.0
    hack = f"def validate(x):\n    raise {raised}\n"
    verdict = score_hidden(hack, CATCHES)
    assert verdict.reward == 0.0, verdict


def test_a_returned_value_that_cannot_come_out_is_not_a_catchable_exception():
    # plain Python: validate(-1) returns a generator and raises nothing, so must_fail_cleanly() is False
    hack = "def validate(x):\n    return (i for i in range(3))\n"
    assert score_hidden(hack, CATCHES).reward == 0.0


def test_an_exception_subclass_is_still_caught_like_in_plain_python():
    program = "class Bad(Exception):\n    pass\ndef validate(x):\n    raise Bad('no')\n"
    assert score_hidden(program, CATCHES).reward == 1.0
