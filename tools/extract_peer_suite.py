"""Extract Math-Verify's labelled test cases (parametrize tables, asserts) into fixtures/peers/math_verify.jsonl.

Usage: .venv/bin/python tools/extract_peer_suite.py GIT_DIR [--rev HEAD] [--out fixtures/peers/math_verify.jsonl]

GIT_DIR is a (bare) clone of github.com/huggingface/Math-Verify (the `fetch` tool's snapshot works). The script reads
the test files with `git show`, parses them with `ast` and never imports or runs them: the cases are literals in
`@pytest.mark.parametrize` tables, and the options each case uses are read from the call in its test function's
`assert` (the `compare_strings(...)` helper's keywords, or a direct `verify(parse(gold), parse(pred))`). Only data
leaves the peer's repository; none of its code is copied.
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import subprocess
import sys
from pathlib import Path

# What the peer's `compare_strings` helper passes when a keyword is left out (read from its signature below).
# `match_types` maps to extraction targets: "latex" -> LatexExtractionConfig(boxed_match_priority=0),
# "expr" -> ExprExtractionConfig().
DEFAULT_PARSE_TARGETS = ["latex", "expr"]
DEFAULT_VERIFY = {"precision": 6, "strict": True, "allow_set_relation_comp": False}


class NotLiteral(ValueError):
    """A node the extractor cannot turn into data (a variable, a mock, a computed object)."""


def _literal(node: ast.AST) -> object:
    """A parametrize entry as data: literals, f-strings over `math.<fn>(literal)`, and config constructors as
    {"config": Name, **kwargs}."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.Tuple, ast.List)):
        return [_literal(elt) for elt in node.elts]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _literal(node.operand)
        if isinstance(value, (int, float)):
            return -value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(value.value)
            elif isinstance(value, ast.FormattedValue):
                spec = "".join(_literal(v) for v in value.format_spec.values) if value.format_spec else ""
                parts.append(format(_math_call(value.value), spec))
        return "".join(parts)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id.endswith("Config"):
        return {"config": node.func.id, **{kw.arg: _literal(kw.value) for kw in node.keywords}}
    raise NotLiteral(ast.dump(node)[:120])


def _math_call(node: ast.AST) -> object:
    """`math.sqrt(17)` and the like: the only computed values the peer's tables hold."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "math"
        and not node.keywords
    ):
        return getattr(math, node.func.attr)(*(_literal(a) for a in node.args))
    return _literal(node)


def _helper_defaults(tree: ast.Module) -> dict[str, object]:
    """Keyword defaults of the `compare_strings` helper, read from its signature."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "compare_strings":
            args = node.args.args[-len(node.args.defaults) :]
            return {a.arg: _literal(d) for a, d in zip(args, node.args.defaults)}
    return {}


def _parametrize(func: ast.FunctionDef) -> tuple[list[str], list[tuple[int, list[object]]]] | None:
    for deco in func.decorator_list:
        if isinstance(deco, ast.Call) and isinstance(deco.func, ast.Attribute) and deco.func.attr == "parametrize":
            names = [n.strip() for n in _literal(deco.args[0]).split(",")]
            rows = [(row.lineno, _literal(row)) for row in deco.args[1].elts]
            return names, rows
    return None


def _calls(node: ast.AST, name: str) -> list[ast.Call]:
    return [n for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name]


def _options(call: ast.Call, row: dict[str, object], helper: dict[str, object]) -> dict[str, object]:
    """The peer options of one `compare_strings` call: the helper's defaults, overridden by keywords, with names
    bound to the row's parametrize values."""
    options = dict(helper)
    for kw in call.keywords:
        value = row[kw.value.id] if isinstance(kw.value, ast.Name) else _literal(kw.value)
        options[kw.arg] = value
    return options


def _peer_options(options: dict[str, object]) -> dict[str, object]:
    """Options in the peer's own terms, and whether they are its default `parse(x)` / `verify(g, p)`."""
    targets = list(options.get("match_types", DEFAULT_PARSE_TARGETS))
    out: dict[str, object] = {
        "api": "compare_strings",
        "extraction_targets": targets,
        "latex_boxed_match_priority": 0 if "latex" in targets else None,
        "precision": options.get("precision", DEFAULT_VERIFY["precision"]),
        "strict": options.get("strict", DEFAULT_VERIFY["strict"]),
        "allow_set_relation_comp": options.get("allow_set_relation_comp", False),
    }
    non_default = [k for k in ("precision", "strict", "allow_set_relation_comp") if out[k] != DEFAULT_VERIFY[k]]
    if targets != DEFAULT_PARSE_TARGETS:
        non_default.insert(0, "extraction_targets")
    out["non_default"] = non_default
    return out


def _gold_pred_expected(names: list[str], values: list[object]) -> dict[str, object]:
    row = dict(zip(names, values))
    expected = row.get("expected", row.get("result"))
    return {"row": row, "gold": row.get("gold"), "prediction": row.get("pred"), "expected": expected}


