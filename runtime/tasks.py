"""What the service's scoring workers run: a task of raw items in, plain verdict dicts out; every scorer loaded up
front; the request's deadline checked before each item is started; a SandboxFusion-style run through the verifiers.

These run inside the workers of `engine.ScoringEngine` (and are plain functions, so tests call them directly).
"""

from __future__ import annotations

import os
import time
from functools import lru_cache
from typing import Any

from groupscore.schema.reward import RewardSpec
from groupscore.schema.verdict import Verdict
from groupscore.verifiers.budget import item_time_budget_s, runs_programs
from groupscore.verifiers.registry import KINDS
from groupscore.verifiers.scoring import raw_item_id, score_raw

# Test hooks, honoured only when the service runs with debug on: an item's metadata may ask its worker to sleep first,
# so tests can hold the queue full or kill a worker in the middle of a batch deterministically, or to allocate that
# many MB while scoring it, so tests can run a worker into its memory cap.
DEBUG_SLEEP_KEY = "debug_sleep_s"
DEBUG_ALLOC_KEY = "debug_alloc_mb"
_MAX_DEBUG_SLEEP_S = 30.0
# Beyond an item's time budget, what its scoring still needs before the verdict is back. A program: the host's judging
# of what its jails returned (the worst answers cost ~0.6 s of CPU each, two per runner output: bench/RESULTS.md,
# family 4) on a loaded host, and the verdict's way back. Any other item with a budget (math's symbolic step, a
# schema's regex check): stopping the step that ran out (its bounded worker is killed and re-forked, milliseconds) and
# the verdict's way back.
START_MARGIN_S = 5.0
RETURN_MARGIN_S = 1.0


def load_scorers() -> dict[str, str | None]:
    """Import every kind's scorer now (not on the first item); maps kind -> None, or the import error."""
    problems: dict[str, str | None] = {}
    for name, kind in KINDS.items():
        try:
            kind.scorer  # noqa: B018 - cached_property: importing is the point
            problems[name] = None
        except Exception as exc:  # noqa: BLE001 - a missing kind is reported by /readyz, its items get error verdicts
            problems[name] = f"{type(exc).__name__}: {exc}"
    return problems


def warm() -> tuple[int, dict[str, str | None]]:
    """Run once in each worker at start-up: its pid, and which kinds could not be loaded.

    It also starts math's symbolic workers (sympy imported), which one-shot callers such as `groupscore score` start
    only when an item needs them: the service lives long, and its first symbolic requests must not wait for sympy."""
    problems = load_scorers()
    if problems.get("math") is None:
        from groupscore.verifiers.math.verify import warm_up_symbolic

        warm_up_symbolic()
    return os.getpid(), problems


def pid() -> int:
    return os.getpid()


@lru_cache(maxsize=64)
def spec_of(spec_json: str | None) -> RewardSpec | None:
    # The spec travels as JSON text (validated by the service already); parsing it once per worker is enough.
    return None if spec_json is None else RewardSpec.model_validate_json(spec_json)


def score_task(
    raw_items: list[Any], spec_json: str | None, debug: bool, deadline_wall: float | None = None
) -> list[dict[str, Any]]:
    """Score raw items in order; every item yields exactly one verdict dict (errors included).

    deadline_wall: the request's deadline on the wall clock (time.time()). An item whose own limits allow more scoring
    time than is left is not started (see `fits_before`): it gets the deadline's infra_error at once. So every item
    this starts ends before the deadline, and the task's verdicts (a chunk's, answered together) come back in time."""
    spec = spec_of(spec_json)
    verdicts = []
    for raw in raw_items:
        if deadline_wall is not None and time.time() >= deadline_wall:
            verdicts.append(deadline_verdict(raw))  # the request has answered without it: nobody waits for this one
            continue
        if deadline_wall is not None and not fits_before(raw, spec, deadline_wall):
            verdicts.append(deadline_verdict(raw, "its own limits allow more scoring time than was left"))
            continue
        try:
            held = _debug_hooks(raw) if debug else None
            verdicts.append(score_raw(raw, spec).model_dump(mode="json"))
            del held
        except (
            MemoryError
        ):  # the process's cap (worker_memory_mb): this item's verdict, not the task's or the process's
            verdicts.append(
                Verdict.error(
                    raw_item_id(raw),
                    "scoring this item ran into the scoring process's memory cap (GROUPSCORE_WORKER_MEMORY_MB)",
                ).model_dump(mode="json")
            )
    return verdicts


def fits_before(raw: Any, spec: RewardSpec | None, deadline_wall: float) -> bool:
    """Whether the item can be scored to the end of its own limits before the deadline, with its margin to spare
    (START_MARGIN_S for a program, RETURN_MARGIN_S for any other item).

    Every item is started only then, so a program that runs long, or a math answer whose symbolic step runs to its
    `timeout_s`, always ends with its own `timeout` verdict (a 0 that is trained on), never the deadline's infra_error
    (masked), and never holds its chunk-mates' verdicts past the deadline: whether an item is masked depends on the
    queue and the item's limits, never on what its completion, or a chunk-mate's, does."""
    budget = item_time_budget_s(raw, spec)
    if budget <= 0.0:
        return True  # a kind with no time bound of its own, or a bad item (answered at once)
    margin = START_MARGIN_S if runs_programs(raw, spec) else RETURN_MARGIN_S
    return budget + margin <= deadline_wall - time.time()


def deadline_verdict(raw: Any, why: str = "") -> dict[str, Any]:
    """Infra, not timeout: our side did not get to the item (or let it run) before the request's deadline."""
    reason = "not scored before the request's deadline" + (f": {why}" if why else "")
    return Verdict.infra_error(raw_item_id(raw), reason, "service_deadline", service_deadline=True).model_dump(
        mode="json"
    )


def _debug_hooks(raw: Any) -> bytearray | None:
    if not isinstance(raw, dict) or not isinstance(raw.get("metadata"), dict):
        return None
    delay = raw["metadata"].get(DEBUG_SLEEP_KEY)
    if isinstance(delay, (int, float)) and delay > 0:
        time.sleep(min(float(delay), _MAX_DEBUG_SLEEP_S))
    size_mb = raw["metadata"].get(DEBUG_ALLOC_KEY)
    return bytearray(int(size_mb) << 20) if isinstance(size_mb, int) and size_mb > 0 else None


def run_code_task(fields: dict[str, Any]) -> tuple[str, Any]:
    """One SandboxFusion-style run in the sandbox: ("ok", RunResult) or ("sandbox_error", message)."""
    from groupscore.runtime.programs import ProgramRun, run_program
    from groupscore.sandbox import SandboxUnavailable

    try:
        return "ok", run_program(ProgramRun(**fields))
    except SandboxUnavailable as exc:
        return "sandbox_error", f"sandbox unavailable: {exc}"
    except ValueError as exc:  # bad request details the models could not catch (files, limits)
        return "sandbox_error", str(exc)
