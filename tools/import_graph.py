"""Prints groupscore's import graph from the code and checks it against the one-way flow; exit 1 on any violation.

    .venv/bin/python tools/import_graph.py              # package graph, then every violation
    .venv/bin/python tools/import_graph.py --modules    # also every module-level edge
    .venv/bin/python tools/import_graph.py --view DIR   # build DIR/groupscore as the installed package looks (below)

Where the code is: `[tool.setuptools] package-dir` in pyproject.toml maps import names to folders (`groupscore` is
`cli/`, `groupscore.verifiers` is `verifiers/`, ...). Every `.py` file under a mapped folder is a module; a folder
with an `__init__.py` inside a mapped one is a subpackage, which `packages` must list or the wheel leaves it out.

What counts as an import (read from each module's AST, nothing is imported):
- `import x` and `from x import y` anywhere in the file: at module level, and inside functions (a deferred import is
  still a dependency; it only moves the cost to the first call);
- `importlib.import_module("groupscore....")` with a literal name, and the registry's `"module:function"` strings
  (`"groupscore.verifiers.math.verify:score_math"`), which are imports in all but syntax;
- imports under `if TYPE_CHECKING:` are kept apart ("typing" edges). They must follow the flow too: a type from a
  higher layer in a lower one's signature is the same coupling, only unchecked at run time. They do not count for
  the module-level cycle check, which is about what Python runs.

The flow (FLOW below, the table in the README's layout section): each top-level package may import only the packages
it lists; `groupscore` itself (`cli/`) sits on top and nothing imports it. Checked:
1. every arrow between top-level packages is allowed by FLOW (an unknown top-level package is a violation too);
2. no cycle between top-level packages, nor between sibling subpackages (`verifiers.math` <-> `verifiers.code`; a
   parent's own modules and its subpackages may use each other: the registry lists the kinds, the kinds use text.py);
3. no cycle among modules through imports that run when a module is imported (module level, not TYPE_CHECKING);
   cycles closed only by deferred (in-function) imports are listed as warnings: they work, but say the split is off;
4. every subpackage on disk is listed in pyproject's `packages`, and every listed package exists.

`--view DIR` builds DIR/groupscore/ (a folder of symlinks: cli/'s files, and one link per mapped package) so that
tools that find a package's files through its folder, as import-linter's grimp does, see the whole package: with
the editable install `groupscore`'s folder is `cli/` alone. `make lint` runs `lint-imports` with it on PYTHONPATH.

Over ~450 lines, and one file because a script under tools/ runs with no import path set up; its four parts (the
layout from pyproject, the imports from the AST, the checks, the view) are one pass over one graph.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys
import tomllib
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT_NAME = "groupscore"
TOP = "cli"  # how the root package's own modules (cli/) are named in the package graph

# Which of our top-level packages each one may import (besides itself). The README's layout table says the same.
FLOW: dict[str, frozenset[str]] = {
    TOP: frozenset(
        {
            "train",
            "testing",
            "client",
            "service",
            "runtime",
            "environments",
            "verifiers",
            "sandbox",
            "bounded",
            "schema",
        }
    ),
    "train": frozenset({"client", "service", "schema", "verifiers", "environments"}),
    "testing": frozenset({"client", "service", "runtime", "environments", "verifiers", "schema"}),
    "client": frozenset({"schema"}),
    "service": frozenset({"runtime", "environments", "verifiers", "schema"}),
    # The runtime scores through the verifiers; it runs programs that no verifier judges (SandboxFusion's /run_code, the
    # readiness probe) in the sandbox itself: runtime/programs.py.
    "runtime": frozenset({"verifiers", "bounded", "sandbox", "schema"}),
    # Environments sit beside the verifiers, above the sandbox: sessions run in its jails, and a final-message
    # checker scores with a built-in verifier.
    "environments": frozenset({"verifiers", "sandbox", "schema"}),
    "verifiers": frozenset({"bounded", "sandbox", "schema"}),
    "sandbox": frozenset(),
    "bounded": frozenset(),
    "schema": frozenset(),
}

KINDS = ("module", "deferred", "typing", "dynamic")  # where an import sits; see the docstring


@dataclass(frozen=True)
class Edge:
    source: str  # importing module
    target: str  # imported module (the deepest of ours the name resolves to)
    line: int
    kind: str  # one of KINDS


@dataclass
class Graph:
    root: Path
    modules: dict[str, Path]  # module name -> file
    packages: set[str]  # names of regular packages (have an __init__.py)
    edges: list[Edge] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # layout problems found while reading
    warnings: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- reading the layout


# The thin client's own distribution (groupscore-client): its pyproject maps client/ and schema/ from beside it.
CLIENT_DIST = "client-dist"


def read_mapping(root: Path) -> tuple[dict[str, Path], list[str]]:
    """package-dir (import name -> folder) and packages list of pyproject.toml and, where it exists, of
    client-dist/pyproject.toml (groupscore-client ships client/ and schema/): one installed `groupscore` from both."""
    package_dir: dict[str, Path] = {}
    listed: list[str] = []
    for project in (root, root / CLIENT_DIST):
        if project != root and not (project / "pyproject.toml").is_file():
            continue
        with open(project / "pyproject.toml", "rb") as f:
            setuptools = tomllib.load(f).get("tool", {}).get("setuptools", {})
        for name, folder in setuptools.get("package-dir", {}).items():
            if name not in package_dir:  # groupscore-client's own copy of groupscore/__init__.py: cli/'s counts
                package_dir[name] = Path(os.path.normpath(project / folder))
        listed += [name for name in setuptools.get("packages", []) if name not in listed]
    if ROOT_NAME not in package_dir:
        raise SystemExit(f"pyproject.toml: [tool.setuptools] package-dir does not map {ROOT_NAME!r}")
    return package_dir, listed


def folder_of(package: str, package_dir: dict[str, Path]) -> Path:
    """Where setuptools looks for `package`: the longest mapped prefix, then the rest as folders."""
    parts = package.split(".")
    for n in range(len(parts), 0, -1):
        prefix = ".".join(parts[:n])
        if prefix in package_dir:
            return package_dir[prefix].joinpath(*parts[n:])
    return Path(*parts)


def find_modules(root: Path) -> Graph:
    package_dir, listed = read_mapping(root)
    modules: dict[str, Path] = {}
    packages: set[str] = set()
    problems: list[str] = []
    mapped_folders = {p.resolve() for p in package_dir.values()}
    for name, folder in sorted(package_dir.items()):
        if not (folder / "__init__.py").is_file():
            problems.append(f"layout: package-dir maps {name} to {folder.relative_to(root)}/, which has no __init__.py")
            continue
        for dirpath, dirnames, filenames in os.walk(folder):
            here = Path(dirpath)
            # A folder mapped to a name of its own is read under that name; one without __init__.py is not a package.
            dirnames[:] = sorted(
                d
                for d in dirnames
                if d.isidentifier()
                and (here / d).resolve() not in mapped_folders
                and (here / d / "__init__.py").is_file()
            )
            rel = here.relative_to(folder).parts
            package = ".".join((name, *rel))
            packages.add(package)
            for filename in sorted(filenames):
                if not filename.endswith(".py") or filename.count(".") != 1:
                    continue
                stem = filename[:-3]
                modules[package if stem == "__init__" else f"{package}.{stem}"] = here / filename
    for package in sorted(packages - set(listed)):
        problems.append(
            f"layout: {package} ({folder_of(package, package_dir).relative_to(root)}/) is not in "
            "pyproject's packages: a wheel would leave it out"
        )
    for package in sorted(set(listed) - packages):
        problems.append(f"layout: pyproject's packages lists {package}, which has no folder with an __init__.py")
    return Graph(root=root, modules=modules, packages=packages, problems=problems)


# ---------------------------------------------------------------- reading imports


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class _Imports(ast.NodeVisitor):
    """Collects (name, line, kind) for every import in one module, resolving relative imports."""

    def __init__(self, module: str, is_package: bool):
        self.package = module if is_package else module.rpartition(".")[0]
        self.found: list[tuple[str, str | None, int, str]] = []  # (module, name imported from it, line, kind)
        self._depth = 0  # inside a def or lambda
        self._typing = 0  # inside `if TYPE_CHECKING:`

    def _kind(self) -> str:
        return "typing" if self._typing else "deferred" if self._depth else "module"

    def _scoped(self, node: ast.AST) -> None:
        self._depth += 1
        self.generic_visit(node)
        self._depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _scoped

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            self._typing += 1
            for child in node.body:
                self.visit(child)
            self._typing -= 1
            for child in node.orelse:
                self.visit(child)
        else:
            self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.found.append((alias.name, None, node.lineno, self._kind()))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base = self.package.split(".")
            if node.level > 1:
                base = base[: -(node.level - 1)]
            stem = ".".join(base + ([node.module] if node.module else []))
        else:
            stem = node.module or ""
        # `from a import b` imports module a.b when there is one, else the name b from module a; resolve() decides.
        for alias in node.names:
            self.found.append((stem, None if alias.name == "*" else alias.name, node.lineno, self._kind()))

    def visit_Constant(self, node: ast.Constant) -> None:
        # importlib.import_module("groupscore.x") and the registry's "groupscore.x.y:function" scorer paths.
        value = node.value
        if isinstance(value, str) and value.startswith(ROOT_NAME + ".") and " " not in value:
            name = value.partition(":")[0]
            if all(part.isidentifier() for part in name.split(".")):
                self.found.append((name, None, node.lineno, "typing" if self._typing else "dynamic"))


def resolve(module: str, name: str | None, modules: dict[str, Path]) -> str | None:
    """The module of ours that `import module` / `from module import name` loads: module.name when that is a module,
    else module. None for other projects' modules; "" for a name of ours that is no module (a broken import)."""
    if module.split(".")[0] != ROOT_NAME:
        return None
    if name is not None and f"{module}.{name}" in modules:
        return f"{module}.{name}"
    return module if module in modules else ""


