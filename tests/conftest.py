"""Fixtures that test modules share: a real scoring service on a loopback port, and the jail check that sandbox tests
start with. Plain functions (fenced programs, JSONL files, the CLI in a subprocess) are in helpers.py.

A module picks its server's settings with a mark, read once per module:

    pytestmark = pytest.mark.service(workers=1, env={"GROUPSCORE_DEADLINE_S": "60"})

Imports of groupscore are deferred to the fixtures, so collecting a module that uses neither pays nothing for them.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

SERVICE_DEFAULTS = {"workers": 2, "env": None, "http_timeout_s": 120.0}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "service(workers=2, env=None, http_timeout_s=120): settings of the module's `url` server and `http` client",
    )


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
