"""The trainer's coupling to TRL's internals is one override and one call, checked before any model loads: a TRL
whose signatures moved is refused in one line, and no second trainer or second override can come back unnoticed."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest
from trl import GRPOTrainer

from groupscore.train.trainer import TRL_INTERNALS, GroupGRPOTrainer, check_trl_internals

TRAIN = Path(__file__).resolve().parents[2] / "train"


def test_the_installed_trl_has_the_internals_the_trainer_was_written_against():
    check_trl_internals(GRPOTrainer)
    for name, parameters in TRL_INTERNALS.items():
        assert list(inspect.signature(getattr(GRPOTrainer, name)).parameters) == parameters


def test_a_trl_whose_internals_moved_is_refused_in_one_line():
    class Renamed(GRPOTrainer):
        def _generate_and_score_completions(self, batch):  # a parameter renamed upstream
            raise AssertionError

    class Gone(GRPOTrainer):
        _generate_single_turn = None

    with pytest.raises(RuntimeError, match=r"GRPOTrainer\._generate_and_score_completions is \['self', 'batch'\]"):
        check_trl_internals(Renamed)
    with pytest.raises(RuntimeError, match=r"_generate_single_turn is gone.*pip install 'trl>=1\.16,<1\.17'"):
        check_trl_internals(Gone)


def _classes_on_trl() -> list[tuple[str, ast.ClassDef]]:
    found = []
    for path in sorted(TRAIN.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                isinstance(base, ast.Name) and base.id.endswith("Trainer") and base.id != "TrainerCallback"
                for base in node.bases
            ):
                found.append((path.name, node))
    return found


def test_one_trainer_and_one_override_of_trl_internals():
    classes = [
        (name, node)
        for name, node in _classes_on_trl()
        if any(isinstance(b, ast.Name) and b.id == "GRPOTrainer" for b in node.bases)
    ]
    assert [(name, node.name) for name, node in classes] == [("trainer.py", "GroupGRPOTrainer")]
    overridden = {
        item.name
        for _, node in classes
        for item in node.body
        if isinstance(item, ast.FunctionDef) and item.name.startswith("_") and not item.name.startswith("__")
    }
    assert overridden == {"_generate_and_score_completions"}
    private = {name for name in vars(GroupGRPOTrainer) if name.startswith("_") and not name.startswith("__")}
    assert private == {"_generate_and_score_completions"}
