"""Every GROUPSCORE_* variable is read by one settings object per part: the service's, the client's, the verifiers',
the sandbox's and the bounded workers'. Each part: its defaults, an override from the environment, a bad value's
one-line error naming the variable. Across the tree: no other module reads a GROUPSCORE_ variable, the one settings
table (docs/service/settings.md) lists exactly the variables the objects read with their defaults, and `groupscore
serve --help` shows the service's from its object."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from groupscore.bounded import settings as bounded_settings
from groupscore.client import settings as client_settings
from groupscore.sandbox import settings as sandbox_settings
from groupscore.sandbox.errors import SandboxUnavailable
from groupscore.service.settings import Settings, SettingsError, task_dirs_adding
from groupscore.verifiers import settings as verifier_settings

ROOT = Path(__file__).resolve().parents[2]
SETTINGS_MODULES = {
    "service/settings.py",
    "client/settings.py",
    "verifiers/settings.py",
    "sandbox/settings.py",
    "bounded/settings.py",
}
# Switches of the tests and tools themselves, never read by groupscore (docs/service/settings.md says so under its
# table).
TEST_ONLY = {"GROUPSCORE_FULL_PIN_CHECK", "GROUPSCORE_SCHEMATHESIS_EXAMPLES", "GROUPSCORE_HYPOTHESIS"}
# Set for a session's tools and tests inside its jail (environments/record.py), never read by groupscore itself.
GIVEN_TO_JAILS = {"GROUPSCORE_SEED"}


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    """No GROUPSCORE_* variable from the caller's shell; the cached parts read again before and after each test."""
    for name in [n for n in os.environ if n.upper().startswith("GROUPSCORE_")]:
        monkeypatch.delenv(name)
    sandbox_settings.reload()
    verifier_settings.reload()
    yield
    monkeypatch.undo()
    sandbox_settings.reload()
    verifier_settings.reload()


def _one_line(exc: pytest.ExceptionInfo, *words: str) -> str:
    message = str(exc.value)
    assert "\n" not in message, message
    for word in words:
        assert word in message, (word, message)
    return message


# -- the service ------------------------------------------------------------------------------------------------------


def test_service_defaults():
    settings = Settings()
    assert (settings.host, settings.port, settings.token, settings.max_items, settings.max_queue_items) == (
        "127.0.0.1",
        8000,
        None,
        16384,
        65536,
    )
    assert settings.workers == len(os.sched_getaffinity(0))
    assert settings.worker_memory_mb == 4096 and settings.openrlhf_verifier == "math" and not settings.debug


def test_service_reads_its_variables_and_an_argument_wins(monkeypatch):
    monkeypatch.setenv("GROUPSCORE_WORKERS", "3")
    monkeypatch.setenv("GROUPSCORE_DEADLINE_S", "12.5")
    monkeypatch.setenv("GROUPSCORE_DEBUG", "1")
    monkeypatch.setenv("GROUPSCORE_TOKEN", "")  # empty: unset
    settings = Settings.from_env(port=9000, host=None)
    assert (settings.workers, settings.deadline_s, settings.debug, settings.token, settings.port, settings.host) == (
        3,
        12.5,
        True,
        None,
        9000,
        "127.0.0.1",
    )
    assert Settings.from_env(workers=5).workers == 5


