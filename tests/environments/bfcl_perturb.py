"""Wrong trajectories made from a BFCL task's ground truth, for holding groupscore's check to BFCL's oracle.

Four kinds, each one change, chosen by a random.Random seeded from (seed, task id, kind), so a seed always gives the
same trajectories: a call dropped, a call duplicated (right after itself), two calls swapped (within a turn, else
the last call of a turn with the first of the next), an argument changed (a string edited, a number moved, a bool
flipped, a list shortened or reordered, a dict's key removed). Some are still right by BFCL's measure (a duplicated
`ls`, swapped calls that commute): the oracle, not this module, says which.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass
from typing import Any

from groupscore.environments.bfcl import reference_trajectory
from groupscore.environments.task import Task

KINDS = ("drop", "duplicate", "swap", "argument")
Calls = list[list[dict[str, Any]]]


@dataclass(frozen=True)
class Perturbed:
    key: str  # "<task id>:<kind>:<seed>"
    task_id: str
    kind: str
    note: str  # what changed, e.g. "turn 1: dropped call 0 (cd)"
    turns: Calls


def _positions(turns: Calls) -> list[tuple[int, int]]:
    return [(t, i) for t, turn in enumerate(turns) for i in range(len(turn))]


def _drop(turns: Calls, rng: random.Random) -> str | None:
    spots = _positions(turns)
    if not spots:
        return None
    t, i = rng.choice(spots)
    gone = turns[t].pop(i)
    return f"turn {t}: dropped call {i} ({gone['name']})"


def _duplicate(turns: Calls, rng: random.Random) -> str | None:
    spots = _positions(turns)
    if not spots:
        return None
    t, i = rng.choice(spots)
    turns[t].insert(i + 1, copy.deepcopy(turns[t][i]))
    return f"turn {t}: call {i} ({turns[t][i]['name']}) made twice"


def _swap(turns: Calls, rng: random.Random) -> str | None:
    within = [t for t, turn in enumerate(turns) if len(turn) >= 2]
    if within:
        t = rng.choice(within)
        i, j = sorted(rng.sample(range(len(turns[t])), 2))
        turns[t][i], turns[t][j] = turns[t][j], turns[t][i]
        return f"turn {t}: calls {i} and {j} swapped ({turns[t][j]['name']}, {turns[t][i]['name']})"
    across = [t for t in range(len(turns) - 1) if turns[t] and turns[t + 1]]
    if not across:
        return None
    t = rng.choice(across)
    turns[t][-1], turns[t + 1][0] = turns[t + 1][0], turns[t][-1]
    return f"turns {t} and {t + 1}: last and first calls swapped"


def changed_value(value: Any, rng: random.Random) -> Any:
    """Another value of the same kind; None where the kind has no change here (None itself)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + rng.choice((1, -1, 10))
    if isinstance(value, float):
        return round(value + rng.choice((0.5, -0.5, 1.0)), 6)
    if isinstance(value, str):
        if value and rng.random() < 0.5:
            return value[:-1] if len(value) > 1 else value + "x"
        return value + rng.choice(("_2", "x", " "))
    if isinstance(value, list):
        if len(value) >= 2 and value != value[::-1] and rng.random() < 0.5:
            return value[::-1]
        return value[:-1] if value else ["x"]
    if isinstance(value, dict) and value:
        out = dict(value)
        out.pop(rng.choice(sorted(out)))
        return out
    return None


def _argument(turns: Calls, rng: random.Random) -> str | None:
    spots = [
        (t, i, name)
        for t, i in _positions(turns)
        for name, value in sorted(turns[t][i]["arguments"].items())
        if value is not None and value != {}
    ]
    if not spots:
        return None
    t, i, name = rng.choice(spots)
    old = turns[t][i]["arguments"][name]
    new = changed_value(old, rng)
    turns[t][i]["arguments"][name] = new
    return f"turn {t}: {turns[t][i]['name']}({name}={old!r} -> {new!r})"


CHANGES = {"drop": _drop, "duplicate": _duplicate, "swap": _swap, "argument": _argument}


def perturb(task: Task, seed: int = 0, kinds: tuple[str, ...] = KINDS) -> list[Perturbed]:
    """One trajectory of each kind that applies to the task's ground truth."""
    truth = reference_trajectory(task)
    out = []
    for kind in kinds:
        rng = random.Random(f"{seed}:{task.id}:{kind}")
        turns = copy.deepcopy(truth)
        note = CHANGES[kind](turns, rng)
        if note is not None:
            out.append(Perturbed(f"{task.id}:{kind}:{seed}", task.id, kind, note, turns))
    return out


def perturbed_set(tasks: list[Task], seeds: tuple[int, ...] = (0,)) -> list[Perturbed]:
    """Every task's perturbations, for each seed."""
    return [p for seed in seeds for task in tasks for p in perturb(task, seed)]
