"""Turns assert lines and HumanEval `check(candidate)` bodies into call pairs whose outcome the host decides.

`assert f(2, [1]) == 4` becomes: call `f(2, [1])` in the jail, bring the value out as plain data, evaluate `r0 == 4`
on the host. Any assertion whose arguments are literals and whose other parts `host_eval` understands converts; the
rest stays "residual" code, run by the jail's trusted runner against proxies of the candidate (the weaker mode).

Which names of a test are the program's is decided here, once, from the test alone (`NameSources`): the HumanEval
`candidate`, names the test imports from the `solution` module, and free names that are neither builtins nor the test's
own nor helpers the item's prompt defines. Every other name keeps its meaning whatever the program defines: a program
that defines `abs` or `range` changes neither what the test computes nor which assertions the host evaluates.
"""

from __future__ import annotations

import ast
import builtins
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from groupscore.verifiers.code import host_eval
from groupscore.verifiers.code.extract import parse_python

_PYTHON_BUILTINS = frozenset(dir(builtins))


class PlanError(ValueError):
    """A test that cannot be used (its code does not parse, no check function, ...)."""


@dataclass(frozen=True)
class Call:
    fn: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ConvertedAssert:
    """An assertion evaluated on the host: `expression` names each call's result by a placeholder."""

    expression: ast.expr
    placeholders: tuple[tuple[str, int], ...]  # (placeholder name, index into the unit's calls)
    statement: ast.Assert  # as written, for messages

    @property
    def source(self) -> str:
        return ast.unparse(self.statement)  # only a failing public test's message needs it


@dataclass
class Conversion:
    calls: list[Call] = field(default_factory=list)
    asserts: list[ConvertedAssert] = field(default_factory=list)
    residual: list[ast.stmt] = field(default_factory=list)  # statements left to run in the jail


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
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in self.solution_modules:
            return func.attr
        return None

    def residual_fields(self) -> dict[str, Any]:
        """What the runner needs to resolve the residual code's names (lists: the plan travels in marshal format)."""
        return {"program": sorted(self.program), "helpers": sorted(self.helpers), "modules": sorted(self.modules),
                "stdlib": sorted([name, module] for name, module in self.stdlib.items())}


# Names tests use without importing them (MBPP keeps a test's imports in a separate field; HumanEval checks rely on
# the prompt's): they mean the standard library's, never the program's, so a program cannot define the `Fraction` or
# `Counter` a test compares its answer with. The runner binds them (module names to the module).
STDLIB_NAMES = {
    "Fraction": "fractions", "Decimal": "decimal", "Counter": "collections", "deque": "collections",
    "defaultdict": "collections", "OrderedDict": "collections", "namedtuple": "collections",
    **{module: module for module in ("collections", "fractions", "decimal", "itertools", "functools", "heapq", "bisect",
                                     "re", "string", "operator", "cmath", "statistics")},
}


def _imports_math(node: ast.AST) -> bool:
    return isinstance(node, ast.Import) and all(a.name == "math" and a.asname in (None, "math") for a in node.names)


def _is_solution_import(node: ast.AST) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level == 0 and node.module == SOLUTION_MODULE
    return isinstance(node, ast.Import) and all(a.name == SOLUTION_MODULE for a in node.names)


def name_sources(parts: list[ast.AST], prompt_helpers: Callable[[], frozenset[str]] = frozenset,
                 scope: list[ast.stmt] | None = None) -> tuple[NameSources, frozenset[str]]:
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
            elif _is_solution_import(node):
                for alias in node.names:  # type: ignore[attr-defined]
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
    unknown = [name for name in free - modules
               if name not in _PYTHON_BUILTINS and not (name.startswith("__") and name.endswith("__"))]
    helpers = frozenset(unknown) & prompt_helpers() if unknown else frozenset()
    stdlib = {name: STDLIB_NAMES[name] for name in unknown if name in STDLIB_NAMES and name not in helpers}
    program = frozenset(unknown) - helpers - set(stdlib)
    shadowed = bound | helpers | set(from_solution) | solution_modules | set(stdlib)
    names = NameSources(frozenset(shadowed), program, from_solution, frozenset(solution_modules), bool(star_imports),
                        helpers, modules, stdlib)
    return names, bound_in_scope