@pytest.mark.parametrize(
    "variable,value,words",
    [
        ("GROUPSCORE_MAX_ITEMS", "ten", ("GROUPSCORE_MAX_ITEMS='ten'", "integer", "default 16384")),
        ("GROUPSCORE_WORKERS", "0", ("GROUPSCORE_WORKERS='0'", "greater than or equal to 1")),
        ("GROUPSCORE_DEBUG", "maybe", ("GROUPSCORE_DEBUG='maybe'", "boolean")),
        ("GROUPSCORE_WORKER_MEMORY_MB", "100", ("GROUPSCORE_WORKER_MEMORY_MB='100'", "512")),
        ("GROUPSCORE_OPENRLHF_VERIFIER", "maths", ("GROUPSCORE_OPENRLHF_VERIFIER='maths'", "known: math")),
        ("GROUPSCORE_MATH_DEFAULTS", "{bad", ("GROUPSCORE_MATH_DEFAULTS", "not JSON")),
        ("GROUPSCORE_MAX_QUEUE_ITEMS", "10", ("GROUPSCORE_MAX_QUEUE_ITEMS (10) is below GROUPSCORE_MAX_ITEMS",)),
    ],
)
def test_a_bad_service_variable_is_one_line_naming_it(monkeypatch, variable, value, words):
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError) as exc:
        Settings.from_env()
    _one_line(exc, *words)


def test_a_bad_argument_is_named_as_the_argument():
    with pytest.raises(SettingsError) as exc:
        Settings.from_env(workers=0)
    assert _one_line(exc, "workers=0").startswith("workers=0")
    with pytest.raises(SettingsError) as exc:
        Settings().with_(chunk_items=0)
    _one_line(exc, "chunk_items=0")


def test_the_service_settings_are_frozen():
    with pytest.raises(ValueError):
        Settings().workers = 4  # type: ignore[misc]


def test_serve_help_lists_every_service_variable_with_its_default():
    from groupscore.cli import build_parser

    parser = build_parser()
    serve = next(action for action in parser._subparsers._group_actions).choices["serve"]
    text = serve.format_help()
    for name in Settings.model_fields:
        assert f"GROUPSCORE_{name.upper()} (default " in text, name
    assert "GROUPSCORE_MAX_ITEMS (default 16384)" in text and "GROUPSCORE_HOST (default '127.0.0.1')" in text


# -- the client -------------------------------------------------------------------------------------------------------


def test_client_defaults_override_and_bad_value(monkeypatch):
    assert client_settings.load().urls == ["http://127.0.0.1:8000"] and client_settings.load().token is None
    monkeypatch.setenv("GROUPSCORE_URL", "http://a:1, http://b:2/")
    monkeypatch.setenv("GROUPSCORE_TOKEN", "s3cret")
    loaded = client_settings.load()
    assert loaded.urls == ["http://a:1", "http://b:2/"] and loaded.token == "s3cret"
    monkeypatch.setenv("GROUPSCORE_URL", "localhost:8000")
    with pytest.raises(ValueError) as exc:
        client_settings.load()
    _one_line(exc, "GROUPSCORE_URL=", "http://")


# -- the verifiers ----------------------------------------------------------------------------------------------------


def test_verifier_settings_default_override_and_reload(monkeypatch, tmp_path):
    from groupscore.verifiers.sql.databases import fixtures_dir

    bundled = fixtures_dir()
    assert verifier_settings.current().sql_fixtures is None and (bundled / "shop.sql").exists()
    monkeypatch.setenv("GROUPSCORE_SQL_FIXTURES", str(tmp_path))
    assert fixtures_dir() == bundled  # read once per process
    verifier_settings.reload()
    assert fixtures_dir() == tmp_path


# -- the sandbox ------------------------------------------------------------------------------------------------------


def test_sandbox_defaults_and_override(monkeypatch):
    defaults = sandbox_settings.current()
    assert (defaults.nsjail, defaults.workers, defaults.max_jails, defaults.uid_base) == (
        None,
        None,
        None,
        1_800_000_000,
    )
    monkeypatch.setenv("GROUPSCORE_SANDBOX_WORKERS", "3")
    monkeypatch.setenv("GROUPSCORE_NSJAIL", "/opt/nsjail")
    monkeypatch.setenv("GROUPSCORE_CGROUP_PARENT", "/sys/fs/cgroup/delegated")
    assert sandbox_settings.current() is defaults  # cached until reload
    sandbox_settings.reload()
    loaded = sandbox_settings.current()
    assert (loaded.workers, loaded.nsjail, loaded.cgroup_parent) == (3, "/opt/nsjail", "/sys/fs/cgroup/delegated")
    from groupscore.sandbox.parallel import default_workers

    assert default_workers() == 3


