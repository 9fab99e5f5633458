"""Turns assert lines and HumanEval `check(candidate)` bodies into call pairs whose outcome the host decides.

`assert f(2, [1]) == 4` becomes: call `f(2, [1])` in the jail, bring the value out as plain data, evaluate `r0 == 4`
on the host. Any assertion whose arguments are literals and whose other parts `host_eval` understands converts; the
rest stays "residual" code, run by the jail's trusted runner against proxies of the candidate (the weaker mode).

Which names of a test are the program's is decided once, from the test alone (`names.NameSources`): a program that
defines `abs` or `range` changes neither what the test computes nor which assertions the host evaluates.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, overload

from groupscore.verifiers.code import host_eval
from groupscore.verifiers.code.names import NameSources, is_solution_import, name_sources, prompt_helper_names


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


def _is_trivial(stmt: ast.stmt) -> bool:
    """Statements that cannot fail a test on their own (an import from the solution: the calls it names will)."""
    if isinstance(stmt, ast.Pass) or is_solution_import(stmt):
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

    @overload
    def rewrite(self, node: ast.expr) -> ast.expr: ...  # a placeholder is a Name, a rebuilt node of node's class
    @overload
    def rewrite(self, node: ast.AST) -> ast.AST: ...
    def rewrite(self, node: ast.AST) -> ast.AST:
        if isinstance(node, ast.Call):
            fn = self.candidate_fn(node.func)
            if fn is not None:
                return self._placeholder(node, fn)
        fields: dict[str, Any] = {}
        changed = False
        for name in node._fields:
            value = getattr(node, name, None)
            new: Any
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


def convert_assert(
    stmt: ast.Assert, candidate_fn: Callable[[ast.expr], str | None], shadowed: frozenset[str], first_index: int
) -> tuple[list[Call], ConvertedAssert]:
    """Raises host_eval.Unsupported when the assertion cannot be decided on the host."""
    extractor = _CallExtractor(candidate_fn, shadowed, first_index)
    expression = extractor.rewrite(stmt.test)
    variables = frozenset(name for name, _ in extractor.placeholders)
    host_eval.check_expression(expression, variables=variables, shadowed=shadowed)
    return extractor.calls, ConvertedAssert(expression, tuple(extractor.placeholders), stmt)


def convert_statements(
    statements: list[ast.stmt], candidate_fn: Callable[[ast.expr], str | None], shadowed: frozenset[str]
) -> Conversion:
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
def convert_humaneval(
    test_code: str, entry_point: str, prompt: str | None = None
) -> tuple[Conversion, dict[str, Any] | None]:
    """HumanEval's test module: asserts of check() convert; the rest becomes a residual check() run in the jail."""
    tree = _parse(test_code, "the test code")
    checks = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check"]
    if len(checks) != 1 or len(checks[0].args.args) != 1:
        raise PlanError("the test code must define check(candidate) once")
    check = checks[0]
    parameter = check.args.args[0].arg
    # check() itself: its name, parameter, decorators and annotations are the test's; its body is walked once for both
    # the test's names and the parameter's rebinding.
    header = [
        ast.Name(id=check.name, ctx=ast.Store()),
        check.args,
        *check.decorator_list,
        *([check.returns] if check.returns else []),
    ]
    names, bound_in_check = name_sources(
        [n for n in tree.body if n is not check] + header,
        lambda: prompt_helper_names(prompt, entry_point),
        scope=check.body,
    )

    def candidate_fn(func: ast.expr) -> str | None:
        if isinstance(func, ast.Name) and func.id == parameter:
            return entry_point
        return names.program_function(func)

    # A check that rebinds its own parameter cannot be converted by position; leave all of it to the jail.
    rebinds = parameter in bound_in_check
    conversion = (
        Conversion(residual=list(check.body))
        if rebinds
        else convert_statements(check.body, candidate_fn, names.shadowed)
    )
    residual = None
    if conversion.residual:
        kept = [s for s in check.body if not _converted(s, conversion)] or [ast.Pass()]
        module = ast.Module(
            body=[ast.FunctionDef(**{**_fields(check), "body": kept}) if n is check else n for n in tree.body],
            type_ignores=[],
        )
        residual = {
            "kind": "humaneval",
            "code": ast.unparse(ast.fix_missing_locations(module)),
            "check": "check",
            "entry_point": entry_point,
            **names.residual_fields(),
            **_support(names, prompt),
        }
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