def read_imports(root: Path) -> Graph:
    graph = find_modules(root)
    for module, path in sorted(graph.modules.items()):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        except SyntaxError as e:
            graph.problems.append(f"syntax: {path.relative_to(root)}:{e.lineno}: {e.msg}")
            continue
        visitor = _Imports(module, is_package=path.name == "__init__.py")
        visitor.visit(tree)
        seen: set[tuple[str, str]] = set()
        missing: set[tuple[str, int]] = set()
        for name, attr, line, kind in visitor.found:
            target = resolve(name, attr, graph.modules)
            if target is None:
                continue
            if not target:
                if (name, line) in missing:
                    continue
                missing.add((name, line))
                graph.problems.append(
                    f"missing: {path.relative_to(root)}:{line} imports {name}, which is no module "
                    "of ours (or its folder is not mapped in pyproject)"
                )
                continue
            if target == module or (target, kind) in seen:
                continue
            seen.add((target, kind))
            graph.edges.append(Edge(module, target, line, kind))
    return graph


# ---------------------------------------------------------------- the checks


def top_package(module: str, packages: set[str]) -> str:
    """The top-level package a module is in: `verifiers` for groupscore.verifiers.math.verify, TOP for cli/'s own."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and f"{ROOT_NAME}.{parts[1]}" in packages else TOP


def top_packages(packages: set[str]) -> set[str]:
    return {p.split(".")[1] for p in packages if p.count(".") >= 1}


def containing_package(module: str, packages: set[str]) -> str:
    return module if module in packages else module.rpartition(".")[0]


def strongly_connected(nodes: Iterable[str], arrows: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one node (iterative: no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for start in sorted(nodes):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(arrows.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(arrows.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        out.append(sorted(component))
    return sorted(out)


def one_cycle(component: list[str], arrows: dict[str, set[str]]) -> list[str]:
    """A shortest cycle through the component's first node, for the message (BFS inside the component)."""
    members = set(component)
    start = component[0]
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        next_frontier = []
        for node in frontier:
            for child in sorted(arrows.get(node, ())):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [*reversed(path), start]
                if child in members and child not in previous:
                    previous[child] = node
                    next_frontier.append(child)
        frontier = next_frontier
    return component


