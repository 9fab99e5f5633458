"""`pip install .` gives a working groupscore, as the README says: a copy of the checkout is installed into a fresh venv
with exactly that command, run in the copy, and the installed command runs from an empty folder. So every file the
package reads at run time must be in the wheel (nothing from the checkout), and every dependency it declares must be
one pip can find: groupscore-client, on no index, once made `pip install .` stop at "No matching distribution found".

Offline and fast without changing the command: the fresh venv (its own pip, from ensurepip) sees the project venv's
third-party packages through a .pth line (a folder of links to them; ours, groupscore and groupscore-client, are left
out, so pip must build groupscore from the copy and find every dependency it declares among what is installed), no
index is configured (a dependency on anything else fails as it would for a user), and pip's isolated build environment
gets setuptools and wheel as wheels repacked from the project venv's own installed copies.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from distributions import CLIENT_DIST, setuptools_table

ROOT = Path(__file__).resolve().parents[2]
SETUPTOOLS = setuptools_table("groupscore")
# groupscore alone holds every package (client/ and schema/ too: groupscore-client, client-dist/, is a subset of it).
PACKAGE_DIR = SETUPTOOLS["package-dir"]
PACKAGES = SETUPTOOLS["packages"]
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
DISTRIBUTIONS = (
    "import importlib.metadata as m, json\nprint(json.dumps(sorted(d.metadata['Name'] for d in m.distributions())))"
)
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
    source: Path  # the copy of the checkout it was installed from
    pip_env: dict[str, str]  # pip's offline environment

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


def _quiet(*args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    env = env or {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}
    result = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{args[:5]} exited {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result.stdout + result.stderr


def copy_checkout(to: Path) -> None:
    """The checkout as a clone has it: what git tracks, and new files it does not ignore (no .venv, build/, caches)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        path = ROOT / name
        if path.is_file():  # a file deleted in the working tree is still in the index
            (to / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, to / name)


OURS = ("groupscore", "__editable__", "_groupscore")  # our distributions, their editable finders and .pth files


def third_party(into: Path) -> Path:
    """A folder of links to the project venv's installed packages but ours (and no .pth files)."""
    into.mkdir()
    for folder in dict.fromkeys([sysconfig.get_path("purelib"), sysconfig.get_path("platlib")]):
        for entry in Path(folder).iterdir():
            if not entry.name.startswith(OURS) and entry.suffix != ".pth" and not (into / entry.name).exists():
                (into / entry.name).symlink_to(entry)
    return into


def repacked(into: Path, *names: str) -> Path:
    """Wheels of installed pure-Python distributions and what they require, made from their installed files (what
    RECORD lists)."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    into.mkdir()
    todo, done = list(names), set()
    while todo:
        name = canonicalize_name(todo.pop())
        if name in done:
            continue
        done.add(name)
        dist = importlib.metadata.distribution(name)
        for line in dist.requires or ():
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
        files = [f for f in dist.files or () if ".." not in f.parts and "__pycache__" not in f.parts]
        info = next(f.parts[0] for f in files if f.parts[0].endswith(".dist-info"))
        wheel = into / f"{dist.metadata['Name'].replace('-', '_')}-{dist.version}-py3-none-any.whl"
        record = []
        with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
            for f in files:
                if f.parts[0] == info and f.name in ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json"):
                    continue
                data = Path(str(f.locate())).read_bytes()
                archive.writestr(f.as_posix(), data)
                digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                record.append(f"{f.as_posix()},sha256={digest},{len(data)}")
            archive.writestr(f"{info}/RECORD", "\n".join([*record, f"{info}/RECORD,,"]) + "\n")
    return into


def offline_pip(find_links: Path) -> dict[str, str]:
    """pip's environment: no configuration file, no index, `find_links` for the build requirements."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("PIP_") and k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")
    }
    return env | {
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(find_links),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_NO_INPUT": "1",
    }


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    base = tmp_path_factory.mktemp("wheel")
    source = base / "source"
    copy_checkout(source)
    venv = base / "venv"
    _quiet(sys.executable, "-m", "venv", venv)
    python = venv / "bin" / "python"
    where = subprocess.run([python, "-c", PURELIB], capture_output=True, text=True, check=True)
    site_packages = Path(where.stdout.strip())
    (site_packages / "_groupscore_test_deps.pth").write_text(f"{third_party(base / 'deps')}\n")
    env = offline_pip(repacked(base / "build-requirements", "setuptools", "wheel"))
    _quiet(venv / "bin" / "pip", "install", ".", cwd=source, env=env)  # the README's command, in the copy

    empty = base / "empty"
    empty.mkdir()
    scratch = base / "scratch"
    scratch.mkdir()
    return Installed(venv, site_packages.resolve(), empty, scratch, source, env)


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


@pytest.mark.slow
def test_groupscore_help_from_an_empty_folder(installed):
    out = installed.run("groupscore", "--help").stdout
    assert all(command in out for command in ("score", "serve", "train", "check", "demo"))
    assert list(installed.empty.iterdir()) == []


@pytest.mark.slow
def test_the_client_distribution_installs_beside_it(installed):
    """groupscore-client (client-dist/) ships a subset of groupscore's files, the same bytes: installed into the same
    venv as the README says (its wheel, then pip install), both work. (Uninstalling either would remove the other's
    copies: client-dist/pyproject.toml says to install one or the other.) Last in the module: it changes the venv."""
    dist = installed.scratch / "client-wheel"
    build = (
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "--no-index",
        "-w",
        dist,
        installed.source / CLIENT_DIST.name,
    )
    _quiet(sys.executable, "-m", "pip", *build)
    (wheel,) = dist.glob("groupscore_client-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        shipped = {
            name: archive.read(name) for name in archive.namelist() if not name.split("/")[0].endswith(".dist-info")
        }
    assert shipped and all((installed.site_packages / name).read_bytes() == data for name, data in shipped.items())
    _quiet(installed.venv / "bin" / "pip", "install", wheel, cwd=installed.scratch, env=installed.pip_env)
    names = json.loads(installed.python(DISTRIBUTIONS).stdout)
    assert {"groupscore", "groupscore-client"} <= set(names)
    test_groupscore_score_on_sql_and_math_items_from_an_empty_folder(installed)