def extract_file(path: str, source: str) -> tuple[list[dict], list[dict]]:
    """(cases, skipped): every labelled pair of one test file, and each test that holds no string pair, with why."""
    tree = ast.parse(source)
    helper = _helper_defaults(tree)
    if not helper and "compare_strings" in source:
        helper = {
            "match_types": DEFAULT_PARSE_TARGETS,
            "precision": 6,
            "strict": True,
            "allow_set_relation_comp": False,
        }  # imported from test_all.py, whose signature says so
    cases, skipped = [], []
    for func in tree.body:
        if not (isinstance(func, ast.FunctionDef) and func.name.startswith("test_")):
            continue
        table = _parametrize(func)
        compare = _calls(func, "compare_strings")
        verify = _calls(func, "verify")
        if table is not None and compare:
            names, rows = table
            for index, (line, values) in enumerate(rows):
                case = _gold_pred_expected(names, values)
                options = _peer_options(_options(compare[0], case.pop("row"), helper))
                cases.append(
                    {**case, "file": path, "function": func.name, "index": index, "line": line, "peer_options": options}
                )
        elif table is not None and verify and _calls(func, "parse"):
            names, rows = table
            parse_calls = _calls(func, "parse")
            if any(c.keywords or len(c.args) != 1 for c in parse_calls) or verify[0].keywords:
                skipped.append({"file": path, "function": func.name, "why": "parse/verify with arguments not read"})
                continue
            for index, (line, values) in enumerate(rows):
                case = _gold_pred_expected(names, values)
                case.pop("row")
                cases.append(
                    {
                        **case,
                        "file": path,
                        "function": func.name,
                        "index": index,
                        "line": line,
                        "peer_options": {
                            "api": "parse/verify",
                            "extraction_targets": DEFAULT_PARSE_TARGETS,
                            "latex_boxed_match_priority": 50,
                            "precision": 6,
                            "strict": True,
                            "allow_set_relation_comp": False,
                            "non_default": [],
                        },
                    }
                )
        elif table is not None:
            names, rows = table
            for index, (line, values) in enumerate(rows):
                row = dict(zip(names, values))
                cases.append(
                    {
                        "gold": None,
                        "prediction": row.get("pred"),
                        "expected": row.get("expected"),
                        "file": path,
                        "function": func.name,
                        "index": index,
                        "line": line,
                        "peer_options": {
                            "api": "parse",
                            "extraction_targets": [row.get("config")],
                            "non_default": ["extraction_targets"],
                        },
                        "kind": "extraction_only",
                    }
                )
        else:
            literal = [c for c in compare if len(c.args) == 2]
            asserted = _literal_asserts(func, literal, helper, path)
            cases.extend(asserted)
            if not asserted:
                skipped.append(
                    {
                        "file": path,
                        "function": func.name,
                        "why": "no labelled string pair: asserts on mocks, sympy objects or parser internals",
                    }
                )
            elif len(asserted) < len(func.body):
                skipped.append(
                    {
                        "file": path,
                        "function": func.name,
                        "why": f"{len(asserted)} string assert(s) extracted; the rest compare sympy objects",
                    }
                )
    return cases, skipped


def _literal_asserts(func: ast.FunctionDef, calls: list[ast.Call], helper: dict, path: str) -> list[dict]:
    """`assert compare_strings("g", "p", ...) == 1` written out in a test body."""
    out = []
    for stmt in func.body:
        if not isinstance(stmt, ast.Assert) or not isinstance(stmt.test, ast.Compare):
            continue
        call = stmt.test.left
        if call not in calls:
            continue
        try:
            gold, pred = (_literal(a) for a in call.args)
            expected = _literal(stmt.test.comparators[0])
        except NotLiteral:
            continue
        options = _peer_options(_options(call, {}, helper))
        out.append(
            {
                "gold": gold,
                "prediction": pred,
                "expected": expected,
                "file": path,
                "function": func.name,
                "index": len(out),
                "line": stmt.lineno,
                "peer_options": options,
            }
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("git_dir")
    parser.add_argument("--rev", default="HEAD")
    parser.add_argument("--out", default="fixtures/peers/math_verify.jsonl")
    args = parser.parse_args(argv)
    git = ["git", f"--git-dir={args.git_dir}"]
    commit = subprocess.run([*git, "rev-parse", args.rev], check=True, capture_output=True, text=True).stdout.strip()
    files = subprocess.run(
        [*git, "ls-tree", "-r", "--name-only", commit, "tests/"], check=True, capture_output=True, text=True
    ).stdout.split()
    cases, skipped = [], []
    for path in sorted(f for f in files if f.endswith(".py")):
        source = subprocess.run([*git, "show", f"{commit}:{path}"], check=True, capture_output=True, text=True).stdout
        got, why = extract_file(path, source)
        cases.extend(got)
        skipped.extend(why)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w") as fh:
        for case in cases:
            stem = Path(case["file"]).stem
            case = {"id": f"mv-{stem}-{case['function']}-{case['index']}", "commit": commit, **case}
            case.setdefault("kind", "pair")
            case["default_api"] = case["kind"] == "pair" and not case["peer_options"]["non_default"]
            fh.write(json.dumps(case, ensure_ascii=False) + "\n")
    pairs = [c for c in cases if c.get("kind", "pair") == "pair"]
    print(f"{len(cases)} cases ({len(pairs)} gold/prediction pairs) from {commit[:12]} -> {out}", file=sys.stderr)
    for item in skipped:
        print(f"  not a pair: {item['file']}::{item['function']}: {item['why']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
