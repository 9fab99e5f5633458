"""The layout stays as the README says: its table lists every top-level package folder with its import name, and no
module grows past ~450 lines without its docstring saying why."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from distributions import package_dirs, packages

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 450
# A long module's docstring carries a sentence that starts like this and says why it is one file.
REASON = re.compile(r"(?i)\bone (module|file)\b[^.]*\bbecause\b|\bkept whole\b|\bnot split\b")
NON_PACKAGE_ROWS = {"fixtures/", "bench/", "client-dist/", "examples/", "recipes/", "docs/", "tests/"}


def _package_dirs() -> dict[str, str]:
    """Both distributions' package-dir: groupscore's and groupscore-client's (client/, schema/)."""
    return package_dirs()


def _readme_table() -> dict[str, str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Layout", 1)[1].split("\n## ", 1)[0]
    section = section.split("| folder | import name | holds |", 1)[1].split("\n\n", 1)[0]  # the first table only
    rows = re.findall(r"^\| `([^`]+)` \| (?:`([^`]*)`)? *\|", section, flags=re.M)
    return {folder: name for folder, name in rows}


def test_the_readme_layout_table_lists_every_package_folder_with_its_import_name():
    table = _readme_table()
    packages = {f"{folder}/": name for name, folder in _package_dirs().items()}
    assert {folder: name for folder, name in table.items() if folder not in NON_PACKAGE_ROWS} == packages
    on_disk = {f"{p.name}/" for p in ROOT.iterdir() if (p / "__init__.py").is_file()}
    assert on_disk == set(packages), "a package folder is missing from pyproject's package-dir (or the reverse)"


def test_every_subpackage_is_listed_for_the_wheel():
    listed = packages()
    found = set()
    for name, folder in _package_dirs().items():
        for init in (ROOT / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((name, *parts)))
    assert found <= set(listed), f"packages missing from pyproject: {sorted(found - set(listed))}"


def _source_files() -> list[Path]:
    files = []
    for folder in {*_package_dirs().values(), "tools", "bench", "examples"}:
        files += [p for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts]
    return sorted(files)


def test_no_module_over_450_lines_without_a_reason_in_its_docstring():
    long_without_reason = []
    for path in _source_files():
        lines = path.read_text().count("\n")
        if lines <= MAX_LINES:
            continue
        docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
        if not REASON.search(docstring):
            long_without_reason.append(f"{path.relative_to(ROOT)} ({lines} lines)")
    assert not long_without_reason, (
        "split these, or say in the module docstring why they are one file "
        '("one module because ..."): ' + ", ".join(long_without_reason)
    )


def test_the_reason_pattern_accepts_a_reason_and_refuses_none():
    assert REASON.search("It is one file because the jail runs it as a single script.")
    assert not REASON.search("Answer comparison: structures matched shape by shape.")


# The test folders mirror the packages: a package's tests are found from its name.
TEST_AREAS = {"bounded", "cli", "client", "project", "runtime", "sandbox", "schema", "service", "testing", "train"}
TEST_AREAS |= {
    "verifiers",
    "verifiers/math",
    "verifiers/code",
    "verifiers/format",
    "verifiers/json",
    "verifiers/length",
}
TEST_AREAS |= {"verifiers/sql", "environments"}


def test_the_tests_mirror_the_packages():
    tests = ROOT / "tests"
    loose = sorted(p.name for p in tests.glob("test_*.py"))
    assert not loose, f"tests belong in the folder of the package they test: {loose}"
    folders = {p.parent.relative_to(tests).as_posix() for p in tests.rglob("test_*.py")}
    assert folders == TEST_AREAS, f"test folders {sorted(folders ^ TEST_AREAS)}: add the area here and in README"
    for area in folders - {"project"}:
        package = ROOT / area if (ROOT / area).is_dir() else ROOT / area.replace("json", "json_schema")
        assert package.is_dir(), f"tests/{area}/ mirrors no package folder"


def test_the_advantage_formula_is_written_once():
    """GRPO's advantage, (r - mean) / (std + eps), is computed in schema/advantages.py alone: the service's group
    statistics and the trainer's advantages both call it, so a fix there is a fix everywhere."""
    formula = re.compile(r"(std|spread|sigma)\w*\s*\+\s*(eps|epsilon|1e-4|ADVANTAGE_EPS)")
    places = []
    for folder in _package_dirs().values():
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.BinOp) and formula.search(ast.unparse(node)):
                    places.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert len(set(places)) == 1 and places[0].startswith("schema/advantages.py:"), places