@dataclass
class Report:
    package_arrows: dict[tuple[str, str], list[Edge]]
    violations: list[str]
    warnings: list[str]


def check(graph: Graph) -> Report:
    tops = top_packages(graph.packages)
    violations = list(graph.problems)
    warnings = list(graph.warnings)

    for name in sorted(tops - set(FLOW)):
        violations.append(f"flow: {ROOT_NAME}.{name} is not in the flow table (tools/import_graph.py FLOW)")

    package_arrows: dict[tuple[str, str], list[Edge]] = defaultdict(list)
    for edge in graph.edges:
        a, b = top_package(edge.source, graph.packages), top_package(edge.target, graph.packages)
        if a != b:
            package_arrows[(a, b)].append(edge)

    # 1. arrows against the flow
    for (a, b), edges in sorted(package_arrows.items()):
        if b not in FLOW.get(a, frozenset()):
            for e in edges:
                where = f"{graph.modules[e.source].relative_to(graph.root)}:{e.line}"
                violations.append(
                    f"flow: {_label(a)} -> {_label(b)} ({e.kind}): {e.source} imports {e.target} at {where}"
                )

    # 2. cycles between top-level packages, and between the subpackages inside each
    top_arrows: dict[str, set[str]] = defaultdict(set)
    for a, b in package_arrows:
        top_arrows[a].add(b)
    for component in strongly_connected(top_arrows, top_arrows):
        cycle = " -> ".join(_label(p) for p in one_cycle(component, top_arrows))
        violations.append(f"cycle: packages {cycle}")
    sub_arrows: dict[str, set[str]] = defaultdict(set)
    for edge in graph.edges:
        a = containing_package(edge.source, graph.packages)
        b = containing_package(edge.target, graph.packages)
        # Siblings only: a parent's own modules and its subpackages use each other by design (verifiers/registry.py
        # lists the kinds, the kinds use verifiers/text.py).
        if (
            top_package(edge.source, graph.packages) == top_package(edge.target, graph.packages)
            and not a.startswith(b + ".")
            and not b.startswith(a + ".")
            and a != b
        ):
            sub_arrows[a].add(b)
    for component in strongly_connected(sub_arrows, sub_arrows):
        violations.append(f"cycle: subpackages {' -> '.join(one_cycle(component, sub_arrows))}")

    # 3. module cycles: import-time ones are violations, deferred-only ones warnings
    runtime: dict[str, set[str]] = defaultdict(set)
    everything: dict[str, set[str]] = defaultdict(set)
    for edge in graph.edges:
        if edge.kind == "module":
            runtime[edge.source].add(edge.target)
        if edge.kind != "typing":
            everything[edge.source].add(edge.target)
    runtime_components = strongly_connected(runtime, runtime)
    for component in runtime_components:
        violations.append(f"cycle: modules (at import time) {' -> '.join(one_cycle(component, runtime))}")
    runtime_members = {m for c in runtime_components for m in c}
    for component in strongly_connected(everything, everything):
        if not set(component) <= runtime_members:
            cycle = " -> ".join(one_cycle(component, everything))
            warnings.append(f"cycle: modules (through deferred imports) {cycle}")
    return Report(package_arrows=dict(package_arrows), violations=violations, warnings=warnings)