@pytest.mark.parametrize(
    "variable,value",
    [
        ("GROUPSCORE_SANDBOX_MAX_JAILS", "many"),
        ("GROUPSCORE_SANDBOX_WORKERS", "0"),
        ("GROUPSCORE_SANDBOX_UID_BASE", "abc"),
    ],
)
def test_a_bad_sandbox_variable_is_sandbox_unavailable_in_one_line(monkeypatch, variable, value):
    monkeypatch.setenv(variable, value)
    sandbox_settings.reload()
    with pytest.raises(SandboxUnavailable) as exc:
        sandbox_settings.current()
    _one_line(exc, f"{variable}={value!r}", "unset it")


CODE_ITEM = {
    "verifier": "code",
    "completion": "```python\ndef f(x):\n    return x\n```",
    "tests": [{"type": "call", "fn": "f", "args": [1], "expected": 1}],
}


@pytest.mark.parametrize(
    "variable,value", [("GROUPSCORE_SANDBOX_UID_BASE", "abc"), ("GROUPSCORE_SANDBOX_MAX_JAILS", "0")]
)
def test_a_bad_sandbox_variable_makes_code_items_infra_errors_not_error_verdicts(variable, value):
    # In a fresh process: importing the sandbox must not read the settings (it once built its jail semaphore at import,
    # so a bad value failed the code kind's import: every code item an `error`, a 0 trained on, instead of masked).
    program = (
        "import json; from groupscore.verifiers.scoring import score_raw; "
        f"v = score_raw({CODE_ITEM!r}); print(json.dumps([v.status.value, v.details.get('infra'), v.reason]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", program],
        env={**os.environ, variable: value},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    status, cause, reason = json.loads(done.stdout)
    assert (status, cause) == ("infra_error", "sandbox") and variable in reason


def test_the_jail_uses_the_nsjail_variable(monkeypatch, tmp_path):
    from groupscore.sandbox.nsjail_launcher import nsjail_binary

    monkeypatch.setenv("GROUPSCORE_NSJAIL", str(tmp_path / "missing"))
    sandbox_settings.reload()
    with pytest.raises(SandboxUnavailable, match=r"GROUPSCORE_NSJAIL=.*not an executable"):
        nsjail_binary()


# -- the bounded workers ----------------------------------------------------------------------------------------------


def test_bounded_defaults_override_and_not_cached(monkeypatch):
    from groupscore.bounded.workers import default_size, worker_memory_mb

    assert bounded_settings.load() == bounded_settings.BoundedSettings(None, 4096)
    assert default_size() == max(1, min(len(os.sched_getaffinity(0)), 4)) and worker_memory_mb() == 4096
    monkeypatch.setenv("GROUPSCORE_BOUNDED_WORKERS", "7")
    monkeypatch.setenv("GROUPSCORE_WORKER_MEMORY_MB", "0")
    assert default_size() == 7 and worker_memory_mb() == 0  # read when a pool is made


@pytest.mark.parametrize(
    "variable,value,words",
    [
        ("GROUPSCORE_BOUNDED_WORKERS", "four", "not an integer"),
        ("GROUPSCORE_BOUNDED_WORKERS", "0", "too small"),
        ("GROUPSCORE_WORKER_MEMORY_MB", "-1", "too small"),
        ("GROUPSCORE_WORKER_MEMORY_MB", "256", "below 512"),
    ],
)
def test_a_bad_bounded_variable_is_one_line_naming_it(monkeypatch, variable, value, words):
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValueError) as exc:
        bounded_settings.load()
    _one_line(exc, variable, words)


# -- across the tree --------------------------------------------------------------------------------------------------


def _package_folders() -> list[str]:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return sorted(set(pyproject["tool"]["setuptools"]["package-dir"].values()))


