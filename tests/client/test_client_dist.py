"""groupscore-client on its own, where trainers live: its wheel is built from client-dist/, installed into a fresh
venv of a Python older than 3.12 (pyenv's 3.10 or 3.11, else the system's), and the trainer examples (examples/,
shown in docs/integrations.md) run there, as written but for the service's address, against a real service started
from this venv.

Cost: ~30-60 s, most of it pip installing httpx, pydantic, orjson and sandbox-fusion from the index into the fresh
venv (pip's cache makes a second run faster). It needs the index: PyPI is reachable in CI.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from distributions import CLIENT_DIST, ROOT, pyproject, setuptools_table

pytestmark = pytest.mark.slow

EXAMPLES = ROOT / "examples"
EXAMPLE_URL = "http://127.0.0.1:8000"


def older_python() -> str:
    """A Python 3.10 or 3.11 interpreter (the oldest found), else fail: the point is to run under < 3.12."""
    candidates = [
        *sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.10*/bin/python3"))),
        *sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.11*/bin/python3"))),
        *(shutil.which(name) or "" for name in ("python3.10", "python3.11")),
        "/usr/bin/python3",
    ]
    for candidate in candidates:
        if not candidate or not os.access(candidate, os.X_OK):
            continue
        probe = subprocess.run(
            [candidate, "-c", "import sys, venv, ensurepip; print(sys.version_info[:2] < (3, 12))"],
            capture_output=True,
            text=True,
        )
        if probe.stdout.strip() == "True":
            return candidate
    pytest.fail("no Python 3.10 or 3.11 with venv and ensurepip found (pyenv install 3.11, or apt python3.11-venv)")


@dataclass(frozen=True)
class Thin:
    python: Path
    work: Path  # the working directory of every run: nothing of the checkout on the path
    url: str

    def run(self, *args: str | Path, stdin: str | None = None, timeout: float = 120) -> str:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV") and "GROUPSCORE" not in k}
        result = subprocess.run(
            [str(self.python), *map(str, args)],
            cwd=self.work,
            env=env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert result.returncode == 0, (
            f"{args} exited {result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        )
        return result.stdout

    def example(self, name: str) -> Path:
        """examples/NAME with the service's address in place of the one it is written for."""
        text = (EXAMPLES / name).read_text(encoding="utf-8").replace(EXAMPLE_URL, self.url)
        path = self.work / name
        path.write_text(text, encoding="utf-8")
        return path


