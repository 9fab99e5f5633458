"""BFCL's multi-turn check, reproduced over data: what the model's calls and the reference's left after each turn.

A pure function (no jail, no BFCL import): the session core runs both trajectories in the jail and hands over, per
turn, the calls with their result text and the class instances' public state (data/class_state.py's encoding). The
checks, their order and their error types are BFCL's (bfcl.py's docstring lists them); the first failing turn
decides. The tests' oracle (tests/environments/bfcl_oracle.py) runs BFCL's own checker, and the tests hold the two to
the same verdicts.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

if TYPE_CHECKING:
    from groupscore.environments.record import Record
    from groupscore.environments.task import Task

# How much of a differing value the evidence shows: enough to see the difference, never a long context's megabytes.
SHOWN_CHARS = 300


class CallRecord(TypedDict):
    """One executed call: its result as BFCL's executor records it (data/class_state.py: result_text, error_text)."""

    name: str
    arguments: dict[str, Any]
    text: str


class TurnRecord(TypedDict):
    """One turn of a trajectory: the calls made in it, and every class's public state at its end."""

    calls: list[CallRecord]
    state: dict[str, dict[str, Any]] | None
    error: NotRequired[str]  # the session could not give the state (the jail ended): recorded, scored as missing


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + f"... ({len(text)} chars)"


def _fail(error_type: str, turn: int, message: str, **details: Any) -> tuple[float, dict[str, Any]]:
    return 0.0, {"valid": False, "error_type": error_type, "turn": turn, "error_message": message, **details}


def state_differences(model: dict[str, Any] | None, reference: dict[str, Any] | None) -> dict[str, Any]:
    """{class: {attribute: {model, reference}}} where the reference's public attributes differ from the model's.
    Attributes only the model's instance has are not compared (BFCL reads the ground truth's attributes)."""
    model, reference = model or {}, reference or {}
    out: dict[str, Any] = {}
    for class_name, ref_attrs in reference.items():
        mine = model.get(class_name)
        if mine is None:
            out[class_name] = {"(instance)": {"model": None, "reference": "present"}}
            continue
        diff = {
            attr: {"model": _shown(mine.get(attr, "(missing)")), "reference": _shown(value)}
            for attr, value in ref_attrs.items()
            if attr not in mine or mine[attr] != value
        }
        if diff:
            out[class_name] = diff
    return out


def missing_results(reference_texts: Sequence[str], model_texts: Sequence[str]) -> list[str]:
    """The reference's results not found in the model's, each model result used once (order ignored)."""
    left = list(model_texts)
    missing = []
    for text in reference_texts:
        try:
            left.remove(text)
        except ValueError:
            missing.append(text)
    return missing


def bfcl_check(model: Sequence[TurnRecord], reference: Sequence[TurnRecord]) -> tuple[float, dict[str, Any]]:
    """(1.0 or 0.0, evidence): BFCL's multi-turn verdict for the model's turns against the reference's.

    `reference` holds one record per turn of the task (its ground truth run); `model` one per turn the episode got
    to. Evidence names the first failing turn and BFCL's error type, or says every turn passed."""
    if len(model) != len(reference):
        return _fail(
            "multi_turn:force_terminated",
            min(len(model), len(reference)),
            f"the model's turns ({len(model)}) are not the task's ({len(reference)})",
        )
    model_texts: list[str] = []  # results of every model call so far, all turns together (as BFCL keeps them)
    for turn, (mine, ref) in enumerate(zip(model, reference, strict=True)):
        model_texts.extend(c["text"] for c in mine["calls"])
        if not ref["calls"]:
            # the turn where the model should ask for what is missing: BFCL checks nothing here (its calls ran)
            continue
        if not mine["calls"]:
            return _fail("multi_turn:empty_turn_model_response", turn, f"no tool call in turn {turn}")
        if mine["state"] is None or ref["state"] is None:
            side = "model's" if mine["state"] is None else "reference's"
            return _fail("multi_turn:state_unavailable", turn, f"the {side} state after turn {turn} is missing")
        differences = state_differences(mine["state"], ref["state"])
        if differences:
            return _fail(
                "multi_turn:instance_state_mismatch",
                turn,
                f"after turn {turn}, {', '.join(differences)} differ from the reference's state",
                differences=differences,
            )
        missing = missing_results([c["text"] for c in ref["calls"]], model_texts)
        if missing:
            return _fail(
                "multi_turn:execution_response_mismatch",
                turn,
                f"the model's results so far lack {len(missing)} of the reference's results of turn {turn}",
                missing_items=[_shown(m) for m in missing],
            )
    return 1.0, {"valid": True, "turns": len(reference)}


def _text(call: dict[str, Any]) -> str:
    """A recorded call's BFCL result text: the session's `text` where it kept one, else what the model was shown.
    Both trajectories run through the same session, so the response check compares like with like either way; the
    shown text differs from BFCL's for None ("null"), lists (JSON quotes) and non-ASCII, not in what it tells apart."""
    if "text" in call:
        return str(call["text"])
    output = call.get("output", "")
    return output if isinstance(output, str) else json.dumps(output)


def turn_records(record: Record) -> list[TurnRecord]:
    """A session's Record (calls by turn, the classes' state after each turn) as bfcl_check's turns."""
    turns: list[TurnRecord] = []
    for i, calls in enumerate(record.calls):
        state = record.states[i] if i < len(record.states) else None
        turns.append(
            {
                "calls": [{"name": c["name"], "arguments": c.get("arguments", {}), "text": _text(c)} for c in calls],
                "state": state if isinstance(state, dict) else None,
            }
        )
    return turns


def check_bfcl(task: Task, record: Record, reference: Record) -> tuple[float, dict[str, Any]]:
    """The state checker of a BFCL task (metadata checker "bfcl"): the session's record against the reference's."""
    return bfcl_check(turn_records(record), turn_records(reference))
