"""Which names of a test are the program's: decided once, from the test alone, never from what the program defines.

`NameSources`: the HumanEval `candidate`, names the test imports from the `solution` module, and free names that are
neither builtins nor the test's own nor helpers the item's prompt defines (nor standard-library names a test forgot
to import). Every other name keeps its meaning whatever the program defines: a program that defines `abs` or `range`
changes neither what the test computes nor which assertions the host evaluates (`assertions` converts them).
"""

from __future__ import annotations

import ast
import builtins
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeGuard

from groupscore.verifiers.code.extract import parse_python

_PYTHON_BUILTINS = frozenset(dir(builtins))


SOLUTION_MODULE = "solution"  # the name the jail's worker gives the program's module


@dataclass(frozen=True)
class NameSources:
    """Where the names of one test come from.

    Only three kinds of name are the program's: the HumanEval `candidate` (handled by the caller), names imported from
    the `solution` module (`from solution import f as g`, `import solution` then `solution.f`), and `program`: free
    names that are not builtins, not bound by the test, not helpers of the prompt and not dunders. Builtins always
    mean Python's, helpers the prompt's, bound names the test's own."""

    shadowed: frozenset[str]  # names the host evaluator must not read as builtins or `math`
    program: frozenset[str]  # free names taken from the program implicitly
    from_solution: dict[str, str]  # local name -> the program's function, from `from solution import ...`
    solution_modules: frozenset[str]  # local names of `import solution [as s]`
    star_import: bool  # `from <other module> import *`: a free name may be that module's, so none is implicit
    helpers: frozenset[str]  # free names the prompt defines: the runner binds the prompt's definitions
    modules: frozenset[str]  # free module names the test uses without importing (`math`): the real module
    stdlib: dict[str, str]  # free names of STDLIB_NAMES -> the standard-library module the runner takes them from

    def program_function(self, func: ast.expr) -> str | None:
        """The program's function a call's callee names, or None when it is not the program's."""
        if isinstance(func, ast.Name):
            if func.id in self.from_solution:
                return self.from_solution[func.id]
            return func.id if func.id in self.program and not self.star_import else None
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id in self.solution_modules
        ):
            return func.attr
        return None

    def residual_fields(self) -> dict[str, Any]:
        """What the runner needs to resolve the residual code's names (lists: the plan travels in marshal format)."""
        return {
            "program": sorted(self.program),
            "helpers": sorted(self.helpers),
            "modules": sorted(self.modules),
            "stdlib": sorted([name, module] for name, module in self.stdlib.items()),
        }


# Names tests use without importing them (MBPP keeps a test's imports in a separate field; HumanEval checks rely on
# the prompt's): they mean the standard library's, never the program's, so a program cannot define the `Fraction` or
# `Counter` a test compares its answer with. The runner binds them (module names to the module).
STDLIB_NAMES = {
    "Fraction": "fractions",
    "Decimal": "decimal",
    "Counter": "collections",
    "deque": "collections",
    "defaultdict": "collections",
    "OrderedDict": "collections",
    "namedtuple": "collections",
    **{
        module: module
        for module in (
            "collections",
            "fractions",
            "decimal",
            "itertools",
            "functools",
            "heapq",
            "bisect",
            "re",
            "string",
            "operator",
            "cmath",
            "statistics",
        )
    },
}


def _imports_math(node: ast.AST) -> bool:
    return isinstance(node, ast.Import) and all(a.name == "math" and a.asname in (None, "math") for a in node.names)


def is_solution_import(node: ast.AST) -> TypeGuard[ast.Import | ast.ImportFrom]:
    if isinstance(node, ast.ImportFrom):
        return node.level == 0 and node.module == SOLUTION_MODULE
    return isinstance(node, ast.Import) and all(a.name == SOLUTION_MODULE for a in node.names)


