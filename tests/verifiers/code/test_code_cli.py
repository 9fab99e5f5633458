"""`groupscore score` on a JSONL of code items: routed through the registry to the code verifier, one record each."""

from __future__ import annotations

from pathlib import Path

from helpers import groupscore, read_jsonl

FIXTURE = Path(__file__).resolve().parents[3] / "cli" / "data" / "code" / "cli_items.jsonl"
EXPECTED = {  # id -> (reward, status)
    "add-honest": (1.0, "correct"),
    "add-hardcoded": (0.0, "incorrect"),
    "add-exit-zero": (0.0, "incorrect"),
    "sum-c": (1.0, "correct"),
    "sum-python-stdio": (1.0, "correct"),
    "prose-only": (0.0, "no_answer"),
    "bad-test-type": (0.0, "error"),
}


def test_groupscore_score_handles_code_items(tmp_path):
    out = tmp_path / "verdicts.jsonl"
    proc = groupscore("score", str(FIXTURE), "-o", str(out), "-j", "2", "--no-progress", timeout=300)
    assert proc.returncode == 1, proc.stderr  # the malformed item makes it 1; every other item is still scored
    records = read_jsonl(out)
    assert [r["id"] for r in records] == list(EXPECTED)
    for record in records:
        assert (record["reward"], record["status"]) == EXPECTED[record["id"]], record
    hardcoded = next(r for r in records if r["id"] == "add-hardcoded")
    assert hardcoded["details"]["public_passed"] == 2 and hardcoded["details"]["hidden_passed"] == 0
    assert "30" not in hardcoded["reason"] and "-5" not in hardcoded["reason"]  # nothing of the hidden tests
    assert "tests.0" in next(r for r in records if r["id"] == "bad-test-type")["reason"]
