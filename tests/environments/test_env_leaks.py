"""Nothing of one session reaches another: the leak canary (bench/env_canary.py) at a small size. Each session looks
for what earlier (and concurrent) sessions left, then leaves files, background processes, IPC, sockets, database rows
and interpreter state; every fourth one also checks that its probes see its own residue, and is scored by a hidden
test that looks again in the checker's jail. With every session closed, the host holds no process, cgroup slot or
host id of theirs. The full run (10,000 sessions) is recorded in bench/RESULTS.md.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

CANARY = Path(__file__).resolve().parents[2] / "bench" / "env_canary.py"
_spec = importlib.util.spec_from_file_location("env_canary", CANARY)
assert _spec and _spec.loader
env_canary = importlib.util.module_from_spec(_spec)
sys.modules["env_canary"] = env_canary
_spec.loader.exec_module(env_canary)

SESSIONS, DEEP_EVERY = 32, 4
# What the probes must see of a session's own residue (else a 0 below would prove nothing).
SENSITIVE = ("files", "contents", "cmdlines", "sockets", "ipc", "listeners", "processes", "database", "python")


def test_no_session_sees_residue_of_another_and_the_host_keeps_nothing_of_theirs():
    tally = env_canary.run(SESSIONS, threads=4, batch=SESSIONS // 2, deep_every=DEEP_EVERY, progress=False)
    report = env_canary.report(tally)
    assert not tally.errors, tally.errors[:3]
    assert report["sessions"] == SESSIONS and report["scored"] == SESSIONS // DEEP_EVERY
    assert report["foreign_residue_sessions"] == {}, report["examples"]
    assert report["checker_saw_foreign"] == 0, report["examples"]
    assert all(report["looked"][kind] == SESSIONS for kind in SENSITIVE if kind != "python")
    assert {kind: report["own_residue_seen"].get(kind) for kind in SENSITIVE} == dict.fromkeys(
        SENSITIVE, SESSIONS // DEEP_EVERY
    )
    # the writes that must take for the probes to mean something; the jail refuses the rest (/, /etc, /dev, ...)
    for write in ("left_file_app", "left_file_tmp", "left_bashrc", "left_ipc_shm", "left_sockets"):
        assert report["writes_that_took"].get(write) == SESSIONS, report["writes_that_took"]
    assert report["host_leaks"] == [], report["host_leaks"]
    assert report["host_batches"] == 2
