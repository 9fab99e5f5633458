"""Verifier versions: every kind has one, verdicts carry it, and fixture verdicts cannot change under an old version."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from groupscore.runtime.batch import score_one
from groupscore.schema.reward import RewardSpec
from groupscore.schema.verdict import Verdict, join_versions, split_versions
from groupscore.verifiers.registry import KINDS, VERSIONS

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import verdict_pins  # noqa: E402

MATH = {"id": "m", "verifier": "math", "completion": "so \\boxed{42}", "answer": "42"}


def test_every_kind_has_a_version():
    assert set(VERSIONS) == set(KINDS)
    assert all(isinstance(v, int) and v >= 1 for v in VERSIONS.values())
    assert {name: kind.version_tag for name, kind in KINDS.items()} == {k: f"{k}@{v}" for k, v in VERSIONS.items()}


def test_a_verdict_carries_the_version_of_the_kind_that_judged_it():
    verdict = score_one(MATH)
    assert verdict.status == "correct" and verdict.verifier_version == f"math@{VERSIONS['math']}"
    wrong = score_one({**MATH, "completion": "\\boxed{41}"})
    assert wrong.verifier_version == f"math@{VERSIONS['math']}"
    fmt = score_one({"verifier": "format", "completion": "<answer>4</answer>", "tags": ["answer"]})
    assert fmt.verifier_version == f"format@{VERSIONS['format']}"


def test_an_invalid_item_was_judged_by_no_verifier():
    assert score_one({"verifier": "math", "completion": "x"}).verifier_version is None
    assert score_one("not json").verifier_version is None


def test_a_composite_verdict_names_every_kind_its_components_used():
    spec = RewardSpec.model_validate(
        {
            "components": [
                {"name": "correct"},
                {"name": "strict", "params": {"strict": True}},
                {"name": "format", "verifier": "format", "params": {"tags": ["answer"]}, "weight": 0.2},
            ]
        }
    )
    verdict = score_one({**MATH, "completion": "<answer>\\boxed{42}</answer>"}, spec)
    assert verdict.verifier_version == f"format@{VERSIONS['format']}+math@{VERSIONS['math']}"
    assert split_versions(verdict.verifier_version) == {"format": VERSIONS["format"], "math": VERSIONS["math"]}


def test_version_tags_round_trip_and_malformed_tags_are_refused():
    assert join_versions({"math": 3, "code": 2}) == "code@2+math@3"
    assert split_versions("code@2+math@3") == {"code": 2, "math": 3}
    for bad in ("math", "math@", "Math@1", "math@1+", "math@x"):
        with pytest.raises(ValueError):
            split_versions(bad)
    with pytest.raises(ValueError):
        Verdict(reward=1.0, status="correct", verifier_version="math 2")


def test_cli_records_carry_the_version(tmp_path):
    from groupscore.score import score_jsonl

    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text(json.dumps(MATH) + "\n")
    assert score_jsonl(source, out, workers=1, progress=False) == 0
    assert json.loads(out.read_text())["verifier_version"] == f"math@{VERSIONS['math']}"


# ---------------------------------------------------------------------------------------------------------------------
# The rule: a fixture verdict never changes under an unchanged version.


def _pins(version: int, verdicts: dict[str, str]) -> dict:
    return {"version": version, "items": len(verdicts), "digest": verdict_pins.digest(verdicts), "verdicts": verdicts}


def test_a_changed_verdict_under_the_pinned_version_asks_for_a_bump():
    drift = verdict_pins.compare(
        "math", 2, _pins(2, {"a": "correct 1", "b": "incorrect 0"}), {"a": "correct 1", "b": "correct 1"}
    )
    assert drift.needs_bump and not drift.ok
    assert "Bump VERSIONS['math'] in verifiers/registry.py" in drift.message()
    assert "b: incorrect 0 -> correct 1" in drift.message()


def test_a_bumped_version_with_old_pins_asks_for_a_refresh_not_a_bump():
    drift = verdict_pins.compare("math", 3, _pins(2, {"a": "correct 1"}), {"a": "incorrect 0"})
    assert not drift.ok and not drift.needs_bump
    assert "pinned at version 2" in drift.message() and "--write --kind math" in drift.message()


def test_added_fixtures_need_a_refresh_but_no_bump():
    drift = verdict_pins.compare("sql", 1, _pins(1, {"a": "correct 1"}), {"a": "correct 1", "new": "incorrect 0"})
    assert not drift.ok and not drift.needs_bump and drift.added == ["new"]
    assert verdict_pins.compare("sql", 1, _pins(1, {"a": "correct 1"}), {"a": "correct 1"}).ok


def test_write_refuses_to_pin_changed_verdicts_to_an_unchanged_version(tmp_path, monkeypatch, capsys):
    pins = tmp_path / "pins.json"
    monkeypatch.setattr(verdict_pins, "PINS", pins)
    monkeypatch.setattr(verdict_pins, "score", lambda found, kinds, workers=None: {"format": {"x": "correct 1"}})
    stale = {"format": _pins(VERSIONS["format"], {"x": "incorrect 0"})}
    verdict_pins.write_pins(stale)
    assert verdict_pins.main(["--write", "--kind", "format"]) == 1
    assert "Bump VERSIONS['format']" in capsys.readouterr().err
    assert verdict_pins.load_pins() == stale  # nothing rewritten
    older = {"format": _pins(VERSIONS["format"] - 1, {"x": "incorrect 0"})}
    verdict_pins.write_pins(older)
    assert verdict_pins.main(["--write", "--kind", "format"]) == 0  # after a bump, the refresh goes through
    assert verdict_pins.load_pins()["format"]["verdicts"] == {"x": "correct 1"}
    assert verdict_pins.main(["--kind", "format"]) == 0


def test_pins_file_is_what_the_tool_wrote():
    for kind, pinned in verdict_pins.load_pins().items():
        assert kind in KINDS
        assert pinned["digest"] == verdict_pins.digest(pinned["verdicts"]), f"{kind}: pins edited by hand"
        assert pinned["items"] == len(pinned["verdicts"])


def test_fixture_verdicts_are_pinned_to_the_current_versions():
    """Scores the fixture items of every kind whose inputs changed since its pins (all of them, one batch, with
    GROUPSCORE_FULL_PIN_CHECK=1)."""
    full = os.environ.get("GROUPSCORE_FULL_PIN_CHECK") == "1"
    problems = [
        drift.message() for drift, _, _ in verdict_pins.drifts(sorted(KINDS), workers=2, full=full) if not drift.ok
    ]
    assert not problems, "\n".join(problems)


def _pinned_with_inputs(monkeypatch, tmp_path, inputs: str | None = None):
    """sql's fixture items pinned (all "correct 1") in a scratch pins file, with `inputs` (default: the real digest)."""
    found = verdict_pins.collect()
    monkeypatch.setattr(verdict_pins, "PINS", tmp_path / "pins.json")
    verdicts = {key: "correct 1" for key in found.items["sql"]}
    digest = verdict_pins.inputs_digest(found.items["sql"]) if inputs is None else inputs
    verdict_pins.write_pins({"sql": {**_pins(VERSIONS["sql"], verdicts), "inputs": digest}})
    return verdicts


