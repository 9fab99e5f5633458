"""A tiny whitelisted evaluator for assertion expressions, run on the host over plain values that came out of the jail.

Only constants, containers, arithmetic, comparisons and a short list of pure builtins (abs, len, sorted, ...,
math.isclose) are understood; `check_expression` refuses anything else at plan time, so such an assertion is left to
the weaker in-jail mode. Every operation that could blow up on a hostile value (huge powers, sequence repetition) is
bounded, because the values compared here were produced by the program under test.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping
from typing import Any

from groupscore.verifiers.code.jail_runner import MAX_INT_DIGITS, NotPlainData, check_hash_spread

MAX_SEQUENCE_LEN = 10_000_000
MAX_POW_BITS = 1_000_000


class Unsupported(ValueError):
    """The expression uses something the host evaluator does not understand."""


class EvalFailed(ValueError):
    """Evaluating a supported expression failed (a bound was hit, or the operation raised)."""


_FUNCTIONS: dict[str, Any] = {
    f.__name__: f
    for f in (
        abs,
        round,
        len,
        sorted,
        set,
        frozenset,
        tuple,
        list,
        dict,
        str,
        int,
        float,
        bool,
        complex,
        min,
        max,
        sum,
        any,
        all,
        isinstance,
        type,
        repr,
        reversed,
        enumerate,
        zip,
    )
}  # not bytes(): bytes(10**12)
_MATH: dict[str, Any] = {
    name: getattr(math, name)
    for name in (
        "isclose",
        "fabs",
        "sqrt",
        "floor",
        "ceil",
        "isnan",
        "isinf",
        "isfinite",
        "trunc",
        "log",
        "exp",
        "gcd",
        "pi",
        "e",
        "tau",
        "inf",
        "nan",
    )
}
_METHODS = frozenset(
    {
        "lower",
        "upper",
        "strip",
        "lstrip",
        "rstrip",
        "split",
        "keys",
        "values",
        "items",
        "count",
        "startswith",
        "endswith",
        "index",
        "get",
    }
)
_TYPE_NAMES = frozenset(
    {"int", "float", "str", "bool", "list", "tuple", "dict", "set", "frozenset", "bytes", "complex"}
)

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.Not: operator.not_,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Invert: operator.invert,
}
_COMPARE = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}


def _singleton(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value in (None, True, False) and type(node.value) is not int


def check_expression(
    node: ast.AST, variables: frozenset[str] = frozenset(), shadowed: frozenset[str] = frozenset()
) -> None:
    """Raise Unsupported unless `node` only uses what `evaluate` understands; `variables` are the placeholder names."""

    def visit(n: ast.AST) -> None:
        if isinstance(n, ast.Constant):
            if not isinstance(n.value, (str, bytes, int, float, complex, bool, type(None))):
                raise Unsupported("constant")
        elif isinstance(n, (ast.List, ast.Tuple, ast.Set)):
            for e in n.elts:
                if isinstance(e, ast.Starred):
                    raise Unsupported("starred")
                visit(e)
        elif isinstance(n, ast.Dict):
            keys = [k for k in n.keys if k is not None]  # None: a `**mapping` entry
            if len(keys) < len(n.keys):
                raise Unsupported("dict unpacking")
            for e in [*keys, *n.values]:
                visit(e)
        elif isinstance(n, ast.Name):
            if n.id in shadowed or not (n.id in variables or n.id in _TYPE_NAMES):
                raise Unsupported(f"name {n.id}")
        elif isinstance(n, ast.Attribute):
            if not (
                isinstance(n.value, ast.Name) and n.value.id == "math" and n.attr in _MATH and "math" not in shadowed
            ):
                raise Unsupported("attribute")
        elif isinstance(n, ast.UnaryOp) and type(n.op) in _UNARY:
            visit(n.operand)
        elif isinstance(n, ast.BinOp) and type(n.op) in _BINARY:
            visit(n.left)
            visit(n.right)
        elif isinstance(n, ast.BoolOp):
            for v in n.values:
                visit(v)
        elif isinstance(n, ast.Compare):
            operands = [n.left, *n.comparators]
            for i, op in enumerate(n.ops):
                if isinstance(op, (ast.Is, ast.IsNot)) and not (_singleton(operands[i]) or _singleton(operands[i + 1])):
                    raise Unsupported("identity comparison")  # `is` between computed values depends on the process
            for o in operands:
                visit(o)
        elif isinstance(n, ast.IfExp):
            visit(n.test)
            visit(n.body)
            visit(n.orelse)
        elif isinstance(n, ast.Subscript):
            visit(n.value)
            visit(n.slice)
        elif isinstance(n, ast.Slice):
            for part in (n.lower, n.upper, n.step):
                if part is not None:
                    visit(part)
        elif isinstance(n, ast.Call):
            f = n.func
            if isinstance(f, ast.Name):
                if f.id not in _FUNCTIONS or f.id in shadowed:
                    raise Unsupported(f"call {f.id}")
            elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "math":
                if f.attr not in _MATH or "math" in shadowed:
                    raise Unsupported("math function")
            elif isinstance(f, ast.Attribute) and f.attr in _METHODS:
                visit(f.value)
            else:
                raise Unsupported("call")
            for a in n.args:
                if isinstance(a, ast.Starred):
                    raise Unsupported("starred")
                visit(a)
            for k in n.keywords:
                if k.arg is None:
                    raise Unsupported("keyword unpacking")
                visit(k.value)
        else:
            raise Unsupported(type(n).__name__)

    visit(node)


def evaluate(node: ast.AST, env: Mapping[str, Any] | None = None) -> Any:
    """Evaluate a checked expression; raises EvalFailed for anything that goes wrong."""
    env = env or {}
    try:
        return _eval(node, env)
    except EvalFailed:
        raise
    except RecursionError as exc:
        raise EvalFailed("value nested too deeply") from exc
    except Exception as exc:  # the operation itself raised, as it would have in the assertion
        raise EvalFailed(f"{type(exc).__name__}: {exc}"[:300]) from exc


def _eval(n: ast.AST | None, env: Mapping[str, Any]) -> Any:
    # None is the key of a dict's `**mapping` entry: check_expression refuses it, and so does the last line here.
    if isinstance(n, ast.Constant):
        return n.value
    if isinstance(n, ast.List):
        return [_eval(e, env) for e in n.elts]
    if isinstance(n, ast.Tuple):
        return tuple(_eval(e, env) for e in n.elts)
    if isinstance(n, ast.Set):
        return {_eval(e, env) for e in n.elts}
    if isinstance(n, ast.Dict):
        return {_eval(k, env): _eval(v, env) for k, v in zip(n.keys, n.values)}
    if isinstance(n, ast.Name):
        return env[n.id] if n.id in env else _FUNCTIONS[n.id]
    if isinstance(n, ast.Attribute):
        return _MATH[n.attr]
    if isinstance(n, ast.UnaryOp):
        return _UNARY[type(n.op)](_eval(n.operand, env))
    if isinstance(n, ast.BinOp):
        left, right = _eval(n.left, env), _eval(n.right, env)
        _check_size(type(n.op), left, right)
        return _BINARY[type(n.op)](left, right)
    if isinstance(n, ast.BoolOp):
        value: Any = None
        for v in n.values:
            value = _eval(v, env)
            if (isinstance(n.op, ast.And) and not value) or (isinstance(n.op, ast.Or) and value):
                return value
        return value
    if isinstance(n, ast.Compare):
        left = _eval(n.left, env)
        for op, right_node in zip(n.ops, n.comparators):
            right = _eval(right_node, env)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(n, ast.IfExp):
        return _eval(n.body, env) if _eval(n.test, env) else _eval(n.orelse, env)
    if isinstance(n, ast.Subscript):
        return _eval(n.value, env)[_eval(n.slice, env)]
    if isinstance(n, ast.Slice):
        return slice(*(None if p is None else _eval(p, env) for p in (n.lower, n.upper, n.step)))
    if isinstance(n, ast.Call):
        f = n.func
        if isinstance(f, ast.Name):
            fn = _FUNCTIONS[f.id]
        elif not isinstance(f, ast.Attribute):
            raise EvalFailed(f"cannot call {type(f).__name__}")
        elif isinstance(f.value, ast.Name) and f.value.id == "math":
            fn = _MATH[f.attr]
        else:
            receiver = _eval(f.value, env)
            if type(receiver) not in (str, bytes, list, tuple, dict):
                raise EvalFailed("method call on a non-builtin value")
            fn = getattr(receiver, f.attr)
        args = [_eval(a, env) for a in n.args]
        kwargs: dict[str, Any] = {}
        for k in n.keywords:
            if k.arg is None:  # `**mapping`, which check_expression refuses
                raise EvalFailed("keyword unpacking")
            kwargs[k.arg] = _eval(k.value, env)
        if fn in (str, repr, int) and args and isinstance(args[0], int) and args[0].bit_length() > MAX_POW_BITS:
            raise EvalFailed("integer too large")
        if fn is int and args and isinstance(args[0], (str, bytes)) and len(args[0]) > 2 * MAX_INT_DIGITS:
            # Python refuses over 4300 digits by default; a host that lifted that limit would pay n**1.6 for int().
            raise EvalFailed(f"int() of a string of more than {2 * MAX_INT_DIGITS} characters")
        if fn is type and len(args) != 1:
            raise EvalFailed("type() only tells a value's type here")  # three arguments would build a class
        if fn is sum and len(args) > 1 and not isinstance(args[1], (int, float, complex)):
            raise EvalFailed("sum() with a non-numeric start is not evaluated on the host")  # quadratic on lists
        if fn in (set, frozenset, dict) and len(args) == 1:
            args = [_hash_checked(fn, args[0])]
        return fn(*args, **kwargs)
    raise EvalFailed(f"cannot evaluate {type(n).__name__}")


def _hash_checked(fn: Any, values: Any) -> Any:
    """`values` for set(), frozenset() or dict(), refused when they would collide in hash (quadratic to build)."""
    if type(values) in (str, bytes, set, frozenset, dict):  # random string hashes; the codec checked the others
        return values
    items = list(values)
    try:
        check_hash_spread([p[0] for p in items if type(p) in (list, tuple) and len(p) == 2] if fn is dict else items)
    except NotPlainData as exc:
        raise EvalFailed(f"{fn.__name__}() of {exc}") from exc
    return items


def _check_size(op: type, left: Any, right: Any) -> None:
    if op is ast.Mult:
        for seq, count in ((left, right), (right, left)):
            if (
                isinstance(seq, (str, bytes, list, tuple))
                and isinstance(count, int)
                and len(seq) * count > MAX_SEQUENCE_LEN
            ):
                raise EvalFailed("sequence repetition too large")
    if op is ast.Mod and isinstance(left, (str, bytes)):
        raise EvalFailed("string formatting is not evaluated on the host")  # "%0999999999d" % 1
    if (
        op is ast.Pow
        and isinstance(left, int)
        and isinstance(right, int)
        and right > 0
        and max(left.bit_length(), 1) * right > MAX_POW_BITS
    ):
        raise EvalFailed("power too large")
