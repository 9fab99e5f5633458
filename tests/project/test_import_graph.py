"""tools/import_graph.py: the repository's import graph follows the flow, and the check fails on planted faults."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TOOL = REPO / "tools" / "import_graph.py"

_spec = importlib.util.spec_from_file_location("import_graph", TOOL)
assert _spec and _spec.loader
import_graph = importlib.util.module_from_spec(_spec)
sys.modules["import_graph"] = import_graph  # dataclasses resolve their module by name
_spec.loader.exec_module(import_graph)


def test_repository_follows_the_flow() -> None:
    run = subprocess.run([sys.executable, str(TOOL)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 violation(s)" in run.stdout
    # The graph is printed from the code: the bottom layers are there and import nothing of ours.
    for leaf in ("sandbox", "bounded", "schema"):
        assert f"  {leaf} -> (nothing of ours)" in run.stdout


def _tree(
    root: Path, files: dict[str, str], packages: list[str] | None = None, more_mapping: dict[str, str] | None = None
) -> Path:
    mapping = {
        "groupscore": "cli",
        "groupscore.verifiers": "verifiers",
        "groupscore.sandbox": "sandbox",
        "groupscore.schema": "schema",
        **(more_mapping or {}),
    }
    listed = packages if packages is not None else [*mapping, "groupscore.verifiers.math"]
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text(
        "[tool.setuptools]\n"
        "package-dir = {" + ", ".join(f'"{k}" = "{v}"' for k, v in mapping.items()) + "}\n"
        "packages = [" + ", ".join(f'"{p}"' for p in listed) + "]\n"
    )
    base = {
        "cli/__init__.py": "",
        "cli/cli.py": "from groupscore.verifiers import registry\n",
        "verifiers/__init__.py": "",
        "verifiers/math/__init__.py": "",
        "verifiers/registry.py": "from groupscore.verifiers.math import verify\n",
        "verifiers/math/verify.py": "from ..text import fenced\nfrom groupscore.sandbox.jail import run\n",
        "verifiers/text.py": "import re\n\ndef fenced(): ...\n",
        "sandbox/__init__.py": "",
        "sandbox/jail.py": "import os\n\ndef run(): ...\n",
        "schema/__init__.py": "",
        "schema/verdict.py": "from pydantic import BaseModel\n",
    }
    for rel, text in {**base, **files}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def _check(root: Path):
    graph = import_graph.read_imports(root)
    return graph, import_graph.check(graph)


def test_clean_synthetic_tree_passes(tmp_path: Path) -> None:
    graph, report = _check(_tree(tmp_path, {}))
    assert report.violations == [] and report.warnings == []
    edges = {(e.source, e.target, e.kind) for e in graph.edges}
    # the relative import resolves against the package, `from pkg import module` names the module
    assert ("groupscore.verifiers.math.verify", "groupscore.verifiers.text", "module") in edges
    assert ("groupscore.cli", "groupscore.verifiers.registry", "module") in edges
    assert ("groupscore.verifiers.math.verify", "groupscore.sandbox.jail", "module") in edges
    assert import_graph.main(["--root", str(tmp_path)]) == 0


def test_planted_backwards_arrow_and_cycle_fail(tmp_path: Path) -> None:
    # sandbox -> verifiers is against the flow, and closes a package cycle with verifiers -> sandbox.
    _tree(tmp_path, {"sandbox/jail.py": "from groupscore.verifiers.text import fenced\n\ndef run(): ...\n"})
    _, report = _check(tmp_path)
    text = "\n".join(report.violations)
    assert (
        "flow: sandbox -> verifiers (module): groupscore.sandbox.jail imports groupscore.verifiers.text at "
        "sandbox/jail.py:1"
    ) in text
    assert "cycle: packages sandbox -> verifiers -> sandbox" in text
    assert "cycle: modules" not in text  # no module imports itself round the loop (jail -> text only)
    run = subprocess.run(
        [sys.executable, str(TOOL), "--root", str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 1
    assert "AGAINST THE FLOW" in run.stdout and "VIOLATION cycle: packages" in run.stdout


def test_module_cycle_at_import_time_fails_deferred_one_warns(tmp_path: Path) -> None:
    _tree(
        tmp_path,
        {
            "verifiers/text.py": "from groupscore.verifiers import registry\n\ndef fenced(): ...\n",
            "schema/verdict.py": "def f():\n    from groupscore.schema import wire\n",
            "schema/wire.py": "from groupscore.schema.verdict import f\n",
        },
    )
    _, report = _check(tmp_path)
    cycles = [v for v in report.violations if v.startswith("cycle: modules")]
    assert cycles == [
        "cycle: modules (at import time) groupscore.verifiers.math.verify -> groupscore.verifiers.text "
        "-> groupscore.verifiers.registry -> groupscore.verifiers.math.verify"
    ]
    assert report.warnings == [
        "cycle: modules (through deferred imports) groupscore.schema.verdict -> "
        "groupscore.schema.wire -> groupscore.schema.verdict"
    ]


def test_deferred_typing_and_dynamic_imports_count_for_the_flow(tmp_path: Path) -> None:
    _tree(
        tmp_path,
        {
            "schema/verdict.py": """\
            from typing import TYPE_CHECKING
            if TYPE_CHECKING:
                from groupscore.verifiers.registry import KINDS

            def load():
                import groupscore.sandbox.jail

            SCORER = "groupscore.verifiers.math.verify:score_math"
            """,
        },
    )
    _, report = _check(tmp_path)
    flows = sorted(v.split(":")[1].strip() for v in report.violations if v.startswith("flow:"))
    assert flows == ["schema -> sandbox (deferred)", "schema -> verifiers (dynamic)", "schema -> verifiers (typing)"]


def test_layout_problems_fail(tmp_path: Path) -> None:
    # a subpackage missing from `packages` (a wheel drops it), a listed one that is not there, an import of a module
    # that does not exist, a top-level package the flow table does not know, and the root package imported upwards
    _tree(
        tmp_path,
        {
            "verifiers/registry.py": "from groupscore.verifiers.math import verify\nimport groupscore.verifiers.nope\n",
            "verifiers/sql/__init__.py": "",
            "schema/reward.py": "from groupscore import cli\n",
        },
        packages=[
            "groupscore",
            "groupscore.verifiers",
            "groupscore.verifiers.math",
            "groupscore.sandbox",
            "groupscore.schema",
            "groupscore.ghost",
        ],
    )
    _, report = _check(tmp_path)
    text = "\n".join(report.violations)
    assert "layout: groupscore.verifiers.sql (verifiers/sql/) is not in pyproject's packages" in text
    assert "layout: pyproject's packages lists groupscore.ghost" in text
    assert "missing: verifiers/registry.py:2 imports groupscore.verifiers.nope" in text
    assert "flow: schema -> groupscore (cli/) (module)" in text


def test_unknown_top_package_fails(tmp_path: Path) -> None:
    _tree(tmp_path, {"extras/__init__.py": ""}, more_mapping={"groupscore.extras": "extras"})
    _, report = _check(tmp_path)
    assert report.violations == ["flow: groupscore.extras is not in the flow table (tools/import_graph.py FLOW)"]


def test_view_is_the_installed_package(tmp_path: Path) -> None:
    root = _tree(tmp_path / "repo", {})
    view = import_graph.build_view(root, tmp_path / "view")
    assert (view / "cli.py").resolve() == (root / "cli" / "cli.py").resolve()
    assert (view / "verifiers" / "math" / "verify.py").is_file()
    assert (view / "sandbox").resolve() == (root / "sandbox").resolve()
    import_graph.build_view(root, tmp_path / "view")  # rebuilding replaces links, never follows them
    assert (root / "sandbox" / "jail.py").is_file()


@pytest.mark.parametrize("package", ["sandbox", "bounded", "schema"])
def test_leaves_import_nothing_of_ours(package: str) -> None:
    assert import_graph.FLOW[package] == frozenset()


def test_import_linter_contracts_say_what_the_flow_table_says() -> None:
    with open(REPO / "pyproject.toml", "rb") as f:
        config = tomllib.load(f)["tool"]["importlinter"]
    graph = import_graph.find_modules(REPO)
    ours = set(import_graph.FLOW) - {import_graph.TOP}
    # the command's own modules (cli/): nothing may import them
    command = {m for m in graph.modules if import_graph.top_package(m, graph.packages) == import_graph.TOP}
    command.discard("groupscore")
    forbidden = {
        c["source_modules"][0].removeprefix("groupscore."): set(c["forbidden_modules"])
        for c in config["contracts"]
        if c["type"] == "forbidden"
    }
    assert set(forbidden) == ours
    for package, modules in forbidden.items():
        expected = {f"groupscore.{q}" for q in ours - import_graph.FLOW[package] - {package}} | command
        assert modules == expected, package
    layers = next(c for c in config["contracts"] if c["type"] == "layers")
    order = [{name.strip() for name in layer.split("|")} for layer in layers["layers"]]
    assert set().union(*order) == ours
    for i, layer in enumerate(order):  # a layer never imports one above it, nor a sibling
        for package in layer:
            assert not import_graph.FLOW[package] & set().union(*order[: i + 1]), package


def test_mypy_checks_every_package_and_every_module_of_the_command() -> None:
    # `packages` takes a package with everything below it, so the root package (cli/) is listed module by module.
    with open(REPO / "pyproject.toml", "rb") as f:
        mypy = tomllib.load(f)["tool"]["mypy"]
    graph = import_graph.find_modules(REPO)
    assert set(mypy["packages"]) == {f"groupscore.{p}" for p in set(import_graph.FLOW) - {import_graph.TOP}}
    command = {m for m in graph.modules if import_graph.top_package(m, graph.packages) == import_graph.TOP}
    assert set(mypy["modules"]) == command


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """import-linter on a tree, through the view (as `make lint` runs it), with the repository's own contracts."""
    pytest.importorskip("importlinter")
    with open(REPO / "pyproject.toml", "rb") as f:
        contracts = tomllib.load(f)["tool"]["importlinter"]["contracts"]
    known = {"groupscore.verifiers", "groupscore.sandbox", "groupscore.schema"}
    lines = ["[importlinter]", "root_package = groupscore"]
    for c in contracts:  # the contracts about the packages the synthetic tree has, as an .ini file
        forbidden = [m for m in c.get("forbidden_modules", ()) if m in known]
        if c["type"] == "forbidden" and c["source_modules"][0] in known and forbidden:
            lines += [
                f"[importlinter:contract:{c['id']}]",
                f"name = {c['name']}",
                "type = forbidden",
                f"source_modules = {c['source_modules'][0]}",
                "forbidden_modules =",
                *(f"    {m}" for m in forbidden),
                "allow_indirect_imports = true",
            ]
    (root / ".importlinter").write_text("\n".join(lines) + "\n")
    view = import_graph.build_view(root, root / "view").parent
    lint_imports = Path(sys.executable).with_name("lint-imports")
    return subprocess.run(
        [str(lint_imports), "--config", ".importlinter", "--no-cache"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(view), "PATH": "/usr/bin:/bin"},
    )


def test_import_linter_sees_the_mapped_packages_and_fails_on_a_planted_arrow(tmp_path: Path) -> None:
    clean = _lint_imports(_tree(tmp_path / "clean", {}))
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "KEPT" in clean.stdout and "BROKEN" not in clean.stdout
    bad = _lint_imports(_tree(tmp_path / "bad", {"schema/verdict.py": "from groupscore.sandbox import jail\n"}))
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "groupscore.schema is not allowed to import groupscore.sandbox" in bad.stdout