def _quiet(*args: str | Path, cwd: Path | None = None, timeout: float = 600) -> None:
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}
    result = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, (
        f"{args[:6]} exited {result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    )


@pytest.fixture(scope="module")
def thin(tmp_path_factory):
    from groupscore.service.embedded import start_embedded

    base = tmp_path_factory.mktemp("thin")
    source = base / "source"  # what the wheel builds from: client-dist/ and the two folders it maps, nothing else
    shutil.copytree(CLIENT_DIST, source / CLIENT_DIST.name, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    for folder in ("client", "schema"):
        shutil.copytree(ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__"))
    dist = base / "dist"
    _quiet(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "--no-index",
        "-w",
        dist,
        source / CLIENT_DIST.name,
    )
    (wheel,) = dist.glob("groupscore_client-*.whl")
    venv = base / "venv"
    _quiet(older_python(), "-m", "venv", venv)
    python = venv / "bin" / "python"
    _quiet(python, "-m", "pip", "install", "-q", wheel, "sandbox-fusion")  # dependencies from the index
    work = base / "work"
    work.mkdir()
    with start_embedded(workers=1) as url:
        yield Thin(python, work, url)


def test_the_thin_client_runs_on_an_older_python_with_three_dependencies(thin):
    report = json.loads(
        thin.run(
            "-c",
            "import json, sys, importlib.metadata as m, groupscore.client.adapters, groupscore.client.verl\n"
            "try:\n    import groupscore.service\n    service = True\nexcept ImportError:\n    service = False\n"
            "names = {d.metadata['Name'].lower() for d in m.distributions()}\n"
            "print(json.dumps({'version': sys.version_info[:2], 'service': service, 'names': sorted(names),\n"
            "    'requires': m.requires('groupscore-client')}))",
        )
    )
    assert tuple(report["version"]) < (3, 12) and report["service"] is False
    assert sorted(r.split(">")[0].split("<")[0].split("=")[0] for r in report["requires"]) == [
        "httpx",
        "orjson",
        "pydantic",
    ]
    assert not {"sympy", "fastapi", "torch", "groupscore", "pydantic-settings"} & set(report["names"])


def test_the_client_and_main_distributions_agree_on_version_and_package_init():
    client, main = pyproject("groupscore-client")["project"], pyproject("groupscore")["project"]
    assert client["version"] == main["version"]
    # The main distribution ships the client's packages itself, from the same folders, and needs nothing from it
    # (`pip install .` from a checkout: groupscore-client is on no index).
    assert not any(dep.startswith("groupscore") for dep in main["dependencies"])
    ours, theirs = setuptools_table("groupscore"), setuptools_table("groupscore-client")
    assert set(theirs["packages"]) <= set(ours["packages"])
    for name, folder in theirs["package-dir"].items():
        if name != "groupscore":  # its own copy of cli/__init__.py (below)
            assert (CLIENT_DIST / folder).resolve() == (ROOT / ours["package-dir"][name]).resolve(), name
    assert (CLIENT_DIST / "groupscore" / "__init__.py").read_text() == (ROOT / "cli" / "__init__.py").read_text()
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"] == ">=3.12"
    assert client["requires-python"] == ">=3.10"


VERL_CALL = """
import functools, importlib.util, json, sys
config = json.loads(sys.argv[1])["custom_reward_function"]
# What verl does with custom_reward_function: load `path` by file, take `name`, merge reward_kwargs into each call.
spec = importlib.util.spec_from_file_location("custom_module", config["path"])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
raw = getattr(module, config["name"])
# (verl's reward loop also passes its reward model's router and tokenizer, None without one)
fn = lambda **kw: raw(**{**kw, "reward_router_address": None, "reward_model_tokenizer": None, **config["reward_kwargs"]})
code = "```python\\nprint(sum(map(int, input().split())))\\n```"
out = {
    "gsm8k": fn(data_source="openai/gsm8k", solution_str="<think>6*7</think><answer>\\\\boxed{42}</answer>",
                ground_truth="42", extra_info={"split": "train"}),
    "math": fn(data_source="lighteval/MATH", solution_str="\\\\boxed{\\\\frac{1}{3}}", ground_truth="\\\\frac12",
               extra_info=None),
    "code": fn(data_source="codecontests", solution_str=code,
               ground_truth={"inputs": ["1 2\\n"], "outputs": ["3\\n"]}, extra_info={}),
    "mine": fn(data_source="my_org/arith", solution_str="<answer>\\\\boxed{7}</answer>", ground_truth=7,
               extra_info={}),
}
try:
    raw(data_source="openai/gsm8k", solution_str="x", ground_truth="1", urll="http://x")
except TypeError as exc:
    out["misspelt"] = str(exc)
try:
    raw(data_source="some/other", solution_str="x", ground_truth="1", url=config["reward_kwargs"]["url"])
except ValueError as exc:
    out["unmapped"] = str(exc)
print(json.dumps(out))
"""


def test_the_readme_verl_yaml_as_verl_loads_and_calls_it(thin):
    config = yaml.safe_load((EXAMPLES / "verl_grpo.yaml").read_text().replace(EXAMPLE_URL, thin.url))
    site = thin.run("-c", "import groupscore.client.verl as m; print(m.__file__)").strip()
    config["custom_reward_function"]["path"] = site  # the example's path is a placeholder for the installed file
    out = json.loads(thin.run("-c", VERL_CALL, json.dumps(config)))
    assert out["gsm8k"]["score"] == 1.0 and out["gsm8k"]["component_format"] == 1.0
    assert out["math"]["score"] == 0.0 and out["math"]["infra_error"] == 0.0
    assert out["code"]["acc"] == 1.0 and out["mine"]["component_correct"] == 1.0
    assert "'urll'" in out["misspelt"] and "did you mean 'url'" in out["misspelt"]
    assert "data_source 'some/other'" in out["unmapped"] and "data_source_kinds" in out["unmapped"]


def test_the_readme_trl_example_one_request_per_batch_for_three_rewards(thin):
    out = thin.run(thin.example("trl_grpo.py"))
    lines = {line.split()[0]: line.split(maxsplit=2)[1:] for line in out.splitlines()}
    assert set(lines) == {"groupscore_math_correct", "groupscore_math_format", "groupscore_math_short"}
    assert lines["groupscore_math_correct"][1] == "[1.0, 0.0]" and lines["groupscore_math_format"][1].startswith(
        "[1.0,"
    )
    weights = [float(lines[name][0]) for name in sorted(lines)]
    assert sum(weights) == pytest.approx(1.0) and weights[0] == pytest.approx(1.0 / 1.3)


def test_the_readme_openrlhf_reward_file_as_openrlhf_loads_it(thin):
    path = thin.example("openrlhf_reward_func.py")
    out = thin.run(
        "-c",
        "import importlib.util, json, sys\n"
        "spec = importlib.util.spec_from_file_location('reward_func', sys.argv[1])\n"
        "module = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(module)\n"
        "q = ['<pad>Q: 6*7?', 'Q: 2+2?']\n"
        "a = '<think>6*7</think><answer>\\\\boxed{42}</answer>'\n"
        "r = module.reward_func([q[0] + a, q[1] + ' 5'], ['Q: 6*7?', 'Q: 2+2?'], ['42', '4'])\n"
        "print(json.dumps(r))",
        path,
    )
    result = json.loads(out)
    assert result["rewards"][1] == 0.0 and result["rewards"][0] == pytest.approx(1.0)
    assert result["extra_logs"]["correct"] == [1.0, 0.0] and result["extra_logs"]["format"] == [1.0, 0.0]


def test_the_readme_sandbox_fusion_example_with_its_official_client(thin):
    out = thin.run(thin.example("sandbox_fusion_client.py"), timeout=60)
    ok, lean = out.strip().splitlines()[-2:]
    assert ok.endswith("erocspuorg") and "Success" in ok
    assert "Failed" in lean and " 127 " in lean and "not supported" in lean


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.iterdir() if p.suffix in (".py", ".yaml", ".sh")))
def test_the_docs_show_each_example_as_it_is_run(name):
    page = (ROOT / "docs" / "integrations.md").read_text(encoding="utf-8")
    assert (EXAMPLES / name).read_text(encoding="utf-8").rstrip("\n") in page, (
        f"docs/integrations.md's copy of examples/{name}"
    )


def test_the_readme_openrlhf_command_line_as_openrlhf_calls_the_service():
    """examples/openrlhf_remote.sh: its service (with the reward spec the script sets) started as written, and the
    request OpenRLHF's remote reward client sends to the script's --remote_rm_url, with --label_key's labels."""
    import shlex
    from urllib.parse import urlsplit

    import httpx

    from groupscore.service.embedded import start_embedded

    words = shlex.split((EXAMPLES / "openrlhf_remote.sh").read_text(encoding="utf-8"), comments=True)
    spec = next(w.split("=", 1)[1] for w in words if w.startswith("GROUPSCORE_OPENRLHF_REWARD="))
    remote = urlsplit(words[words.index("--remote_rm_url") + 1])
    assert words[words.index("--label_key") + 1] == "answer" and "--remote_rm_url" in words
    with start_embedded(workers=1, env={"GROUPSCORE_OPENRLHF_REWARD": spec}) as url:
        prompts = ["<|user|>What is 6 * 7?<|assistant|>", "<|user|>What is 2 + 2?<|assistant|>"]
        responses = ["<think>6*7</think><answer>\\boxed{42}</answer>", "<answer>5</answer>"]
        body = {"query": [p + r for p, r in zip(prompts, responses)], "prompts": prompts, "labels": ["42", "4"]}
        answer = httpx.post(url + remote.path, json=body, timeout=60).json()
    assert answer["rewards"] == [1.0, 0.0] and answer["extra_logs"]["format"] == [1.0, 0.0]