def _bound_in(nodes: list[ast.AST]) -> frozenset[str]:
    """Every name these nodes bind (assignments, defs, imports, parameters, except and match targets): each node on its
    own, the caller walked the tree."""
    names: set[str] = set()
    for node in nodes:
        kind = type(node)
        if kind is ast.Name:
            if type(node.ctx) is not ast.Load:  # type: ignore[attr-defined]
                names.add(node.id)  # type: ignore[attr-defined]
        elif kind is ast.arg:
            names.add(node.arg)  # type: ignore[attr-defined]
        elif kind in _DEFINITIONS:
            names.add(node.name)  # type: ignore[attr-defined]
        elif kind is ast.Import or kind is ast.ImportFrom:
            names.update((a.asname or a.name).split(".")[0] for a in node.names if a.name != "*")  # type: ignore[attr-defined]
        elif kind in _NAMED_PATTERNS and node.name:  # type: ignore[attr-defined]
            names.add(node.name)  # type: ignore[attr-defined]
        elif kind is ast.MatchMapping and node.rest:  # type: ignore[attr-defined]
            names.add(node.rest)  # type: ignore[attr-defined]
    return frozenset(names)


_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_NAMED_PATTERNS = (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)


def _is_stub(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A function the prompt leaves to the program: only a docstring, `pass`, `...` or `raise NotImplementedError`."""
    return all(isinstance(s, ast.Pass) or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
               or (isinstance(s, ast.Raise) and "NotImplementedError" in {n.id for n in ast.walk(s) if isinstance(n, ast.Name)})
               for s in node.body)


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
        is_def = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not _is_stub(node)
        if is_def or isinstance(node, ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    names.discard(entry_point or "")
    return frozenset(names)


def _is_trivial(stmt: ast.stmt) -> bool:
    """Statements that cannot fail a test on their own (an import from the solution: the calls it names will)."""
    if isinstance(stmt, ast.Pass) or _is_solution_import(stmt):
        return True
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, (ast.Constant, ast.Name)):
        return True  # a docstring, or a bare name such as a stray `print`
    return isinstance(stmt, ast.Import) and all(a.name in ("math", "random", "copy", "string") for a in stmt.names)


class _CallExtractor:
    """Rewrites an assertion's expression with each call into the candidate replaced by a placeholder name.

    Functional: changed nodes are new, unchanged subtrees (a large literal, say) are shared with the original, which
    stays as it was for the residual code if the assertion does not convert."""

    def __init__(self, candidate_fn: Callable[[ast.expr], str | None], shadowed: frozenset[str], first_index: int):
        self.candidate_fn, self.shadowed, self.next_index = candidate_fn, shadowed, first_index
        self.calls: list[Call] = []
        self.placeholders: list[tuple[str, int]] = []

    def rewrite(self, node: ast.AST) -> ast.AST:
        if isinstance(node, ast.Call):
            fn = self.candidate_fn(node.func)
            if fn is not None:
                return self._placeholder(node, fn)
        fields, changed = {}, False
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, ast.AST):
                new = self.rewrite(value)
            elif isinstance(value, list):
                new = [self.rewrite(v) if isinstance(v, ast.AST) else v for v in value]
                new = value if all(a is b for a, b in zip(new, value)) else new
            else:
                new = value
            changed |= new is not value
            fields[name] = new
        if not changed:
            return node
        return ast.copy_location(node.__class__(**fields), node)

    def _placeholder(self, node: ast.Call, fn: str) -> ast.Name:
        args = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                raise host_eval.Unsupported("starred argument")
            args.append(self._literal(a))
        kwargs = {}
        for k in node.keywords:
            if k.arg is None:
                raise host_eval.Unsupported("keyword unpacking")
            kwargs[k.arg] = self._literal(k.value)
        name = f"__gs_r{len(self.calls)}"
        self.placeholders.append((name, self.next_index))
        self.calls.append(Call(fn, tuple(args), kwargs))
        self.next_index += 1
        return ast.copy_location(ast.Name(id=name, ctx=ast.Load()), node)

    def _literal(self, node: ast.expr) -> Any:
        host_eval.check_expression(node, shadowed=self.shadowed)  # no placeholders: nested candidate calls refuse
        try:
            return host_eval.evaluate(node)
        except host_eval.EvalFailed as exc:
            raise host_eval.Unsupported(f"argument does not evaluate: {exc}") from exc


def convert_assert(stmt: ast.Assert, candidate_fn: Callable[[ast.expr], str | None], shadowed: frozenset[str],
                   first_index: int) -> tuple[list[Call], ConvertedAssert]:
    """Raises host_eval.Unsupported when the assertion cannot be decided on the host."""
    extractor = _CallExtractor(candidate_fn, shadowed, first_index)
    expression = extractor.rewrite(stmt.test)
    variables = frozenset(name for name, _ in extractor.placeholders)
    host_eval.check_expression(expression, variables=variables, shadowed=shadowed)
    return extractor.calls, ConvertedAssert(expression, tuple(extractor.placeholders), stmt)


def convert_statements(statements: list[ast.stmt], candidate_fn: Callable[[ast.expr], str | None],
                       shadowed: frozenset[str]) -> Conversion:
    out = Conversion()
    for stmt in statements:
        if isinstance(stmt, ast.Assert):
            try:
                calls, converted = convert_assert(stmt, candidate_fn, shadowed, len(out.calls))
            except (host_eval.Unsupported, RecursionError):  # too deep to take apart: the jail runs it
                out.residual.append(stmt)
                continue
            out.calls.extend(calls)
            out.asserts.append(converted)
        elif not _is_trivial(stmt):
            out.residual.append(stmt)
    return out


def _parse(code: str, what: str) -> ast.Module:
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise PlanError(f"{what} does not parse") from exc


@functools.lru_cache(maxsize=4096)  # a GRPO group scores many completions against the same tests
def convert_assert_code(code: str, prompt: str | None = None) -> tuple[Conversion, dict[str, Any] | None]:
    """An MBPP-style assert line (or a few statements): the conversion and the residual, if any.

    Cached: callers must not mutate what comes back."""
    tree = _parse(code, "the assert code")
    if not any(isinstance(node, ast.Assert) for node in ast.walk(tree)):
        raise PlanError("the assert code holds no assertion")
    names, _ = name_sources([tree], lambda: prompt_helper_names(prompt))
    conversion = convert_statements(tree.body, names.program_function, names.shadowed)
    residual = None
    if conversion.residual:
        # Statements run in order, so keep everything before the last residual one (imports, assignments).
        code = ast.unparse(ast.Module(body=[s for s in tree.body if not _converted(s, conversion)], type_ignores=[]))
        residual = {"kind": "assert", "code": code, **names.residual_fields(), **_support(names, prompt)}
    return conversion, residual


def _converted(stmt: ast.stmt, conversion: Conversion) -> bool:
    return isinstance(stmt, ast.Assert) and stmt not in conversion.residual


def _support(names: NameSources, prompt: str | None) -> dict[str, Any]:
    # The prompt travels with the residual code only when the test uses something it defines.
    return {"support": prompt if names.helpers else None}


@functools.lru_cache(maxsize=4096)
def convert_humaneval(test_code: str, entry_point: str,
                      prompt: str | None = None) -> tuple[Conversion, dict[str, Any] | None]:
    """HumanEval's test module: asserts of check() convert; the rest becomes a residual check() run in the jail."""
    tree = _parse(test_code, "the test code")
    checks = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check"]
    if len(checks) != 1 or len(checks[0].args.args) != 1:
        raise PlanError("the test code must define check(candidate) once")
    check = checks[0]
    parameter = check.args.args[0].arg
    # check() itself: its name, parameter, decorators and annotations are the test's; its body is walked once for both
    # the test's names and the parameter's rebinding.
    header = [ast.Name(id=check.name, ctx=ast.Store()), check.args, *check.decorator_list, *([check.returns] if check.returns else [])]
    names, bound_in_check = name_sources([n for n in tree.body if n is not check] + header,
                                         lambda: prompt_helper_names(prompt, entry_point), scope=check.body)

    def candidate_fn(func: ast.expr) -> str | None:
        if isinstance(func, ast.Name) and func.id == parameter:
            return entry_point
        return names.program_function(func)

    # A check that rebinds its own parameter cannot be converted by position; leave all of it to the jail.
    rebinds = parameter in bound_in_check
    conversion = Conversion(residual=list(check.body)) if rebinds else convert_statements(check.body, candidate_fn, names.shadowed)
    residual = None
    if conversion.residual:
        kept = [s for s in check.body if not _converted(s, conversion)] or [ast.Pass()]
        module = ast.Module(body=[ast.FunctionDef(**{**_fields(check), "body": kept}) if n is check else n for n in tree.body],
                            type_ignores=[])
        residual = {"kind": "humaneval", "code": ast.unparse(ast.fix_missing_locations(module)),
                    "check": "check", "entry_point": entry_point, **names.residual_fields(), **_support(names, prompt)}
    return conversion, residual


def _fields(node: ast.AST) -> dict[str, Any]:
    return {name: getattr(node, name) for name in node._fields if hasattr(node, name)}


def evaluate_assert(converted: ConvertedAssert, results: list[Any]) -> tuple[bool, str]:
    """Host side: (passed, why not). `results` are the unit's decoded call results."""
    env = {name: results[index] for name, index in converted.placeholders}
    try:
        return bool(host_eval.evaluate(converted.expression, env)), ""
    except host_eval.EvalFailed as exc:
        return False, str(exc)
