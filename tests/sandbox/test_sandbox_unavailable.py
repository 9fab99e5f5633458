"""When nsjail cannot start, the sandbox says what is missing and runs nothing: never a silent fallback.

Each case runs in a fresh interpreter (the availability check is cached per process) with
GROUPSCORE_NSJAIL pointing at a stand-in binary.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import sys
    from groupscore.sandbox import run, SandboxUnavailable
    try:
        r = run({"main.py": "open(sys.argv[1], 'w').write('ran')"})
    except SandboxUnavailable as exc:
        print("UNAVAILABLE:", exc)
        sys.exit(0)
    print("RAN", r.status)
""")


def attempt(tmp_path, nsjail_script: str | None, path: str | None = None) -> str:
    env = dict(os.environ)
    if nsjail_script is not None:
        fake = tmp_path / "nsjail"
        fake.write_text("#!/bin/sh\n" + nsjail_script)
        fake.chmod(0o755)
        path = str(fake)
    env["GROUPSCORE_NSJAIL"] = path
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def launches_on_host(probe_output: str) -> str:
    """A stand-in nsjail that prints what the probe would print and logs a clean exit."""
    return (
        'case "$1" in --help) echo Usage; exit 0;; esac\n'
        'while [ $# -gt 0 ]; do [ "$1" = --log ] && log=$2; shift; done\n'
        f'echo "{probe_output}"\n'
        'echo "[I][2026-11-22T00:00:00+0000] pid=5 ([STANDALONE MODE]) exited with status: 0, (PIDs left: 0)" > "$log"\n'
    )


def test_missing_binary_is_named(tmp_path):
    out = attempt(tmp_path, None, path=str(tmp_path / "nope" / "nsjail"))
    assert out.startswith("UNAVAILABLE:") and "not an executable" in out


def test_missing_libnl_is_named_with_the_packages(tmp_path):
    out = attempt(
        tmp_path,
        'echo "nsjail: error while loading shared libraries: libnl-route-3.so.200: cannot open '
        'shared object file: No such file or directory" >&2\nexit 127\n',
    )
    assert out.startswith("UNAVAILABLE:") and "libnl-route-3.so.200" in out and "libnl-route-3-200" in out


def test_namespaces_refused_is_named(tmp_path):
    # --help works; any real launch fails the way nsjail does without user namespaces
    script = (
        'case "$1" in --help) echo Usage; exit 0;; esac\n'
        'while [ $# -gt 0 ]; do [ "$1" = --log ] && log=$2; shift; done\n'
        'echo "[E][2026][1] initCloneNs(): clone(flags=CLONE_NEWUSER|CLONE_NEWNS) failed: Operation not '
        'permitted" > "$log"\nexit 255\n'
    )
    out = attempt(tmp_path, script)
    assert out.startswith("UNAVAILABLE:") and "namespaces are not available" in out


def test_a_fake_jail_that_runs_code_unisolated_is_refused(tmp_path):
    """A 'nsjail' that just runs the command on the host is caught by the probe (pid is not 2)."""
    out = attempt(tmp_path, launches_on_host(probe_output="1234 0 300"))
    assert out.startswith("UNAVAILABLE:") and "not isolated" in out


@pytest.mark.skipif(os.geteuid() != 0, reason="checks the root-only uid mapping")
def test_probe_refuses_a_jail_that_is_root_outside(tmp_path):
    out = attempt(tmp_path, launches_on_host(probe_output="2 0 2"))
    assert out.startswith("UNAVAILABLE:") and "uid 0" in out
