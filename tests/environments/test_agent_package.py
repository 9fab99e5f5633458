"""The session agent's package (environments/agent/): what runs in the jail imports the standard library and itself
only, the typed protocol and the agent's dispatch name the same requests, and its pure parts (the one output cap,
link confinement) hold on their own."""

from __future__ import annotations

import ast
import os
import sys
from pathlib import Path

import pytest

from groupscore.environments.agent import main as agent_main
from groupscore.environments.agent.protocol import TOOL_OPS
from groupscore.environments.agent.state import confine_links, resolves_within
from groupscore.environments.agent.tools import cap_reply
from groupscore.environments.jails import AGENT_DIR


def test_the_agent_imports_the_standard_library_and_itself_only():
    for path in sorted(AGENT_DIR.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                continue  # the package itself
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            for name in names:
                top = name.split(".")[0]
                assert top in sys.stdlib_module_names or top == "__future__", f"{path.name} imports {name}"


def _protocol_ops() -> set[str]:
    """The `op` literals of the protocol's request types, read from its source (they exist for mypy only)."""
    tree = ast.parse((AGENT_DIR / "protocol.py").read_text())
    ops: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == "op":
            ops |= {
                c.value for c in ast.walk(node.annotation) if isinstance(c, ast.Constant) and isinstance(c.value, str)
            }
    return ops


def test_the_protocol_and_the_dispatch_name_the_same_requests():
    assert _protocol_ops() == set(agent_main.OPS)
    assert set(TOOL_OPS) <= set(agent_main.OPS) and not {"init", "finish", "check", "state"} & set(TOOL_OPS)


def test_one_cap_holds_every_observed_field_together():
    reply = cap_reply({"ok": True, "output": "o" * 5000, "error": "e" * 3000, "result": list(range(2000))}, 1024)
    shown = sum(len(str(reply[k]).encode()) for k in ("output", "error", "result"))
    assert shown <= 1024 + 3 * 64 and reply["cut"] is True
    assert reply["error"].startswith("e" * 1000)  # the error first: it says what went wrong
    small = {"ok": True, "output": "fine", "result": {"a": 1}}
    assert cap_reply(dict(small), 1024) == small  # nothing cut, nothing said


def test_a_cut_never_splits_a_character():
    reply = cap_reply({"ok": True, "output": "é" * 4000}, 1001)
    reply["output"].encode("utf-8")  # valid
    assert reply["output"].startswith("é" * 500) and "[output cut:" in reply["output"]


@pytest.fixture
def tree(tmp_path):
    state, system = tmp_path / "app", tmp_path / "usr"
    (state / "real").mkdir(parents=True)
    (state / "real" / "f").write_text("x")
    system.mkdir()
    (system / "tool").write_text("t")
    return state, system


def test_links_are_kept_only_when_they_resolve_within_the_allowed_places(tree):
    state, system = tree
    allowed = (str(state), str(system))
    links = {
        "in": "real/f",
        "abs_in": str(state / "real" / "f"),
        "system": str(system / "tool"),
        "dangling": "real/nothing",
        "proc": "/proc/self/root/etc/passwd",
        "outside": "/etc/hostname",
        "dotdot_out": "../..",
        "loop": "loop",
    }
    for name, target in links.items():
        os.symlink(target, state / name)
    os.symlink(state / "real", state / "dir")
    kept = {name for name in [*links, "dir"] if resolves_within(str(state / name), allowed)}
    assert kept == {"in", "abs_in", "system", "dir"}
    assert resolves_within(str(state / "dir" / "f"), allowed)  # through a link of the state


def test_confinement_repeats_until_no_link_points_at_a_removed_one(tree):
    state, _ = tree
    os.symlink("/proc/2/root", state / "r")
    os.symlink("r/tests/expected.txt", state / "answer")  # through a link that is about to go
    os.symlink("answer", state / "again")
    removed = confine_links([str(state)])
    assert sorted(Path(p).name for p in removed) == ["again", "answer", "r"]
    assert sorted(p.name for p in state.iterdir()) == ["real"]
