"""The user's own reward functions (`module:function`, TRL's signature) as extra components beside the service's
reward: loaded before any model, called on each generation batch, and folded with the service's total into the
reward and the group advantages the policy trains on."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from groupscore.client.functions import attribute, load_module, split_reference
from groupscore.train.config import RewardsConfig


@dataclass(frozen=True)
class UserReward:
    name: str
    weight: float
    function: Callable[..., Any]
    ref: str

    async def score(self, n: int, **kwargs: Any) -> list[float | None]:
        """Call it as TRL would; check that it gave one number (or None: does not apply) per completion."""
        out = self.function(**kwargs)
        if inspect.isawaitable(out):
            out = await out
        if not isinstance(out, list | tuple) or len(out) != n:
            got = f"{len(out)} values" if isinstance(out, list | tuple) else type(out).__name__
            raise ValueError(f"reward function {self.ref} returned {got} for {n} completions")
        values: list[float | None] = []
        for value in out:
            if value is None:
                values.append(None)
            elif isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
                values.append(float(value))
            else:
                raise ValueError(f"reward function {self.ref} returned {value!r}: a finite number or None is needed")
        return values


def load_reward_functions(cfg: RewardsConfig, service_components: Sequence[str] = ()) -> list[UserReward]:
    """Import every configured function; a bad reference is one line naming its field."""
    loaded: list[UserReward] = []
    names = {"service", *service_components}
    for index, entry in enumerate(cfg.functions):
        field = f"rewards.functions.{index}.function"
        module_ref, attr = split_reference(entry.function)  # the config checked its form
        try:
            obj = attribute(load_module(module_ref), attr)
        except Exception as exc:  # noqa: BLE001 - an import can raise anything; it is the user's module
            raise ValueError(f"{field}: cannot load {entry.function} ({type(exc).__name__}: {exc})") from None
        if not callable(obj):
            raise ValueError(f"{field}: {entry.function} is not callable (it is a {type(obj).__name__})")
        name = entry.name or attr.split(".")[-1]
        if name in names:
            raise ValueError(f"rewards.functions.{index}.name: {name!r} is taken (service components: use name:)")
        names.add(name)
        loaded.append(UserReward(name, entry.weight, obj, entry.function))
    return loaded


def combine(
    service: Sequence[float | None],
    extras: dict[str, list[float | None]],
    weights: dict[str, float],
    service_weight: float,
) -> list[float | None]:
    """Per completion: the weighted sum of the service's reward and each function's (None adds nothing, as TRL's
    nansum); None where the service could not judge the completion (it stays masked)."""
    out: list[float | None] = []
    for index, reward in enumerate(service):
        if reward is None:
            out.append(None)
            continue
        total = service_weight * reward
        for name, values in extras.items():
            value = values[index]
            if value is not None:
                total += weights[name] * value
        out.append(total)
    return out


# What every GRPO call passes a reward function besides the row's dataset columns (completions.CompletionRollouts).
TRL_KEYWORDS = ("prompts", "completions", "completion_ids", "task_id", "trainer_state", "log_extra", "log_metric")


def signature_problem(fn: Callable[..., Any], passed: Sequence[str]) -> str | None:
    """Why calling `fn` with the keywords `passed` would fail on every batch, in one clause; None when it would not
    (or when the signature cannot be read). The same rule as `groupscore check` (testing/signature.py)."""
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    named = {p.name for p in parameters if p.kind in keyword}
    columns = [name for name in passed if name not in TRL_KEYWORDS]
    have = f"the rows' columns are {', '.join(columns) or 'none'}"
    missing = [p.name for p in parameters if p.kind in keyword and p.default is p.empty and p.name not in passed]
    if missing:
        return f"needs `{missing[0]}`, which GRPO does not pass ({have}; TRL adds {', '.join(TRL_KEYWORDS)})"
    positional_only = [
        p.name for p in parameters if p.kind is inspect.Parameter.POSITIONAL_ONLY and p.default is p.empty
    ]
    if positional_only:
        return f"takes `{positional_only[0]}` by position only; TRL passes everything by keyword"
    unexpected = [name for name in passed if name not in named]
    if unexpected and not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return (
            f"takes no keyword `{unexpected[0]}`, which TRL passes (every column, completion_ids, trainer_state, "
            f"log_metric, ...): add **kwargs to its parameters ({have})"
        )
    return None


def check_signatures(functions: Sequence[UserReward], tasks: Sequence[Any]) -> None:
    """Each function can take what GRPO will pass it (TRL's keywords and the train rows' columns): else one line
    naming the function and the fix, before any model loads (a dry run and a real run alike)."""
    columns = sorted({k for t in tasks for k in t.columns} - {"prompt", "completion", "completions", "prompts"})
    for index, user in enumerate(functions):
        problem = signature_problem(user.function, [*TRL_KEYWORDS, *columns])
        if problem is not None:
            raise ValueError(f"rewards.functions.{index}.function: {user.ref} {problem}")