def _is_environ(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
        isinstance(node, ast.Name) and node.id == "environ"
    )


def env_reads(source: str, constants: set[str]) -> list[int]:
    """Lines that read a GROUPSCORE_ variable from the environment: os.environ[...] / .get / .pop, `in os.environ`,
    os.getenv, with the name as a literal, an f-string or a module constant holding one (`constants`)."""

    def ours(key: ast.AST | None) -> bool:
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            return key.value.startswith("GROUPSCORE_")
        if isinstance(key, ast.JoinedStr) and key.values and isinstance(key.values[0], ast.Constant):
            return str(key.values[0].value).startswith("GROUPSCORE")
        name = key.id if isinstance(key, ast.Name) else key.attr if isinstance(key, ast.Attribute) else None
        return name in constants

    lines = []
    for node in ast.walk(ast.parse(source)):
        key = None
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_environ(node.value):
            key = node.slice
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            environ_read = node.func.attr in ("get", "pop") and _is_environ(node.func.value)
            if environ_read or node.func.attr == "getenv":
                key = node.args[0]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getenv" and node.args:
            key = node.args[0]
        elif (
            isinstance(node, ast.Compare)
            and any(isinstance(op, ast.In | ast.NotIn) for op in node.ops)
            and any(_is_environ(c) for c in node.comparators)
        ):
            key = node.left
        if key is not None and ours(key):
            lines.append(node.lineno)
    return lines


def _constants(sources: dict[str, str]) -> set[str]:
    """Module-level names bound to a GROUPSCORE_ variable's name anywhere in the tree (SIZE_ENV, ...)."""
    names = set()
    for source in sources.values():
        for node in ast.parse(source).body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                value = node.value
                text = (
                    value.value
                    if isinstance(value, ast.Constant)
                    else value.values[0].value
                    if isinstance(value, ast.JoinedStr) and value.values and isinstance(value.values[0], ast.Constant)
                    else None
                )
                if isinstance(text, str) and text.startswith("GROUPSCORE"):
                    names.add(node.targets[0].id)
    return names


def _tree_sources() -> dict[str, str]:
    return {
        str(path.relative_to(ROOT)): path.read_text(encoding="utf-8")
        for folder in _package_folders()
        for path in sorted((ROOT / folder).rglob("*.py"))
    }


def test_no_module_outside_the_settings_modules_reads_a_groupscore_variable():
    sources = _tree_sources()
    constants = _constants(sources)
    offenders = {path: env_reads(source, constants) for path, source in sources.items() if path not in SETTINGS_MODULES}
    assert {path: lines for path, lines in offenders.items() if lines} == {}


@pytest.mark.parametrize(
    "planted",
    [
        'import os\nx = os.environ.get("GROUPSCORE_X")',
        'import os\nx = os.getenv("GROUPSCORE_X", "1")',
        'import os\nx = os.environ["GROUPSCORE_X"]',
        'import os\nSIZE_ENV = "GROUPSCORE_X"\nif SIZE_ENV in os.environ:\n    pass',
        'import os\nx = os.environ.get(f"GROUPSCORE_{name}")',
        'from os import environ\nx = environ.get("GROUPSCORE_X")',
    ],
)
def test_the_scan_finds_a_planted_read(planted):
    assert env_reads(planted, _constants({"planted": planted}))


def test_the_scan_leaves_writes_and_other_variables_alone():
    source = (
        'import os\nos.environ.setdefault(SIZE_ENV, "1")\nenv = {**os.environ}\nenv["GROUPSCORE_TOKEN"] = "t"\n'
        'rank = os.environ.get("RANK")\nSIZE_ENV = "GROUPSCORE_BOUNDED_WORKERS"\n'
    )
    assert env_reads(source, _constants({"s": source})) == []


