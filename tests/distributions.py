"""The repository's two distributions as their pyproject files describe them: groupscore (pyproject.toml) and
groupscore-client (client-dist/pyproject.toml, the client/ and schema/ folders). Read by the layout, wheel and thin
client tests, which check the folders against both together."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLIENT_DIST = ROOT / "client-dist"
PYPROJECTS = {"groupscore": ROOT / "pyproject.toml", "groupscore-client": CLIENT_DIST / "pyproject.toml"}


def pyproject(distribution: str) -> dict:
    return tomllib.loads(PYPROJECTS[distribution].read_text(encoding="utf-8"))


def setuptools_table(distribution: str) -> dict:
    return pyproject(distribution)["tool"]["setuptools"]


def package_dirs() -> dict[str, str]:
    """Import name -> folder relative to the repository root, over both distributions."""
    mapping = {}
    for distribution, path in PYPROJECTS.items():
        for name, folder in setuptools_table(distribution)["package-dir"].items():
            # groupscore-client ships a copy of cli/__init__.py as its `groupscore`: cli/ is that package's folder
            mapping.setdefault(name, (path.parent / folder).resolve().relative_to(ROOT).as_posix())
    return mapping


def packages() -> list[str]:
    """Every package either distribution lists (`groupscore`, which both list, once)."""
    return list(
        dict.fromkeys(name for distribution in PYPROJECTS for name in setuptools_table(distribution)["packages"])
    )
