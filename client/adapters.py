"""Drop-in reward functions for trainers, backed by the scoring service: TRL's GRPOTrainer and verl.

TRL (sync or async; TRL awaits async reward functions itself):

    reward = trl_reward_func("http://127.0.0.1:8000", verifier="math")
    GRPOTrainer(..., reward_funcs=[reward])

verl (`custom_reward_function.path=<this file>`, `name=compute_score`), with GROUPSCORE_URL pointing at the service:

    compute_score(data_source, solution_str, ground_truth, extra_info)

OpenRLHF and SandboxFusion speak HTTP to the service directly: see `groupscore.service.protocols`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from typing import Any

from groupscore.client.http import AsyncScoreClient, ScoreClient
from groupscore.client.loops import LoopClients
from groupscore.schema.columns import KIND_FIELDS, MissingColumn, check_columns
from groupscore.schema.reward import KIND_NAMES, RewardSpec
from groupscore.schema.verdict import Status

__all__ = ["MissingColumn", "completion_text", "compute_score", "compute_score_batch", "trl_reward_func", "verl_item"]

INFRA_ERROR = Status.infra_error.value


def completion_text(completion: Any) -> str:
    """A TRL completion as text: a string as is; a chat completion (list of messages): its assistant content."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        completion = [completion]
    parts = []
    for message in completion or []:
        if not isinstance(message, dict) or message.get("role", "assistant") != "assistant":
            continue
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):  # multimodal content: keep the text parts
            parts.extend(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return "".join(parts)


class _ItemBuilder:
    """Turns one TRL batch (completions + dataset columns) into items of one verifier kind."""

    def __init__(
        self, verifier: str, columns: dict[str, str] | None, fixed: dict[str, Any] | None, kind_column: str | None
    ) -> None:
        if verifier not in KIND_NAMES:
            raise ValueError(f"unknown verifier kind {verifier!r}; known: {', '.join(sorted(KIND_NAMES))}")
        self.verifier = verifier
        self.kind_column = kind_column
        self.fixed = dict(fixed or {})
        # Item field -> dataset column: every field of the kind that a column of the same name holds, unless renamed.
        self.item_fields = list(KIND_FIELDS[verifier])
        self.columns = {f: f for f in self.item_fields}
        self.columns.update(columns or {})

    def build(self, completions: Sequence[Any], kwargs: dict[str, Any]) -> tuple[list[dict[str, Any]], list[int]]:
        """Items for the rows this kind applies to, and the row index of each."""
        items, rows = [], []
        kinds = kwargs.get(self.kind_column) if self.kind_column else None
        for row, completion in enumerate(completions):
            if isinstance(kinds, (list, tuple)) and kinds[row] is not None and kinds[row] != self.verifier:
                continue  # another kind's row: this reward does not apply (TRL takes None)
            item: dict[str, Any] = {
                "verifier": self.verifier,
                "id": row,
                "completion": completion_text(completion),
                **self.fixed,
            }
            for field, column in self.columns.items():
                values = kwargs.get(column)
                if isinstance(values, (list, tuple)) and len(values) == len(completions) and values[row] is not None:
                    value = values[row]
                    if field == "answer" and not isinstance(value, str):
                        value = str(value)  # numeric answer columns (GSM8K-style ints)
                    # Datasets often store structured references (tests) as JSON text.
                    if field not in ("answer",) and isinstance(value, str) and value[:1] in "[{":
                        try:
                            value = json.loads(value)
                        except json.JSONDecodeError:
                            pass
                    item[field] = value
            items.append(item)
            rows.append(row)
        return items, rows


def _fold(
    n_rows: int,
    rows: list[int],
    verdicts: list[dict[str, Any]],
    component: str | None,
    log_metric: Callable[[str, float], None] | None,
    name: str,
) -> list[float | None]:
    rewards: list[float | None] = [None] * n_rows
    for row, verdict in zip(rows, verdicts):
        if verdict["status"] == INFRA_ERROR:
            continue  # not judged: None, which TRL masks, never a fake 0 to learn from
        if component is None:
            rewards[row] = float(verdict["reward"])
        else:
            rewards[row] = float((verdict.get("components") or {}).get(component, 0.0))
    if log_metric is not None and verdicts:
        # Per-component means of the rows this reward applies to (TRL averages them over the logging step).
        names = sorted({c for v in verdicts for c in (v.get("components") or {})})
        for c in names:
            log_metric(f"{name}/{c}", sum((v.get("components") or {}).get(c, 0.0) for v in verdicts) / len(verdicts))
        log_metric(f"{name}/error_rate", sum(v["status"] == "error" for v in verdicts) / len(verdicts))
        log_metric(f"{name}/infra_error_rate", sum(v["status"] == INFRA_ERROR for v in verdicts) / len(verdicts))
    return rewards


def trl_reward_func(
    service: str | Sequence[str] | ScoreClient,
    *,
    verifier: str = "math",
    columns: dict[str, str] | None = None,
    fixed: dict[str, Any] | None = None,
    reward: RewardSpec | dict | None = None,
    component: str | None = None,
    kind_column: str | None = "verifier",
    name: str | None = None,
    token: str | None = None,
    asynchronous: bool = False,
    deadline_s: float | None = None,
) -> Callable[..., Any]:
    """A reward function with GRPOTrainer's signature: `f(prompts, completions, **dataset_columns) -> list`.

    - Items of kind `verifier` are built from each completion and the dataset columns named like the kind's fields
      (`answer` for math, `tests`/`hidden_tests` for code, ...); `columns` renames ({"answer": "solution"}),
      `fixed` sets constant fields ({"strict": True}).
    - Rows whose `kind_column` names another kind get None (the reward does not apply to them), and so do rows the
      service could not score (`infra_error`: a dead worker, the sandbox, the deadline), which TRL masks.
    - The first batch must have a column for every field the kind needs (`answer` for math): otherwise MissingColumn
      names the field, the columns seen, and the `columns={...}` mapping that fixes it.
    - `reward` makes it a composite; `component` returns that component's score instead of the total.
    - With `log_metric` among the kwargs (TRL passes it), logs each component's mean, the error and infra error rates.
    - `asynchronous=True` returns a coroutine function (TRL runs async reward functions concurrently).
    """
    builder = _ItemBuilder(verifier, columns, fixed, kind_column)
    spec = RewardSpec.model_validate(reward) if isinstance(reward, dict) else reward
    if component is not None and (spec is None or component not in {c.name for c in spec.components}):
        raise ValueError(f"component {component!r} is not in the reward spec")
    label = name or (f"groupscore_{verifier}" + (f"_{component}" if component else ""))
    checked: list[bool] = []  # the first batch with rows of this kind checks the columns; later ones do not pay for it

    def build(completions: Sequence[Any], kwargs: dict[str, Any]) -> tuple[list[dict[str, Any]], list[int]]:
        items, rows = builder.build(completions, kwargs)
        if items and not checked:
            seen = [k for k, v in kwargs.items() if isinstance(v, (list, tuple))]
            check_columns(label, items, seen, "trl_reward_func(..., columns={mapping})")
            checked.append(True)
        return items, rows

    if asynchronous:
        urls = service.urls if isinstance(service, ScoreClient) else service
        if isinstance(service, ScoreClient) and token is None:
            token = service.token
        # httpx async clients belong to one event loop each: one per loop, closed when its loop shuts down
        clients = LoopClients(lambda: AsyncScoreClient(urls, token=token))

        async def reward_async(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
            items, rows = build(completions, kwargs)
            verdicts = await (await clients.get()).score_raw(items, spec, deadline_s) if items else []
            return _fold(len(completions), rows, verdicts, component, kwargs.get("log_metric"), label)

        reward_async.__name__ = label
        return reward_async

    client = service if isinstance(service, ScoreClient) else ScoreClient(service, token=token)

    def reward_sync(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
        items, rows = build(completions, kwargs)
        verdicts = client.score_raw(items, spec, deadline_s) if items else []
        return _fold(len(completions), rows, verdicts, component, kwargs.get("log_metric"), label)

    reward_sync.__name__ = label
    return reward_sync


# -- verl --------------------------------------------------------------------------------------------------------------

# data_source prefixes that verl's own default scorer routes to code execution; everything else is math here.
_CODE_SOURCES = (
    "codecontests",
    "apps",
    "codeforces",
    "taco",
    "primeintellect",
    "livecodebench",
    "humaneval",
    "mbpp",
    "code",
)
_verl_client: ScoreClient | None = None
_verl_lock = threading.Lock()
_verl_checked = False  # the first batch's columns were checked (see _check_verl_columns)
_VERL_FIX = "custom_reward_function.reward_kwargs.columns={mapping} (extra_info keys, or 'ground_truth')"


def _client_from_env() -> ScoreClient:
    global _verl_client
    with _verl_lock:
        if _verl_client is None:
            from groupscore.client.settings import load  # GROUPSCORE_URL, GROUPSCORE_TOKEN

            settings = load()
            _verl_client = ScoreClient(settings.urls, token=settings.token)
        return _verl_client


def verl_item(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict[str, Any] | None,
    columns: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The item for one verl sample.

    `extra_info["verifier"]` picks the kind, else the data source does (code datasets -> code, the rest -> math).
    A ground truth that is an object (or JSON object text) with item fields is used as is; a code ground truth in
    verl's `{"inputs": [...], "outputs": [...]}` form (with `fn_name` for call-style tests) becomes tests.
    `columns` maps item fields to `extra_info` keys (or "ground_truth"), for a reference stored under another name:
    {"answer": "solution"} (verl passes it from `custom_reward_function.reward_kwargs`).
    """
    extra_info = extra_info or {}
    kind = extra_info.get("verifier")
    if kind is None:
        source = (data_source or "").lower().replace("-", "").replace("_", "")
        kind = "code" if any(key in source for key in _CODE_SOURCES) else "math"
    reference = ground_truth
    if isinstance(reference, str) and reference.lstrip().startswith("{"):
        try:
            reference = json.loads(reference)
        except json.JSONDecodeError:
            pass
    item: dict[str, Any] = {"verifier": kind, "completion": solution_str}
    if isinstance(reference, dict) and "inputs" in reference and "outputs" in reference and kind == "code":
        item["tests"] = _verl_code_tests(reference)
    elif isinstance(reference, dict):
        item.update({k: v for k, v in reference.items() if k not in ("completion", "id")})
    else:
        item["answer"] = "" if reference is None else str(reference)
    for field, column in (columns or {}).items():
        value = ground_truth if column == "ground_truth" else extra_info.get(column)
        if value is not None:
            item[field] = str(value) if field == "answer" else value
    return item


def _check_verl_columns(items: list[dict[str, Any]], extra_infos: Sequence[dict[str, Any] | None]) -> None:
    """On the first batch only: a missing reference raises MissingColumn instead of scoring every sample 0."""
    global _verl_checked
    if _verl_checked:
        return
    keys = list(dict.fromkeys(k for info in extra_infos for k in (info or {})))
    check_columns(
        "verl compute_score",
        items,
        ["data_source", "solution_str", "ground_truth", *(f"extra_info.{k}" for k in keys)],
        _VERL_FIX,
        candidates=keys,
    )
    _verl_checked = True


def _verl_code_tests(reference: dict[str, Any]) -> list[dict[str, Any]]:
    fn_name = reference.get("fn_name")
    tests = []
    for given, expected in zip(reference["inputs"], reference["outputs"]):
        if fn_name:
            # Call-style (TACO/APPS): inputs are argument lists; outputs are usually wrapped in a one-element list.
            args = given if isinstance(given, list) else [given]
            if isinstance(expected, list) and len(expected) == 1:
                expected = expected[0]
            tests.append({"type": "call", "fn": fn_name, "args": args, "expected": expected})
        else:
            tests.append({"type": "stdio", "stdin": str(given), "stdout": str(expected)})
    return tests


def _verl_result(verdict: dict[str, Any]) -> dict[str, Any]:
    # verl takes a dict with "score" and logs the other keys per sample: numbers only, same keys every time. verl has
    # no "no reward" value, so a sample the service could not score gets score 0.0 with infra_error 1.0 (README,
    # "Statuses"): filter on it, or at least watch its mean.
    return {
        "score": float(verdict["reward"]),
        "acc": 1.0 if verdict["status"] == "correct" else 0.0,
        INFRA_ERROR: 1.0 if verdict["status"] == INFRA_ERROR else 0.0,
        **{f"component_{k}": float(v) for k, v in (verdict.get("components") or {}).items()},
    }


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict[str, Any] | None = None,
    columns: dict[str, str] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """verl's custom reward function signature, scored by the service at GROUPSCORE_URL."""
    item = verl_item(data_source, solution_str, ground_truth, extra_info, columns)
    _check_verl_columns([item], [extra_info])
    return _verl_result(_client_from_env().score_raw([item])[0])


def compute_score_batch(
    data_sources: Sequence[str],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[dict[str, Any] | None] | None = None,
    columns: dict[str, str] | None = None,
    **kwargs: Any,
) -> list[dict[str, Any]]:
    """verl's batched reward manager signature: one request for the whole batch."""
    extra_infos = extra_infos or [None] * len(solution_strs)
    items = [verl_item(*row, columns) for row in zip(data_sources, solution_strs, ground_truths, extra_infos)]
    _check_verl_columns(items, extra_infos)
    return [_verl_result(v) for v in _client_from_env().score_raw(items)]
