"""Verifier versions: every kind has one, verdicts carry it, and fixture verdicts cannot change under an old version."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from groupscore.verifiers.batch import score_one
from groupscore.verifiers.composite import RewardSpec
from groupscore.verifiers.registry import KINDS, VERSIONS
from groupscore.verifiers.schema import Verdict, join_versions, split_versions

ROOT = Path(__file__).resolve().parent.parent
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
    spec = RewardSpec.model_validate({"components": [
        {"name": "correct"}, {"name": "strict", "params": {"strict": True}},
        {"name": "format", "verifier": "format", "params": {"tags": ["answer"]}, "weight": 0.2}]})
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
    from groupscore.verifiers.batch import score_jsonl

    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text(json.dumps(MATH) + "\n")
    assert score_jsonl(source, out, workers=1, progress=False) == 0
    assert json.loads(out.read_text())["verifier_version"] == f"math@{VERSIONS['math']}"


# ---------------------------------------------------------------------------------------------------------------------
# The rule: a fixture verdict never changes under an unchanged version.


def _pins(version: int, verdicts: dict[str, str]) -> dict:
    return {"version": version, "items": len(verdicts), "digest": verdict_pins.digest(verdicts), "verdicts": verdicts}


def test_a_changed_verdict_under_the_pinned_version_asks_for_a_bump():
    drift = verdict_pins.compare("math", 2, _pins(2, {"a": "correct 1", "b": "incorrect 0"}),
                                 {"a": "correct 1", "b": "correct 1"})
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
    """Scores every fixture item of every kind once (one batch, one pool start; ~1,200 math items, most on the
    string/numeric fast path)."""
    problems = [drift.message() for drift, _ in verdict_pins.drifts(sorted(KINDS), workers=2) if not drift.ok]
    assert not problems, "\n".join(problems)