def _settings_variables() -> dict[str, str]:
    """Each variable a settings object reads -> its default as docs/service/settings.md writes it."""
    variables: dict[str, str] = {}
    for name, field in Settings.model_fields.items():
        default = "the usable cores" if name == "workers" else field.get_default()
        variables[f"GROUPSCORE_{name.upper()}"] = (
            "unset" if default is None else "empty" if default == "" else str(default)
        )
    for model, env_name in (
        (client_settings.ClientSettings, lambda f: f"GROUPSCORE_{f.upper()}"),
        (verifier_settings.VerifierSettings, lambda f: f"GROUPSCORE_{f.upper()}"),
        (sandbox_settings.SandboxSettings, sandbox_settings.env_name),
    ):
        for name, field in model.model_fields.items():
            variables[env_name(name)] = "unset" if field.default is None else str(field.default)
    defaults = bounded_settings.BoundedSettings()
    for name, variable, _ in bounded_settings.BoundedSettings.VARIABLES:
        value = getattr(defaults, name)
        variables[variable] = "unset" if value is None else str(value)
    return variables


def _readme_settings_table() -> dict[str, str]:
    """The settings table of docs/service/settings.md (it was the README's)."""
    text = (ROOT / "docs" / "service" / "settings.md").read_text(encoding="utf-8")
    section = text.split("# Settings\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(GROUPSCORE_[A-Z0-9_]+)` \| ([^|]+) \|", section, flags=re.M)
    return {name: default.strip().strip("`") for name, default in rows}


def test_the_readme_table_lists_every_variable_with_its_default():
    assert _readme_settings_table() == _settings_variables()


def test_every_groupscore_variable_named_in_the_tree_is_a_setting_or_test_only():
    named = set()
    for path in [
        *ROOT.glob("*.md"),
        *ROOT.glob("docs/**/*.md"),
        *(p for f in _package_folders() for p in (ROOT / f).rglob("*.py")),
        *(ROOT / "tests").glob("*.py"),
        *(ROOT / "tools").glob("*.py"),
    ]:
        named |= set(re.findall(r"\bGROUPSCORE_[A-Z0-9_]*[A-Z0-9]\b", path.read_text(encoding="utf-8")))
    named -= {"GROUPSCORE_X"}  # this module's planted reads
    assert named - set(_settings_variables()) - TEST_ONLY - GIVEN_TO_JAILS == set()


def test_the_sandbox_and_bounded_settings_import_nothing_of_ours_outside_their_part():
    for path, part in (
        ("sandbox/settings.py", "groupscore.sandbox"),
        ("bounded/settings.py", "groupscore.bounded"),
        ("client/settings.py", "groupscore.client"),
        ("verifiers/settings.py", "groupscore.verifiers"),
    ):
        tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
        modules = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
        modules |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        ours = {m for m in modules if m.startswith("groupscore")}
        assert all(m.startswith(part) for m in ours), (path, ours)


def test_a_service_target_given_its_url_reads_only_the_token(monkeypatch):
    from groupscore.testing.targets import ServiceTarget

    monkeypatch.setenv("GROUPSCORE_URL", "localhost:8000")  # not an http URL: load() refuses it, the target needs none
    monkeypatch.setenv("GROUPSCORE_TOKEN", "secret")
    assert ServiceTarget("http://127.0.0.1:9").token == "secret"
    with pytest.raises(ValueError, match="GROUPSCORE_URL"):
        client_settings.load()


def test_a_runs_task_folders_are_added_to_the_users_never_in_their_place(monkeypatch):
    monkeypatch.setenv("GROUPSCORE_TASK_DIRS", "/data/mine,/data/theirs")
    assert task_dirs_adding(["/runs/a", "/data/mine"]) == "/data/mine,/data/theirs,/runs/a"
    monkeypatch.delenv("GROUPSCORE_TASK_DIRS")
    assert task_dirs_adding(["/runs/a"]) == "/runs/a"
    assert os.environ.get("GROUPSCORE_TASK_DIRS") is None  # read, never written
    assert task_dirs_adding(["/runs/a"], to="/given") == "/given,/runs/a"  # a value given for the service itself
