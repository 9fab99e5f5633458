"""Fixtures that test modules share: a real scoring service on a loopback port, and the jail checks that sandbox tests
start with. Plain functions (fenced programs, JSONL files, the CLI in a subprocess) are in helpers.py.

A module picks its server's settings with a mark, read once per module:

    pytestmark = pytest.mark.service(workers=1, env={"GROUPSCORE_DEADLINE_S": "60"})

A test marked destructive (adversarial programs) runs only after `jail_proven` passed, wherever it is.

Imports of groupscore are deferred to the fixtures, so collecting a module that uses none of them pays nothing for them.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

SERVICE_DEFAULTS = {"workers": 2, "env": None, "http_timeout_s": 120.0}

# Tests never reach the hub: the library leaves these to its user, so the tests set them (as `make test` does) before
# anything imports huggingface_hub, which reads them once.
for _var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY"):
    os.environ.setdefault(_var, "1")

# A Serve replica behind HAProxy stays reachable for 30 s after it is told to stop, so that a fleet's load balancers
# can deregister it; each test deployment's deletion waited that long (about 3 minutes of `make test`). Ray clusters
# the tests start inherit this; nothing here runs behind another load balancer.
os.environ.setdefault("RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S", "1")

# Property tests draw the same examples on every run of `make test` (a suite that passes once passes again; CI does not
# gate on what a random draw happens to find). `GROUPSCORE_HYPOTHESIS=explore` draws new ones, five times as many:
# run it to hunt, and keep what it finds as a test (tests/verifiers/math/test_math_bounds.py's superscripts came so).
try:
    from hypothesis import settings as _hypothesis

    _hypothesis.register_profile("repeatable", derandomize=True, database=None)
    _hypothesis.register_profile("explore", derandomize=False, max_examples=500)
    _hypothesis.load_profile(os.environ.get("GROUPSCORE_HYPOTHESIS", "repeatable"))
except ImportError:  # hypothesis is in the test extra; a run without it has no property tests to set
    pass


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "service(workers=2, env=None, http_timeout_s=120): settings of the module's `url` server and `http` client",
    )


# Markers by folder: the tests mirror the packages (tests/<package>/...), so where a test lives says what it needs.
TESTS = Path(__file__).resolve().parent
FOLDER_MARKERS = {
    "sandbox": ("jail", "root"),  # programs in nsjail and the warm jail: root, cgroups, namespaces
    "verifiers/code": ("jail", "root"),
    "environments": ("jail", "root"),  # sessions are jails
    "train": ("model",),  # tiny models or SmolLM2 through TRL
}
# Modules that need more than their folder says: a Ray cluster, or minutes.
MODULE_MARKERS = {
    "service/test_ray_serve.py": ("ray", "slow"),
    "service/test_ray_sessions.py": ("ray", "slow", "jail", "root"),  # sessions are jails
    "service/test_service_slow_programs.py": ("jail", "root", "slow"),
    "train/test_train_smollm2.py": ("slow",),
    "train/test_train_episodes.py": ("jail", "root"),  # sessions are jails
    "train/test_train_env_demo.py": ("slow", "jail", "root"),
    "train/test_train_env_smollm2.py": ("slow", "jail", "root"),
    "train/test_train_e2e.py": ("slow",),
    "train/test_train_recipes.py": ("slow",),
    "train/test_train_resume.py": ("slow",),
    "cli/test_lifecycle.py": ("slow",),
    "cli/test_wheel.py": ("slow",),
    "client/test_client_dist.py": ("slow",),
    # the red teams and the per-language runs: the fast tier keeps each area's core (api, policy, launchers, warm)
    "sandbox/test_sandbox_adversarial.py": ("slow",),
    "sandbox/test_sandbox_adversarial_languages.py": ("slow",),
    "sandbox/test_sandbox_covert.py": ("slow",),
    "sandbox/test_sandbox_warm_redteam.py": ("slow",),
    "sandbox/test_sandbox_warm_init_redteam.py": ("slow",),
    "sandbox/test_sandbox_warm_fallback_redteam.py": ("slow",),
    "sandbox/test_sandbox_languages.py": ("slow",),
    "sandbox/test_sandbox_oom_blame.py": ("slow",),
    "verifiers/code/test_code_languages.py": ("slow",),
    "verifiers/code/test_code_languages_redteam.py": ("slow",),
    "verifiers/code/test_code_redteam.py": ("slow",),
    "verifiers/code/test_code_hacks.py": ("slow",),
    "verifiers/code/test_code_humaneval.py": ("slow",),
    "service/test_service_run_code_languages.py": ("jail", "root", "slow"),
    "service/test_service_sessions.py": ("jail", "root"),  # sessions are jails
    "client/test_client_sessions.py": ("jail", "root"),
    "client/test_trl_env.py": ("jail", "root"),
    "cli/test_env_cli.py": ("jail", "root"),
    "service/test_service_schemathesis.py": ("slow",),
    "verifiers/math/test_math_gsm8k.py": ("slow",),
    # integration through a real service, a real trainer's first run, whole check runs: the fast tier keeps the units
    "sandbox/test_sandbox_warm_init.py": ("slow",),
    "service/test_service_infra.py": ("slow",),
    "service/test_service_resilience.py": ("slow",),
    "service/test_service_slow_math.py": ("slow",),
    "train/test_train_first_use.py": ("slow",),
    "client/test_dropin.py": ("slow",),
    "client/test_trl_env_example.py": ("jail", "root", "slow"),  # TRL training a random model
    "verifiers/code/test_code_host_cost.py": ("slow",),
    "testing/test_checks_defaults.py": ("slow",),
    "testing/test_checks_planted.py": ("slow",),
    "verifiers/math/test_demo_math.py": ("slow",),
    "verifiers/math/test_math_properties.py": ("slow",),
}


# `make test` runs the suite on pytest-xdist workers (-n 2 --dist loadfile): each module runs whole on one worker, so
# that its module-scoped fixtures (a service, a cluster, a trained model) start once. Modules that must not run beside
# each other share a group, whose modules one worker runs one after another (the scheduler below; xdist's own
# `--dist loadgroup` groups nothing under pytest 9.2, whose nodes no longer read the `_nodeid` that xdist 3.8 rewrites).
XDIST_GROUPS = {
    # Ray clusters: test_ray_serve requires every raylet it did not see before its cluster gone after it, and
    # test_lifecycle's `serve --ray` starts a cluster of its own. Beside a training, a cluster's Serve proxy missed its
    # readiness checks (it started 15 s late) and the module's fixture failed.
    "cli/test_lifecycle.py": "ray+torch",
    "service/test_ray_serve.py": "ray+torch",
    "service/test_ray_sessions.py": "ray+torch",
    # CPU-bound trainings (torch on both cores): two side by side took more than twice as long each
    "train/test_train_env_demo.py": "ray+torch",
    "train/test_train_smollm2.py": "ray+torch",
    "train/test_train_env_smollm2.py": "ray+torch",
}
# The longest modules and groups first, so that none of them starts last and runs on while the other worker idles:
# the scheduler hands them out in this order, the rest in collection order after them. By `--junitxml` times of a
# whole serial run (setup included), 2026-12-02: ray+torch ~630 s (the trainings ~340 s, Ray ~290 s), the rest under
# 80 s each.
XDIST_FIRST = [
    "ray+torch",
    "train/test_train_first_use.py",
    "sandbox/test_sandbox_covert.py",
    "train/test_train_e2e.py",
    "testing/test_env_checks.py",
    "train/test_train_recipes.py",
    "client/test_dropin.py",
    "environments/test_bfcl_sessions.py",
    "sandbox/test_sandbox_warm.py",
    "verifiers/code/test_code_languages_redteam.py",
    "testing/test_checks_verifiers.py",
    "sandbox/test_sandbox_languages.py",
    "sandbox/test_sandbox_warm_fallback_redteam.py",
    "environments/test_env_hacks.py",
    "client/test_verl_agent.py",
    "sandbox/test_sandbox_adversarial_languages.py",
    "client/test_trl_env_example.py",
    "sandbox/test_sandbox_warm_init.py",
    "sandbox/test_sandbox_launchers.py",
    "client/test_client_dist.py",
    "sandbox/test_sandbox_adversarial.py",
    "cli/test_wheel.py",
]


def _relative(path: Path | str) -> str:
    return Path(path).resolve().relative_to(TESTS).as_posix()


def _xdist_scope(relative: str) -> str:
    return XDIST_GROUPS.get(relative, relative)


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: only called where it is installed
def pytest_xdist_make_scheduler(config: pytest.Config, log):  # log: an xdist Producer
    """--dist loadfile, with the modules of a group (XDIST_GROUPS) as one file, handed out in the workers' collection
    order (XDIST_FIRST first: _xdist_order) rather than xdist's most-tests-first."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class ModuleGroups(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _xdist_scope(_relative(config.rootpath / nodeid.split("::", 1)[0]))

    config.option.loadscopereorder = False
    return ModuleGroups(config, log)