def _label(package: str) -> str:
    return f"{ROOT_NAME} (cli/)" if package == TOP else package


# ---------------------------------------------------------------- output


def print_graph(graph: Graph, report: Report, modules: bool, out=sys.stdout) -> None:
    counts: dict[str, dict[str, dict[str, int]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(int)))
    for (a, b), edges in report.package_arrows.items():
        for e in edges:
            counts[a][b][e.kind] += 1
    tops = top_packages(graph.packages)
    order = [p for p in FLOW if p in tops or p == TOP] + sorted(tops - set(FLOW))
    print(f"package graph ({len(graph.modules)} modules, {len(graph.edges)} imports of ours):", file=out)
    for a in order:
        targets = counts.get(a, {})
        if not targets:
            print(f"  {_label(a)} -> (nothing of ours)", file=out)
            continue
        parts = []
        for b in [p for p in order if p in targets]:
            kinds = ", ".join(f"{n} {k}" for k, n in sorted(targets[b].items()))
            bad = "" if b in FLOW.get(a, frozenset()) else "  AGAINST THE FLOW"
            parts.append(f"{_label(b)} ({kinds}){bad}")
        print(f"  {_label(a)} -> " + ("\n" + " " * (len(_label(a)) + 6)).join(parts), file=out)
    if modules:
        print("module imports:", file=out)
        for e in sorted(graph.edges, key=lambda e: (e.source, e.target)):
            print(f"  {e.source} -> {e.target} ({e.kind}, line {e.line})", file=out)
    for w in report.warnings:
        print(f"warning: {w}", file=out)
    for v in report.violations:
        print(f"VIOLATION {v}", file=out)
    print(f"{len(report.violations)} violation(s), {len(report.warnings)} warning(s)", file=out)


