"""The adversarial family for every language beside Python: JavaScript, TypeScript, Java, Go, Rust and Bash.

One adversary per language (fixtures/sandbox/adversary/), compiled once (the compile cache reuses the artifact) and
run once per attack, chosen by its first argument: the network, a process (and, for the JVM, thread) bomb, a memory
bomb, an output flood, writes outside the work dir, reads of host files, and signals at everything it can name. Each
attack carries a unique marker in its argv; no process with it may outlive the run.

SAFETY: every test here is marked destructive, so the session's jail probe (`jail_proven`, tests/conftest.py) runs
first and fails, never skips, unless it shows a real jail. A missing toolchain is SandboxUnavailable naming its
package: the test errors, it never skips (`make` installs them: tools/install-system-deps).
"""

from __future__ import annotations

import secrets
import socket
import subprocess
import time
from pathlib import Path

import pytest
from helpers import host_pids_with

from groupscore.sandbox import Limits, RunResult, RunStatus, run
from groupscore.sandbox.policy import INIT_SHELL

ADVERSARY = Path(__file__).resolve().parents[2] / "fixtures" / "sandbox" / "adversary"
# language -> (the run's main file, the adversary's fixture)
SOURCES = {
    "javascript": ("main.js", "adversary.js"),
    "typescript": ("main.ts", "adversary.ts"),
    "java": ("Main.java", "Main.java"),
    "go": ("main.go", "adversary.go"),
    "rust": ("main.rs", "adversary.rs"),
    "bash": ("main.sh", "adversary.sh"),
}
LANGUAGES = list(SOURCES)
FAST = Limits(wall_time_s=5, memory_mb=256)

pytestmark = [pytest.mark.destructive, pytest.mark.parametrize("language", LANGUAGES)]


def attack(language: str, mode: str, arg: str = "", limits: Limits = FAST) -> tuple[RunResult, str]:
    """Run the language's adversary in MODE; assert nothing of the run survives it."""
    marker = "gsmark-" + secrets.token_hex(6)
    main, fixture = SOURCES[language]
    result = run(
        {main: (ADVERSARY / fixture).read_text()},
        language=language,
        args=[mode, marker, *([arg] if arg else [])],
        limits=limits,
    )
    assert result.compile is None or result.compile.status is RunStatus.OK, result.compile
    deadline = time.monotonic() + 3
    while host_pids_with(marker) and time.monotonic() < deadline:  # the kernel reaps a killed namespace promptly
        time.sleep(0.05)
    assert host_pids_with(marker) == [], "a process of the run survived it"
    return result, marker


@pytest.fixture
def canary():
    """A host process with the jails' outside uid range's neighbour, nobody: kill(-1) from inside must not reach it."""
    proc = subprocess.Popen(["sleep", "60"], user=65534, group=65534)
    yield proc
    alive = proc.poll() is None
    proc.kill()
    proc.wait()
    assert alive, "the host canary process was killed from inside the jail"


def test_network_is_unreachable(language):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.settimeout(0.1)
        r, _ = attack(language, "net", str(listener.getsockname()[1]))
        with pytest.raises(TimeoutError):
            listener.accept()  # nothing from the jail ever arrived
    lines = r.stdout.splitlines()
    assert len(lines) == 2 and all(line.startswith("blocked") for line in lines), r.stdout + r.stderr


def test_process_bomb_is_capped_and_leaves_nothing(language, canary):
    r, _ = attack(language, "fork", INIT_SHELL, Limits(wall_time_s=4, memory_mb=256, max_processes=16))
    # Each child counts against the jail's pids limit (16, the runtime's own threads included), so the bomb ends:
    # the program reports how many it got, or the wall clock ends it (bash retries a failed fork for a while).
    if r.status is RunStatus.OK:
        counts = [int(line.split()[1]) for line in r.stdout.splitlines()]
        assert counts and all(n < 16 for n in counts), r.stdout
    else:
        assert r.status in (RunStatus.TIMEOUT, RunStatus.RUNTIME_ERROR), r


def test_memory_bomb_hits_the_memory_limit(language):
    r, _ = attack(language, "mem", limits=Limits(wall_time_s=10, memory_mb=128))
    assert r.status is RunStatus.MEMORY_LIMIT, (r.status, r.stderr[-500:])
    assert r.peak_memory_mb is None or r.peak_memory_mb <= 128 + 8


def test_output_flood_is_capped(language):
    r, _ = attack(language, "flood", limits=Limits(wall_time_s=5, memory_mb=256, max_output_bytes=1 << 20))
    assert r.status is RunStatus.OUTPUT_LIMIT and r.stdout_truncated and len(r.stdout) <= 1 << 20


def test_writes_outside_the_work_dir_fail(language, tmp_path):
    host_file = tmp_path / "from-the-jail"
    r, marker = attack(language, "write", str(host_file))
    outside = [f"/etc/gs-{marker}", f"/usr/gs-{marker}", f"/gs-{marker}", str(host_file)]
    assert r.stdout.splitlines() == [f"denied {p}" for p in outside] + [f"wrote /work/ok-{marker}"], r.stdout
    assert not host_file.exists() and not any(Path(p).exists() for p in outside)


def test_host_files_are_not_there(language, tmp_path):
    secret = tmp_path / "world-readable"
    secret.write_text("host secret")
    secret.chmod(0o644)
    r, _ = attack(language, "read", str(secret))
    expected = [f"denied {p}" for p in ("/etc/shadow", "/etc/passwd", "/root", str(secret))]
    assert r.stdout.splitlines() == expected, r.stdout


def test_signals_reach_nothing_outside_and_not_the_jails_init(language, canary):
    r, _ = attack(language, "kill")
    # kill(-1) reaches only the jail's own processes; its init (pid 1, the parent) drops SIGKILL sent from inside, so
    # the program lives on to say so and the run ends as it chose.
    assert r.status is RunStatus.OK and r.stdout.rstrip().endswith("alive"), (r.status, r.stdout, r.stderr[-300:])
