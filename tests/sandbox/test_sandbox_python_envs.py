"""Named Python environments for the jail: the `sci` environment (numpy, made by `make`: a missing one fails these
tests, never skips them), `groupscore sandbox env create`, and what an environment may not change about a jail."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import tempfile
import zipfile
from pathlib import Path

import pytest
from helpers import groupscore

from groupscore.sandbox import BadRunRequest, Limits, RunStatus, SandboxUnavailable, policy_for, run
from groupscore.sandbox import settings as sandbox_settings
from groupscore.sandbox.toolchains import python_env_toolchain, toolchain
from groupscore.schema.verdict import Status
from groupscore.verifiers.code.item import CodeItem
from groupscore.verifiers.code.verify import score_code

pytestmark = pytest.mark.usefixtures("jail_available")
QUICK = Limits(wall_time_s=20, memory_mb=512)
NUMPY_PROGRAM = """```python
import numpy as np

def moving_average(xs, k):
    a = np.convolve(np.asarray(xs, dtype=float), np.ones(k) / k, mode="valid")
    return [round(float(v), 6) for v in a]
```"""


def test_a_numpy_problem_with_hidden_tests_is_scored_in_the_sci_environment():
    tests = [{"type": "call", "fn": "moving_average", "args": [[1, 2, 3], 2], "expected": [1.5, 2.5]}]
    hidden = [
        {"type": "call", "fn": "moving_average", "args": [[2, 4, 6, 8], 3], "expected": [4.0, 6.0]},
        {"type": "assert", "code": "assert moving_average([1, 1, 1], 1) == [1.0, 1.0, 1.0]"},
    ]
    v = score_code(CodeItem(id="np", completion=NUMPY_PROGRAM, tests=tests, hidden_tests=hidden, python_env="sci"))
    assert (v.status, v.reward, v.details["hidden_total"]) == (Status.correct, 1.0, 2), v.reason
    wrong = NUMPY_PROGRAM.replace('mode="valid"', 'mode="same"')
    v = score_code(CodeItem(id="np", completion=wrong, tests=tests, hidden_tests=hidden, python_env="sci"))
    assert v.reward < 1.0
    # The same program without the environment: numpy is not there (the jail's Python has the standard library only).
    v = score_code(CodeItem(id="np", completion=NUMPY_PROGRAM, tests=tests, hidden_tests=hidden, python_env=""))
    assert v.reward == 0.0 and "No module named 'numpy'" in v.reason


def test_an_environment_is_read_only_and_its_thread_pools_fit_the_pids_limit():
    tool = toolchain("python", "sci")
    program = (
        "import numpy, os\nprint(numpy.arange(4).sum())\n"
        "try:\n    open(os.path.join(os.path.dirname(numpy.__file__), 'x.py'), 'w')\n    print('wrote')\n"
        "except OSError as e:\n    print(type(e).__name__)\n"
    )
    r = run({"main.py": program}, python_env="sci", limits=QUICK)
    assert (r.status, r.stdout.split()) == (RunStatus.OK, ["6", "OSError"]), r.stderr[-300:]
    env = policy_for("python").model_copy()  # the standard policy has neither
    assert not any(e.startswith("PYTHONPATH=") for e in env.env)
    from groupscore.sandbox.policy import build_policy

    with_env = build_policy(tool, QUICK)
    assert f"PYTHONPATH={tool.site_dirs[0]}" in with_env.env and "OPENBLAS_NUM_THREADS=1" in with_env.env
    assert {m.target for m in with_env.mounts if m.kind == "bind_ro"} >= {str(Path(tool.site_dirs[0]).parent)}


def test_a_missing_or_misnamed_environment_is_refused():
    with pytest.raises(SandboxUnavailable, match="groupscore sandbox env create nosuchenv"):
        run({"main.py": "pass"}, python_env="nosuchenv", limits=QUICK)
    with pytest.raises(BadRunRequest, match="bad python_env name"):
        run({"main.py": "pass"}, python_env="../etc", limits=QUICK)
    with pytest.raises(BadRunRequest, match="python runs"):
        run({"main.sh": "echo"}, language="bash", python_env="sci", limits=QUICK)


def _wheel(folder: Path) -> None:
    """A tiny pure-Python wheel, gsdemo 1.0, written by hand (no network at test time)."""
    files = {"gsdemo/__init__.py": b"ANSWER = 42\n"}
    files["gsdemo-1.0.dist-info/METADATA"] = b"Metadata-Version: 2.1\nName: gsdemo\nVersion: 1.0\n"
    files["gsdemo-1.0.dist-info/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    record = [
        f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}"
        for name, data in files.items()
    ]
    files["gsdemo-1.0.dist-info/RECORD"] = ("\n".join([*record, "gsdemo-1.0.dist-info/RECORD,,"]) + "\n").encode()
    with zipfile.ZipFile(folder / "gsdemo-1.0-py3-none-any.whl", "w") as whl:
        for name, data in files.items():
            whl.writestr(name, data)


def test_env_create_installs_for_the_jails_python_and_times_the_import(monkeypatch):
    # Not tmp_path: the jails' uids must reach it (0755), and a jail's /tmp is its work dir.
    base = Path(tempfile.mkdtemp(prefix="gs-envs-", dir="/var/tmp"))
    try:
        os.chmod(base, 0o755)
        wheels = base / "wheels"
        wheels.mkdir()
        _wheel(wheels)
        env = {**os.environ, "GROUPSCORE_SANDBOX_ENVS": str(base / "envs"), "PIP_NO_INDEX": "1"}
        env["PIP_FIND_LINKS"] = str(wheels)
        done = groupscore("sandbox", "env", "create", "demo", "gsdemo", env=env, timeout=300)
        assert done.returncode == 0, done.stderr
        assert "import in a jail: gsdemo" in done.stdout
        meta = json.loads((base / "envs" / "demo" / "env.json").read_text())
        assert meta["packages"] == ["gsdemo"] and "gsdemo" in meta["import_s"] and meta["preimport"] == []
        monkeypatch.setenv("GROUPSCORE_SANDBOX_ENVS", str(base / "envs"))
        sandbox_settings.reload()
        python_env_toolchain.cache_clear()
        r = run({"main.py": "import gsdemo\nprint(gsdemo.ANSWER)"}, python_env="demo", limits=QUICK)
        assert (r.status, r.stdout) == (RunStatus.OK, "42\n"), r.stderr[-300:]
    finally:
        monkeypatch.undo()
        sandbox_settings.reload()
        python_env_toolchain.cache_clear()
        shutil.rmtree(base, ignore_errors=True)