def _xdist_order(items: list[pytest.Item]) -> None:
    """XDIST_FIRST's modules and groups first, in its order; the rest as collected. Every worker sorts alike."""
    rank = {scope: place for place, scope in enumerate(XDIST_FIRST)}
    items.sort(key=lambda item: rank.get(_xdist_scope(_relative(item.path)), len(rank)))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        relative = _relative(item.path)
        names = {
            name for folder, marks in FOLDER_MARKERS.items() if relative.startswith(folder + "/") for name in marks
        }
        names.update(MODULE_MARKERS.get(relative, ()))
        for name in sorted(names):
            item.add_marker(name)
    if hasattr(config, "workerinput"):  # a pytest-xdist worker
        _xdist_order(items)
        for item in items:
            relative = _relative(item.path)
            if relative.startswith("train/") and relative in XDIST_GROUPS and not item.get_closest_marker("timeout"):
                # pytest-timeout's 300 s guards against hangs; a training that takes 150 s alone takes longer with the
                # other worker's tests beside it (test_train_env_demo's module fixture: 147 s alone, 302 s beside two)
                item.add_marker(pytest.mark.timeout(900))


def _service_settings(request: pytest.FixtureRequest) -> dict:
    mark = request.node.get_closest_marker("service")
    settings = {**SERVICE_DEFAULTS, **(mark.kwargs if mark else {})}
    unknown = set(settings) - set(SERVICE_DEFAULTS)
    if unknown:
        raise TypeError(f"pytest.mark.service takes {sorted(SERVICE_DEFAULTS)}, not {sorted(unknown)}")
    return settings


