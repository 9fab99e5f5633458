"""`pip install .` gives a working groupscore: the wheels (groupscore, and groupscore-client from client-dist/, which it
depends on) are built, installed into a fresh venv and run from an empty folder, so every file the installed package
reads at run time must be in a wheel (nothing from the checkout).

Offline and fast: the wheel is built with the project venv's setuptools (no build isolation, no index), the fresh venv
has no pip of its own and sees the project venv's site-packages through a .pth line (dependencies resolve without a
download; that directory's own .pth files, the editable install's finder among them, are not run), and the project
venv's pip installs the wheel into it with --no-deps.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import pytest
from distributions import CLIENT_DIST, package_dirs, packages, setuptools_table

ROOT = Path(__file__).resolve().parent.parent
SETUPTOOLS = setuptools_table("groupscore")
# The client/ and schema/ folders ship in groupscore-client (client-dist/pyproject.toml), which groupscore depends on.
PACKAGE_DIR = package_dirs()
PACKAGES = packages()
NOT_SHIPPED = {"tests", "tools", "bench", "fixtures", "runs", "build", "examples"}  # folders that are no package
SQL_GOLD = "SELECT name FROM customers WHERE city = 'London'"


def _sql(item_id: str, query: str) -> dict:
    """An item on the bundled shop database (package data of groupscore.verifiers.sql)."""
    return {"id": item_id, "verifier": "sql", "database": "shop", "gold_sql": SQL_GOLD, "completion": query}


def _math(item_id: str, completion: str) -> dict:
    return {"id": item_id, "verifier": "math", "answer": "0.5", "completion": completion}


ITEMS = [  # an item, the verdict (status, reward) the installed command must give it
    (_sql("sql-right", "SELECT c.name FROM customers AS c WHERE c.city IN ('London')"), ("correct", 1.0)),
    (_sql("sql-wrong", "SELECT name FROM customers WHERE city = 'Boston'"), ("incorrect", 0.0)),
    (_math("math-right", "Half of the cake is left, so the answer is $\\boxed{\\frac{1}{2}}$."), ("correct", 1.0)),
    (_math("math-wrong", "A third is left: $\\boxed{\\frac{1}{3}}$."), ("incorrect", 0.0)),
]


WHERE = "import importlib, json, sys\nprint(json.dumps({n: importlib.import_module(n).__file__ for n in sys.argv[1:]}))"
PATH = "import json, sys\nprint(json.dumps(sys.path))"
PURELIB = "import sysconfig\nprint(sysconfig.get_path('purelib'))"
DEMO = "import sys\nfrom groupscore.demo import run_demo\nraise SystemExit(run_demo(sys.argv[1], train=False))"
DEMO_TASKSETS = """import json
from pathlib import Path
from groupscore.train.config import load_config
from groupscore.train.demo import DEMO_CONFIG
from groupscore.train.taskset import load_tasks
config = load_config(DEMO_CONFIG)
print(json.dumps([[str(path), len(load_tasks(Path(path)))] for path in (config.taskset.train.path, config.taskset.eval.path)]))
"""


def package_folders() -> dict[str, Path]:
    """Every package the package-dir mapping implies: a folder with an __init__.py under a mapped folder."""
    found = {}
    for name, folder in PACKAGE_DIR.items():
        for init in sorted((ROOT / folder).rglob("__init__.py")):
            if "__pycache__" not in init.parts:
                found[".".join([name, *init.parent.relative_to(ROOT / folder).parts])] = init.parent
    return found


def test_every_package_folder_is_in_pyproject_packages():
    folders = package_folders()
    listed = set(PACKAGES)
    assert sorted(set(folders) - listed) == [], "package folders missing from [tool.setuptools] packages"
    assert sorted(listed - set(folders)) == [], "packages listed without a folder (and __init__.py) behind them"
    mapped = {Path(folder).parts[0] for folder in PACKAGE_DIR.values()}
    unmapped = sorted(
        init.parent.name for init in ROOT.glob("*/__init__.py") if init.parent.name not in mapped | NOT_SHIPPED
    )
    assert unmapped == [], "top-level package folders missing from [tool.setuptools] package-dir"


def test_package_data_patterns_all_match_files():
    """A package-data pattern that matches nothing is a file the runtime will miss (or a stale entry)."""
    folders = package_folders()
    stale = [
        f"{package}: {pattern}"
        for package, patterns in SETUPTOOLS["package-data"].items()
        for pattern in patterns
        if not any(folders[package].glob(pattern))
    ]
    assert stale == []


@dataclass(frozen=True)
class Installed:
    venv: Path
    site_packages: Path
    empty: Path  # the working directory of every run: no checkout, nothing on the path
    scratch: Path  # inputs and outputs

    def run(self, *args: str | Path, timeout: float = 120) -> subprocess.CompletedProcess:
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "GROUPSCORE_SQL_FIXTURES")
        }
        env["PATH"] = f"{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        result = subprocess.run(
            [str(a) for a in args], cwd=self.empty, env=env, capture_output=True, text=True, timeout=timeout
        )
        assert result.returncode == 0, (
            f"{args[:3]} exited {result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        )
        return result

    def python(self, code: str, *args: str | Path, timeout: float = 120) -> subprocess.CompletedProcess:
        return self.run(self.venv / "bin" / "python", "-c", code, *args, timeout=timeout)


def _quiet(*args: str | Path, cwd: Path | None = None) -> str:
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}
    result = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{args[:5]} exited {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result.stdout + result.stderr


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    base = tmp_path_factory.mktemp("wheel")
    # A copy of what `pip install .` builds from: no stale build/ or egg-info of the checkout can leak into the wheel.
    source = base / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    for top in sorted({Path(folder).parts[0] for folder in PACKAGE_DIR.values()}):
        shutil.copytree(ROOT / top, source / top, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    ignore = shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
    shutil.copytree(CLIENT_DIST, source / CLIENT_DIST.name, ignore=ignore)  # its pyproject and groupscore/__init__.py
    dist = base / "dist"
    # Offline: the project venv's setuptools builds them (no isolated build env to download), no index is asked.
    wheels = []
    for project, pattern in ((source, "groupscore-*.whl"), (source / CLIENT_DIST.name, "groupscore_client-*.whl")):
        build = ("wheel", "--no-deps", "--no-build-isolation", "--no-index", "-v", "-w", dist, project)
        log = _quiet(sys.executable, "-m", "pip", *build)
        # setuptools' warning for a folder it would leave out: a package missing from `packages`, or a data folder
        # picked up by include-package-data instead of being listed in package-data
        assert "absent from the `packages` configuration" not in log
        wheels += sorted(dist.glob(pattern))
    assert len(wheels) == 2, wheels

    venv = base / "venv"
    _quiet(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    where = subprocess.run([python, "-c", PURELIB], capture_output=True, text=True, check=True)
    site_packages = Path(where.stdout.strip())
    ours = dict.fromkeys([sysconfig.get_path("purelib"), sysconfig.get_path("platlib")])  # the project venv's
    (site_packages / "_groupscore_test_deps.pth").write_text("".join(f"{path}\n" for path in ours))
    _quiet(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "-q", *wheels)

    empty = base / "empty"
    empty.mkdir()
    scratch = base / "scratch"
    scratch.mkdir()
    return Installed(venv, site_packages.resolve(), empty, scratch)


@pytest.mark.slow
def test_the_installed_package_is_the_wheel_not_the_checkout(installed):
    files = json.loads(installed.python(WHERE, *sorted(PACKAGES)).stdout)
    outside = {
        name: file for name, file in files.items() if not Path(file).resolve().is_relative_to(installed.site_packages)
    }
    assert len(files) >= 10 and outside == {}
    # Nothing of the checkout on the path (its .venv's site-packages is there, for the dependencies).
    entries = [Path(entry).resolve() for entry in json.loads(installed.python(PATH).stdout) if entry]
    checkout = [e for e in entries if e.is_relative_to(ROOT) and not e.is_relative_to(ROOT / ".venv")]
    assert checkout == []
    assert (installed.venv / "bin" / "groupscore").is_file()


@pytest.mark.slow
def test_groupscore_score_on_sql_and_math_items_from_an_empty_folder(installed):
    items = installed.scratch / "items.jsonl"
    items.write_text("".join(json.dumps(item) + "\n" for item, _ in ITEMS), encoding="utf-8")
    verdicts = installed.scratch / "verdicts.jsonl"
    installed.run("groupscore", "score", items, "-o", verdicts, "--no-progress", "-j", "1")
    got = {r["id"]: (r["status"], r["reward"]) for r in map(json.loads, verdicts.read_text().splitlines())}
    assert got == {item["id"]: expected for item, expected in ITEMS}
    assert list(installed.empty.iterdir()) == []


@pytest.mark.slow
def test_groupscore_demo_service_stages_and_training_data_from_an_empty_folder(installed):
    """The demo's scoring stages (every packaged math case and code item, through the embedded service) as the
    command runs them; the training stage takes minutes, so only its config and tasksets are loaded."""
    run_dir = installed.scratch / "demo"
    out = installed.python(DEMO, run_dir, timeout=240)
    cases = sum(
        1
        for path in (ROOT / "cli" / "data" / "math").glob("*.jsonl")
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    )
    math = (run_dir / "math_fixtures_verdicts.jsonl").read_text().splitlines()
    assert len(math) == cases > 900 and f"all {cases}" in " ".join(out.stdout.split())
    code = {v["id"]: v for v in map(json.loads, (run_dir / "code_fixtures_verdicts.jsonl").read_text().splitlines())}
    references = [v for key, v in code.items() if key.endswith("(reference)")]
    assert len(references) >= 12 and all(v["reward"] == 1.0 for v in references)
    assert code["add-honest"]["reward"] == 1.0 and code["add-hardcoded"]["reward"] == 0.0

    (train, train_n), (held, held_n) = json.loads(installed.python(DEMO_TASKSETS).stdout)
    assert (train_n, held_n) == (240, 60)
    assert all(Path(p).resolve().is_relative_to(installed.site_packages) for p in (train, held))
    assert list(installed.empty.iterdir()) == []