def name_sources(
    parts: list[ast.AST], prompt_helpers: Callable[[], frozenset[str]] = frozenset, scope: list[ast.stmt] | None = None
) -> tuple[NameSources, frozenset[str]]:
    """Where each name of a test's code (`parts` and `scope`) comes from, and the names bound within `scope` (check()'s
    body; one walk for both). `prompt_helpers`: what the item's prompt defines, asked only when the test has free
    names that are not builtins (most tests have none, and parsing a prompt costs)."""
    loads: set[str] = set()
    from_solution: dict[str, str] = {}
    solution_modules: set[str] = set()
    star_imports: list[ast.AST] = []

    def binding_nodes(roots: Any) -> list[ast.AST]:
        binding = []
        for node in (n for root in roots for n in ast.walk(root)):
            if type(node) is ast.Name and type(node.ctx) is ast.Load:
                loads.add(node.id)
            elif is_solution_import(node):
                for alias in node.names:
                    if isinstance(node, ast.Import):
                        solution_modules.add(alias.asname or alias.name)
                    elif alias.name != "*":
                        from_solution[alias.asname or alias.name] = alias.name
            elif not _imports_math(node):  # `import math` binds the real module: what the host evaluator means by math
                binding.append(node)
                if type(node) is ast.ImportFrom and any(a.name == "*" for a in node.names):
                    star_imports.append(node)
        return binding

    bound_in_scope = _bound_in(binding_nodes(scope or []))
    bound = bound_in_scope | _bound_in(binding_nodes(parts))
    # A name imported from the solution and also bound some other way has no one meaning by position: not the program's.
    from_solution = {k: v for k, v in from_solution.items() if k not in bound}
    solution_modules -= bound
    free = frozenset(loads) - bound - set(from_solution) - solution_modules
    modules = free & {"math"}
    unknown = [
        name
        for name in free - modules
        if name not in _PYTHON_BUILTINS and not (name.startswith("__") and name.endswith("__"))
    ]
    helpers = frozenset(unknown) & prompt_helpers() if unknown else frozenset()
    stdlib = {name: STDLIB_NAMES[name] for name in unknown if name in STDLIB_NAMES and name not in helpers}
    program = frozenset(unknown) - helpers - set(stdlib)
    shadowed = bound | helpers | set(from_solution) | solution_modules | set(stdlib)
    names = NameSources(
        frozenset(shadowed),
        program,
        from_solution,
        frozenset(solution_modules),
        bool(star_imports),
        helpers,
        modules,
        stdlib,
    )
    return names, bound_in_scope


def _bound_in(nodes: list[ast.AST]) -> frozenset[str]:
    """Every name these nodes bind (assignments, defs, imports, parameters, except and match targets): each node on its
    own, the caller walked the tree."""
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Name):
            if type(node.ctx) is not ast.Load:
                names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, _DEFINITIONS):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names if a.name != "*")
        elif isinstance(node, _NAMED_PATTERNS) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            names.add(node.rest)
    return frozenset(names)


_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_NAMED_PATTERNS = (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)


def _is_stub(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A function the prompt leaves to the program: only a docstring, `pass`, `...` or `raise NotImplementedError`."""
    return all(
        isinstance(s, ast.Pass)
        or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
        or (
            isinstance(s, ast.Raise) and "NotImplementedError" in {n.id for n in ast.walk(s) if isinstance(n, ast.Name)}
        )
        for s in node.body
    )


@functools.lru_cache(maxsize=1024)
def prompt_helper_names(prompt: str | None, entry_point: str | None = None) -> frozenset[str]:
    """Names an item's prompt defines for the test to use (HumanEval's `encode_cyclic`, `poly`): top-level functions
    with a body, classes and assigned names, never the entry point or a stub the program is to complete. The prompt is
    item data like the test, so these resolve to the prompt's definitions, not to whatever the program redefines."""
    tree = parse_python(prompt or "")
    if tree is None:
        return frozenset()
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef) or (
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not _is_stub(node)
        ):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    names.discard(entry_point or "")
    return frozenset(names)