@pytest.fixture(scope="module")
def url(request: pytest.FixtureRequest) -> Iterator[str]:
    """Base URL of a real `groupscore serve` on a free loopback port, one server per module (see the module's mark)."""
    from groupscore.service.embedded import start_embedded

    settings = _service_settings(request)
    with start_embedded(workers=settings["workers"], env=settings["env"]) as base_url:
        yield base_url


@pytest.fixture(scope="module")
def http(request: pytest.FixtureRequest, url: str) -> Iterator:
    """An httpx client on the module's server."""
    import httpx

    with httpx.Client(base_url=url, timeout=_service_settings(request)["http_timeout_s"]) as client:
        yield client


@pytest.fixture(scope="session")
def jail_available() -> None:
    """A harmless probe jail first: the program is pid 2 of its own namespace under the init shell and not root.
    Raises SandboxUnavailable (the test errors, loudly; never a skip) where there is no such jail."""
    from groupscore.sandbox import ensure_available

    ensure_available()


@pytest.fixture(scope="session")
def jail_proven() -> dict:
    """Harmless probe: prove pid namespace + unprivileged host uid before any destructive program runs. FAILS (never
    skips) unless the probe shows a real jail: its own pid namespace (pid 1, no host pids visible) and a non-root uid
    on the host."""
    from helpers import host_pids_with

    from groupscore.sandbox import Limits, RunResult, RunStatus, run
    from groupscore.sandbox.toolchains import toolchain

    is_root = os.geteuid() == 0
    marker = "gsprobe-" + secrets.token_hex(6)
    exe = toolchain("python").executable
    code = (
        "import os, time\n"
        "print(os.getpid(), os.getuid(), sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))\n"
        "time.sleep(1.5)\n"
    )
    box: dict[str, RunResult] = {}
    t = threading.Thread(
        target=lambda: box.setdefault(
            "r", run({"probe.py": code}, [exe, "probe.py", marker], limits=Limits(wall_time_s=20))
        )
    )
    t.start()
    outside_uids: list[int] = []
    deadline = time.monotonic() + 15
    while t.is_alive() and time.monotonic() < deadline and not outside_uids:
        # The jailed probe (not nsjail, which starts as root and carries the marker too) is the
        # marker process whose parent is nsjail.
        for pid in host_pids_with(marker):
            try:
                if "nsjail" not in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode():
                    outside_uids.append(_host_uid(pid))
            except OSError:
                pass
        time.sleep(0.05)
    t.join(30)
    result = box.get("r")
    if result is None or result.status is not RunStatus.OK:
        pytest.fail(f"jail probe did not run cleanly; refusing destructive tests: {result}")
    pid, uid, visible = result.stdout.split(" ", 2)
    if int(pid) != 2 or visible.strip() != "[1, 2]":  # pid 1 is the jail's init shell
        pytest.fail(f"jail has no own pid namespace (pid {pid}, sees {visible.strip()}); refusing destructive tests")
    if not outside_uids:
        pytest.fail("could not see the jailed probe from the host to check its real uid; refusing")
    if is_root and 0 in outside_uids:
        pytest.fail(f"jailed process runs as real uid 0 on the host ({outside_uids}); refusing destructive tests")
    if is_root and int(uid) == 0:
        pytest.fail("jailed process is uid 0 inside; refusing destructive tests")
    return {"pid_inside": int(pid), "uid_inside": int(uid), "uids_on_host": outside_uids}


def _host_uid(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])  # real uid
    raise AssertionError("no Uid line")


@pytest.fixture(autouse=True)
def _destructive_tests_need_a_proven_jail(request: pytest.FixtureRequest) -> None:
    """The `destructive` mark's promise, kept wherever the mark is used: the jail probe first."""
    if request.node.get_closest_marker("destructive") is not None:
        request.getfixturevalue("jail_proven")


@pytest.fixture
def no_nsjail(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail any run that would start nsjail: the warm path must carry it."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("this run went through nsjail, not the warm template")

    monkeypatch.setattr("groupscore.sandbox.runner.execute_nsjail", refuse)


@pytest.fixture
def through_nsjail(monkeypatch: pytest.MonkeyPatch):
    """A switch: runs inside its `with` go through nsjail, not the warm Python template (GROUPSCORE_SANDBOX_WARM=0),
    for tests that compare the two paths."""
    from groupscore.sandbox import settings as sandbox_settings

    class Switch:
        def __enter__(self) -> None:
            monkeypatch.setenv("GROUPSCORE_SANDBOX_WARM", "0")
            sandbox_settings.reload()

        def __exit__(self, *exc: object) -> None:
            monkeypatch.delenv("GROUPSCORE_SANDBOX_WARM")
            sandbox_settings.reload()

    return Switch()