def test_a_kind_whose_inputs_did_not_change_is_not_scored_again(monkeypatch, tmp_path):
    verdicts = _pinned_with_inputs(monkeypatch, tmp_path)
    scored = []
    monkeypatch.setattr(
        verdict_pins, "score", lambda found, kinds, workers=None: scored.extend(kinds) or {kind: {} for kind in kinds}
    )
    [(drift, now, _)] = verdict_pins.drifts(["sql"])
    assert scored == [] and drift.ok and now == verdicts
    [(drift, now, _)] = verdict_pins.drifts(["sql"], full=True)  # --full scores regardless
    assert scored == ["sql"] and drift.removed  # (the stand-in scorer returned nothing)


def test_a_kind_whose_inputs_changed_is_scored(monkeypatch, tmp_path):
    _pinned_with_inputs(monkeypatch, tmp_path, "inputs of an older checkout")
    monkeypatch.setattr(
        verdict_pins,
        "score",
        lambda found, kinds, workers=None: {kind: {key: "incorrect 0" for key in found.items[kind]} for kind in kinds},
    )
    [(drift, _, _)] = verdict_pins.drifts(["sql"])
    assert drift.needs_bump  # the stand-in scorer changed every verdict: caught, though the pins were reused before


def test_the_inputs_digest_follows_items_and_sources(tmp_path, monkeypatch):
    items = {"a": {"verifier": "sql", "completion": "x"}}
    base = verdict_pins.inputs_digest(items)
    assert verdict_pins.inputs_digest(items) == base
    assert verdict_pins.inputs_digest({"a": {"verifier": "sql", "completion": "y"}}) != base
    (tmp_path / "verifiers").mkdir()
    (tmp_path / "verifiers" / "m.py").write_text("X = 1\n")
    monkeypatch.setattr(verdict_pins, "ROOT", tmp_path)
    first = verdict_pins.inputs_digest(items)
    (tmp_path / "verifiers" / "m.py").write_text("X = 2\n")
    assert verdict_pins.inputs_digest(items) != first