def build_view(root: Path, view: Path) -> Path:
    """DIR/groupscore as installed: a real folder with links to cli/'s entries and to each mapped package's folder."""
    package_dir, _ = read_mapping(root)
    target = view / ROOT_NAME
    if target.is_symlink() or target.is_file():
        target.unlink()
    if target.exists():  # only links and folders we made live here; remove them, never follow a link
        for dirpath, dirnames, filenames in os.walk(target, topdown=False):
            for name in filenames + dirnames:
                path = Path(dirpath) / name
                if path.is_symlink() or name in filenames:
                    path.unlink()
                else:
                    path.rmdir()
        target.rmdir()
    target.mkdir(parents=True)
    for name, folder in sorted(package_dir.items(), key=lambda kv: kv[0].count(".")):
        if name == ROOT_NAME:
            for entry in sorted(folder.iterdir()):
                if entry.name != "__pycache__" and not (target / entry.name).exists():
                    (target / entry.name).symlink_to(entry.resolve())
            continue
        place = target.joinpath(*name.split(".")[1:])
        if place.exists() or place.is_symlink():
            if place.resolve() == folder.resolve():
                continue  # a subpackage already in its parent's folder
            place.unlink()
        place.parent.mkdir(parents=True, exist_ok=True)
        place.symlink_to(folder.resolve(), target_is_directory=True)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--root",
        type=Path,
        default=Path(__file__).resolve().parent.parent,
        help="the repository (holds pyproject.toml); default: this script's",
    )
    parser.add_argument("--modules", action="store_true", help="also print every module-level edge")
    parser.add_argument("--json", action="store_true", help="print the graph and the findings as JSON")
    parser.add_argument("--view", type=Path, help="build VIEW/groupscore (links) for import-linter and exit")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    if args.view:
        print(build_view(root, args.view.resolve()))
        return 0
    graph = read_imports(root)
    report = check(graph)
    if args.json:
        json.dump(
            {
                "packages": {f"{a} -> {b}": len(e) for (a, b), e in sorted(report.package_arrows.items())},
                "edges": [[e.source, e.target, e.line, e.kind] for e in graph.edges],
                "violations": report.violations,
                "warnings": report.warnings,
            },
            sys.stdout,
            indent=1,
        )
        print()
    else:
        print_graph(graph, report, args.modules)
    return 1 if report.violations else 0


if __name__ == "__main__":
    sys.exit(main())
