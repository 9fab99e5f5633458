"""What `groupscore check` can test: one small Target interface and an adapter per kind of reward.

A target scores a batch of cases and returns one raw value per case (whatever the reward returned); judging
those values is the checks' job. Each target can describe itself as a `TargetSpec`, so that a fresh worker
process can rebuild it: that is how calls get a hard wall-clock bound and how determinism across processes
is tested.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from groupscore.client.functions import attribute, file_of, load_module, split_reference
from groupscore.testing.cases import Case, CasesError
from groupscore.testing.signature import TRL_EXTRAS, signature_problem


class TargetError(RuntimeError):
    """The target cannot be loaded (bad reference, import error): an error of the set-up, not a failed check."""


@dataclass(frozen=True)
class ItemError:
    """A per-item failure a target reports without failing the whole batch (e.g. a verifier's `error` verdict)."""

    reason: str


@dataclass(frozen=True)
class InfraError:
    """The infrastructure failed to score an item (an `infra_error` verdict, or verl's `infra_error` flag): nothing
    was judged, so no check counts it against the reward; the report notes how many there were."""

    reason: str


@dataclass(frozen=True)
class TargetSpec:
    """Enough to rebuild a target in another process."""

    kind: str  # "trl", "verl", "verifier", "service"
    ref: str  # "module:function", "path/file.py:function", a verifier kind, or a URL
    sys_path: tuple[str, ...] = ()


class Target(ABC):
    """A reward under test."""

    description: str
    allows_none = True  # TRL reads None as "this reward does not apply"; verl has no such value

    @abstractmethod
    def score(self, cases: Sequence[Case]) -> Any:
        """One raw value per case, in order; may raise (a crash of the reward is a finding, not a checker error).
        A reward function's own result comes back as it is, list or not: run_call judges its shape."""

    def spec(self) -> TargetSpec | None:
        """How to rebuild this target in a fresh process; None when it cannot be (a lambda, a closure)."""
        return None

    def validate(self, cases: Sequence[Case]) -> None:
        """Raise CasesError when the cases lack what this target needs (checked once, before any check runs)."""

    def close(self) -> None:
        pass


# --- Python callables -------------------------------------------------------------------------------------------


class RewardFunctionTarget(Target):
    """A TRL reward function: `fn(prompts, completions, completion_ids, **columns) -> list[float | None]`.

    Called exactly as TRL's GRPOTrainer calls it: every case field except prompt/completion becomes a keyword list,
    plus `trainer_state`, `log_extra` and `log_metric`. Async functions are awaited. `completion_ids` are the
    completion's UTF-8 bytes, a stand-in for token ids since no tokenizer is involved here.
    """

    def __init__(self, fn: Callable[..., Any], ref: str | None = None):
        self.fn = fn
        self.ref = ref if ref is not None else _importable_ref(fn)
        self.description = f"TRL reward function {self.ref or _callable_name(fn)}"

    def score(self, cases: Sequence[Case]) -> Any:
        keys: list[str] = []
        for case in cases:
            keys.extend(k for k in case.fields if k not in keys)
        columns: dict[str, Any] = {k: [case.fields.get(k) for case in cases] for k in keys}
        columns.update(trainer_state=_TRAINER_STATE, log_extra=_ignore, log_metric=_ignore)
        out = self.fn(
            prompts=[c.prompt for c in cases],
            completions=[c.completion for c in cases],
            completion_ids=[list(c.completion_text.encode("utf-8", "surrogatepass")) for c in cases],
            **columns,
        )
        if inspect.isawaitable(out):
            out = asyncio.run(_awaited(out))
        return out

    def spec(self) -> TargetSpec | None:
        return TargetSpec("trl", self.ref, tuple(sys.path)) if self.ref else None

    def validate(self, cases: Sequence[Case]) -> None:
        """The function's parameters against the cases' columns, before any call: a parameter without a default
        that no column fills (`ground_truth` when the cases have `answer`) would fail every call with a TypeError."""
        fields = list(dict.fromkeys(k for case in cases for k in case.fields))
        passed = ["prompts", "completions", "completion_ids", *fields, *TRL_EXTRAS]
        problem = signature_problem(self.fn, passed, ["prompt", "completion", *fields])
        if problem:
            raise CasesError(f"{self.description} {problem}")


class VerlScoreTarget(Target):
    """A verl reward: `compute_score(data_source, solution_str, ground_truth, extra_info) -> float | dict`.

    `ground_truth` is the case's `ground_truth` field, else its `answer`; `data_source` and `extra_info` come from the
    fields of those names when present. A dict result contributes its "score", as verl's reward manager reads it.
    """

    allows_none = False

    def __init__(self, fn: Callable[..., Any], ref: str | None = None):
        self.fn = fn
        self.ref = ref if ref is not None else _importable_ref(fn)
        self.description = f"verl compute_score {self.ref or _callable_name(fn)}"

    def validate(self, cases: Sequence[Case]) -> None:
        for case in cases:
            if "ground_truth" not in case.fields and "answer" not in case.fields:
                raise CasesError(f"{case.label}: a verl compute_score target needs a 'ground_truth' or 'answer' field")

    def score(self, cases: Sequence[Case]) -> list[Any]:
        out = []
        for case in cases:
            fields = case.fields
            value = self.fn(
                data_source=fields.get("data_source", "groupscore"),
                solution_str=case.completion_text,
                ground_truth=fields["ground_truth"] if "ground_truth" in fields else fields.get("answer"),
                extra_info=fields.get("extra_info", {}),
            )
            if isinstance(value, dict) and value.get("infra_error"):
                value = InfraError(str(value.get("reason", "the reward reported infra_error")))
            elif isinstance(value, dict):
                value = (
                    value["score"]
                    if "score" in value
                    else ItemError(f"returned a dict without 'score': {sorted(value)}")
                )
            out.append(value)
        return out

    def spec(self) -> TargetSpec | None:
        return TargetSpec("verl", self.ref, tuple(sys.path)) if self.ref else None


def _is_verl_signature(fn: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return "solution_str" in params


def callable_target(fn: Callable[..., Any], ref: str | None = None) -> Target:
    """The adapter a plain callable needs: verl's `compute_score` when it takes `solution_str`, else TRL's."""
    return VerlScoreTarget(fn, ref) if _is_verl_signature(fn) else RewardFunctionTarget(fn, ref)


# --- groupscore verifier kinds and the service ------------------------------------------------------------------


def infer_kind(case: Case, default: str | None = None) -> str:
    """The verifier kind of a case: its `verifier` field, else the default, else guessed from its reference fields."""
    kind = case.fields.get("verifier") or default
    if kind:
        return str(kind)
    if "tests" in case.fields or "hidden_tests" in case.fields:
        return "code"
    if "answer" in case.fields:
        return "math"
    raise CasesError(f"{case.label}: cannot tell the verifier kind; add a 'verifier' field (e.g. \"math\")")


def item_for_case(case: Case, kind: str) -> dict[str, Any]:
    """The registry item (as a dict) that scores this case's completion with verifier `kind`."""
    from groupscore.verifiers.registry import KINDS

    model_fields = KINDS[kind].item_model.model_fields
    # The case's `prompt` is the chat prompt; an item's `prompt` field (code) means code to prepend, so never mix them.
    item = {k: v for k, v in case.fields.items() if k in model_fields and k not in ("completion", "verifier", "prompt")}
    if "question" in model_fields and "question" not in item and case.prompt_text:  # math: the prompt is the question
        item["question"] = case.prompt_text
    if "item_prompt" in case.fields and "prompt" in model_fields:
        item["prompt"] = case.fields["item_prompt"]
    item.update(verifier=kind, completion=case.completion_text)
    return item


def _validate_items(cases: Sequence[Case], kind_of: Callable[[Case], str]) -> None:
    from pydantic import ValidationError

    from groupscore.verifiers.registry import KINDS, describe_error, parse_item

    for case in cases:
        kind = kind_of(case)
        if kind not in KINDS:
            raise CasesError(f"{case.label}: unknown verifier kind {kind!r} (known: {', '.join(KINDS)})")
        try:
            parse_item(item_for_case(case, kind))
        except ValidationError as exc:
            raise CasesError(f"{case.label}: not a valid {kind} item: {describe_error(exc)}") from None


class VerifierTarget(Target):
    """A built-in verifier kind, scored in this process through the registry (`parse_item`, `score_item`).

    A verdict with status `error` (the verifier failed on the item) comes back as an ItemError, one with status
    `infra_error` (nothing judged it) as an InfraError.
    """

    def __init__(self, kind: str):
        from groupscore.verifiers.registry import KINDS

        if kind not in KINDS:
            raise TargetError(f"unknown verifier kind {kind!r} (known: {', '.join(KINDS)})")
        self.kind = kind
        self.description = f"groupscore verifier {kind!r}"

    def validate(self, cases: Sequence[Case]) -> None:
        _validate_items(cases, lambda case: self.kind)

    def score(self, cases: Sequence[Case]) -> list[Any]:
        from groupscore.verifiers.registry import parse_item, score_item

        out: list[Any] = []
        for case in cases:
            verdict = score_item(parse_item(item_for_case(case, self.kind)))
            out.append(_verdict_value(verdict.model_dump(mode="json")))
        return out

    def spec(self) -> TargetSpec:
        return TargetSpec("verifier", self.kind)


class ServiceTarget(Target):
    """A running scoring service: each case becomes an item of its kind (its `verifier` field, the URL's `#kind`
    fragment, or guessed from its fields), scored through groupscore's service client (`POST /v1/score`)."""

    def __init__(self, url: str, token: str | None = None):
        base, _, fragment = url.partition("#")
        self.url = base.rstrip("/")
        self.default_kind = fragment or None
        if token is None:
            from groupscore.client import settings as client_settings

            token = client_settings.token()  # GROUPSCORE_TOKEN (the URL is ours: GROUPSCORE_URL is not read)
        self.token = token
        self.description = f"scoring service at {url}"
        self._client: Any = None

    def client(self) -> Any:
        if self._client is None:
            from groupscore.client.http import RetryPolicy, ScoreClient

            # Few retries: a check wants to see a flaky service, not wait it out; the caller bounds the time anyway.
            self._client = ScoreClient(self.url, token=self.token, retry=RetryPolicy(max_retries=2))
        return self._client

    def validate(self, cases: Sequence[Case]) -> None:
        _validate_items(cases, self._kind_of)
        if not self.client().ready():
            raise TargetError(f"no ready scoring service at {self.url} (GET /readyz failed)")

    def _kind_of(self, case: Case) -> str:
        return infer_kind(case, self.default_kind)

    def score(self, cases: Sequence[Case]) -> list[Any]:
        items = [item_for_case(case, self._kind_of(case)) for case in cases]
        return [_verdict_value(result) for result in self.client().score_raw(items)]

    def spec(self) -> TargetSpec:
        return TargetSpec("service", self.url + (f"#{self.default_kind}" if self.default_kind else ""))

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        self._client = None


def _verdict_value(verdict: dict[str, Any]) -> Any:
    """What a verdict means to the checks: its reward, or an ItemError / InfraError."""
    if verdict.get("status") == "error":
        return ItemError(f"verdict status error: {verdict.get('reason', '')}")
    if verdict.get("status") == "infra_error":
        return InfraError(str(verdict.get("reason", "")))
    return verdict.get("reward")


# --- resolving a TARGET argument --------------------------------------------------------------------------------


def resolve_target(ref: str) -> Target:
    """`module:function`, `path/to/file.py:function`, a verifier kind (`math`, `code`, ...) or an http(s) URL."""
    if ref.startswith(("http://", "https://")):
        return ServiceTarget(ref)
    if ":" in ref:
        fn = load_callable(ref)
        return callable_target(fn, ref)
    from groupscore.verifiers.registry import KINDS

    if ref in KINDS:
        return VerifierTarget(ref)
    raise TargetError(
        f"unknown target {ref!r}: expected module:function, a verifier kind ({', '.join(KINDS)}) or an http(s):// URL"
    )


def as_target(obj: Target | str | Callable[..., Any]) -> Target:
    """Whatever the Python API was given, as a Target."""
    if isinstance(obj, Target):
        return obj
    if isinstance(obj, str):
        return resolve_target(obj)
    if callable(obj):
        return callable_target(obj)
    raise TypeError(f"cannot test {obj!r}: give a callable, a Target, a verifier kind, a module:function or a URL")


def build_target(spec: TargetSpec) -> Target:
    """Rebuild a target from its spec (in a worker process)."""
    for entry in reversed(spec.sys_path):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    if spec.kind == "verifier":
        return VerifierTarget(spec.ref)
    if spec.kind == "service":
        return ServiceTarget(spec.ref)
    fn = load_callable(spec.ref)
    return VerlScoreTarget(fn, spec.ref) if spec.kind == "verl" else RewardFunctionTarget(fn, spec.ref)


def load_callable(ref: str) -> Callable[..., Any]:
    """Import `module:attr` or `path/file.py:attr` (attr may be dotted). Raises TargetError with the cause."""
    try:
        module_ref, attr = split_reference(ref)
    except ValueError:
        raise TargetError(f"bad target {ref!r}: expected module:function") from None
    path = file_of(module_ref)
    if path is not None and not path.is_file():
        raise TargetError(f"target file not found: {module_ref}")
    try:
        module = load_module(module_ref)
    except BaseException as exc:  # noqa: BLE001 - an import can raise anything, SystemExit included
        raise TargetError(f"cannot import {module_ref!r}: {type(exc).__name__}: {exc}") from None
    try:
        obj = attribute(module, attr)
    except AttributeError:
        raise TargetError(f"{module_ref!r} has no attribute {attr!r}") from None
    if not callable(obj):
        raise TargetError(f"{ref!r} is not callable (it is a {type(obj).__name__})")
    return obj


def _importable_ref(fn: Callable[..., Any]) -> str | None:
    """`module:qualname` when importing that gives back this very object (so a worker process can rebuild it)."""
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    if not module or not qualname or module == "__main__" or "<" in qualname:
        return None
    try:
        obj: Any = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except Exception:  # noqa: BLE001 - any failure only means the function has no importable name
        return None
    return f"{module}:{qualname}" if obj is fn else None


def _callable_name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__name__


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def _ignore(*args: Any, **kwargs: Any) -> None:
    return None


# What a reward function sees as `trainer_state`: the fields rewards shaped by training progress read.
_TRAINER_STATE = SimpleNamespace(global_step=0, max_steps=1000, epoch=0.0, num_train_epochs=1, log_history=[])
