"""verl's custom reward function, backed by the scoring service, configured the way verl configures rewards.

verl loads `custom_reward_function.path` (this file, or `client/adapters.py`, which re-exports it) and calls
`name` (`compute_score`, or `compute_score_batch` with `reward_manager=batch`) with its sample fields plus every entry
of `custom_reward_function.reward_kwargs`. Everything is said there, in the trainer's YAML, because environment
variables often do not reach verl's Ray workers:

    custom_reward_function:
      path: <site-packages>/groupscore/client/verl.py
      name: compute_score
      reward_kwargs:
        url: http://10.0.0.5:8000          # or a list: batches are sharded across them; or serve://groupscore:
                                           # the Ray Serve deployment through a handle, no HTTP hop (groupscore[ray])
        token: s3cret                      # the service's GROUPSCORE_TOKEN
        kind: math                         # every sample's verifier kind (else extra_info.verifier, else data_source)
        data_source_kinds: {my_gsm8k: math}  # added to DATA_SOURCE_KINDS, winning over its entries
        options: {strict: true}            # item fields for every item whose kind has them
        reward: {components: [...]}        # a composite reward spec (the service's `reward` field)
        columns: {answer: solution}        # item field -> extra_info key (or "ground_truth")

GROUPSCORE_URL and GROUPSCORE_TOKEN are read only for what reward_kwargs leave out. A keyword that is none of these
is an error naming it (with the closest known name), never silently ignored: a misspelt `url` would otherwise score
against 127.0.0.1:8000 after ten seconds of retries. What verl's reward loop itself adds to the call for model-based
rewards (VERL_CALL_KWARGS: `reward_router_address`, `reward_model_tokenizer`, ...) is accepted and unused.

The verifier kind of a sample: `kind`, else `extra_info["verifier"]`, else its `data_source` looked up by exact name in
DATA_SOURCE_KINDS (verl's own data sources) updated with `data_source_kinds`; a data source in neither is an error
naming the two keywords that fix it, never a guess from a substring.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from groupscore.client.http import ScoreClient
from groupscore.client.serve_handle import ServeHandleClient, app_of, is_serve_url
from groupscore.schema.columns import KIND_FIELDS, check_columns
from groupscore.schema.names import did_you_mean
from groupscore.schema.reward import KIND_NAMES, RewardSpec
from groupscore.schema.verdict import Status

__all__ = ["DATA_SOURCE_KINDS", "REWARD_KWARGS", "VerlOptions", "compute_score", "compute_score_batch", "verl_item"]

INFRA_ERROR = Status.infra_error.value

# verl's data sources (the names its default_compute_score dispatches on, by exact name) and the kind that scores each.
DATA_SOURCE_KINDS: dict[str, str] = {
    "openai/gsm8k": "math",
    "gsm8k": "math",
    "lighteval/MATH": "math",
    "DigitalLearningGmbH/MATH-lighteval": "math",
    "HuggingFaceH4/MATH-500": "math",
    "math_dapo": "math",
    "aime2024": "math",
    "aime2025": "math",
    "numina_aops_forum": "math",
    "numina_synthetic_math": "math",
    "numina_amc_aime": "math",
    "numina_synthetic_amc": "math",
    "numina_cn_k12": "math",
    "numina_olympiads": "math",
    "codecontests": "code",
    "apps": "code",
    "codeforces": "code",
    "taco": "code",
}

# The reward_kwargs compute_score takes (docs/integrations.md, "verl"), with what each holds.
REWARD_KWARGS = {
    "url": "the service's base URL, a list of them, or serve://APP: a Ray Serve handle (default: GROUPSCORE_URL)",
    "token": "the service's bearer token (default: GROUPSCORE_TOKEN)",
    "kind": "the verifier kind of every sample",
    "data_source_kinds": "data_source -> kind, over DATA_SOURCE_KINDS",
    "options": "item fields for every item whose kind has them, e.g. {strict: true}",
    "reward": "a composite reward spec",
    "columns": "item field -> extra_info key (or 'ground_truth')",
    "deadline_s": "the service's per-request deadline",
}
# What verl's own reward loop passes besides the sample (for model-based rewards: its reward model's router and
# tokenizer), in the same keyword arguments as reward_kwargs: not ours to check, and not used here.
VERL_CALL_KWARGS = frozenset({"reward_router_address", "reward_model_tokenizer", "model_name", "sampling_params"})
_FIX = "custom_reward_function.reward_kwargs.columns={mapping} (extra_info keys, or 'ground_truth')"
_ALL_FIELDS = frozenset(field for fields in KIND_FIELDS.values() for field in fields)


def plain(value: Any) -> Any:
    """Hydra/OmegaConf containers (verl's reward_kwargs are DictConfig and ListConfig) as plain dicts and lists."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return [plain(v) for v in value]
    return value


class VerlOptions:
    """reward_kwargs, checked once per distinct set (verl passes the same ones on every call)."""

    def __init__(self, kwargs: Mapping[str, Any]) -> None:
        kwargs = plain(kwargs)
        unknown = sorted(set(kwargs) - set(REWARD_KWARGS))
        if unknown:
            name = unknown[0]
            raise TypeError(
                f"verl compute_score: unknown reward_kwargs entry {name!r}{did_you_mean(name, list(REWARD_KWARGS))}; "
                f"known: {', '.join(REWARD_KWARGS)}"
            )
        url = kwargs.get("url")
        self.urls: list[str] | None = None
        self.serve_app: str | None = None  # serve://APP: the Ray Serve deployment through a handle
        if isinstance(url, str) and is_serve_url(url):
            self.serve_app = app_of(url)
        elif url is not None:
            from groupscore.client.settings import http_urls

            given = ",".join(url) if isinstance(url, list) else str(url)
            try:
                self.urls = http_urls(given).split(",")
            except ValueError as exc:
                raise ValueError(f"verl compute_score: reward_kwargs.url={url!r}: {exc}") from None
        self.token: str | None = kwargs.get("token")
        self.kind: str | None = kwargs.get("kind")
        self.sources = {**DATA_SOURCE_KINDS, **(kwargs.get("data_source_kinds") or {})}
        for name, kind in [("kind", self.kind), *((f"data_source_kinds[{s!r}]", k) for s, k in self.sources.items())]:
            if kind is not None and kind not in KIND_NAMES:
                raise ValueError(
                    f"verl compute_score: reward_kwargs.{name}={kind!r} is not a verifier kind"
                    f"{did_you_mean(str(kind), KIND_NAMES)}; known: {', '.join(KIND_NAMES)}"
                )
        self.options: dict[str, Any] = kwargs.get("options") or {}
        for name in self.options:
            if name not in _ALL_FIELDS:
                raise ValueError(
                    f"verl compute_score: reward_kwargs.options has {name!r}, a field of no verifier kind"
                    f"{did_you_mean(name, sorted(_ALL_FIELDS))}"
                )
        spec = kwargs.get("reward")
        self.reward = RewardSpec.model_validate(spec) if spec is not None else None
        self.columns: dict[str, str] = kwargs.get("columns") or {}
        self.deadline_s: float | None = kwargs.get("deadline_s")
        self.checked = False  # the first batch's columns were checked (see _check_columns)

    def kind_of(self, data_source: str, extra_info: Mapping[str, Any]) -> str:
        if self.kind is not None:
            return self.kind
        if extra_info.get("verifier") is not None:
            return str(extra_info["verifier"])
        if data_source in self.sources:
            return self.sources[data_source]
        raise ValueError(
            f"verl compute_score: data_source {data_source!r} has no verifier kind; set "
            f"custom_reward_function.reward_kwargs.kind=<kind> for every sample, or map it: "
            f"reward_kwargs.data_source_kinds={{{data_source!r}: <kind>}} (kinds: {', '.join(KIND_NAMES)})"
        )


_lock = threading.Lock()
_options: dict[str, VerlOptions] = {}  # reward_kwargs as JSON -> their checked form
_clients: dict[tuple[tuple[str, ...], str | None], ScoreClient | ServeHandleClient] = {}


def _ours(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments that are reward_kwargs: all but what verl's reward loop adds itself."""
    return {k: v for k, v in kwargs.items() if k not in VERL_CALL_KWARGS}


def options_for(kwargs: Mapping[str, Any]) -> VerlOptions:
    key = json.dumps(plain(kwargs), sort_keys=True, default=str)
    with _lock:
        if key not in _options:
            _options[key] = VerlOptions(kwargs)
        return _options[key]


def client_for(options: VerlOptions) -> ScoreClient | ServeHandleClient:
    """One pooled client per service address and token; what reward_kwargs leave out comes from the environment.
    `url: serve://APP`: a Serve handle client (verl's reward workers are in the Ray cluster already)."""
    if options.serve_app is not None:
        with _lock:
            handle_key: tuple[tuple[str, ...], str | None] = ((f"serve://{options.serve_app}",), None)
            if handle_key not in _clients:
                _clients[handle_key] = ServeHandleClient(options.serve_app)
            return _clients[handle_key]
    urls, token = options.urls, options.token
    if urls is None or token is None:
        from groupscore.client.settings import load
        from groupscore.client.settings import token as env_token

        if urls is None:
            settings = load()  # GROUPSCORE_URL (and GROUPSCORE_TOKEN)
            urls, token = settings.urls, token if token is not None else settings.token
        elif token is None:
            token = env_token()
    key = (tuple(urls), token)
    with _lock:
        if key not in _clients:
            _clients[key] = ScoreClient(list(urls), token=token)
        return _clients[key]


def verl_item(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict[str, Any] | None,
    columns: dict[str, str] | None = None,
    options: VerlOptions | None = None,
) -> dict[str, Any]:
    """The item for one verl sample.

    The kind: see the module docstring. A ground truth that is an object (or JSON object text) with item fields is
    used as is; a code ground truth in verl's `{"inputs": [...], "outputs": [...]}` form (with `fn_name` for
    call-style tests) becomes tests. `columns` maps item fields to `extra_info` keys (or "ground_truth").
    """
    options = options or options_for({"columns": columns} if columns else {})
    extra_info = plain(extra_info or {})
    kind = options.kind_of(data_source, extra_info)
    reference = plain(ground_truth)
    if isinstance(reference, str) and reference.lstrip().startswith("{"):
        try:
            reference = json.loads(reference)
        except json.JSONDecodeError:
            pass
    item: dict[str, Any] = {"verifier": kind, "completion": solution_str}
    if isinstance(reference, dict) and "inputs" in reference and "outputs" in reference and kind == "code":
        item["tests"] = _code_tests(reference)
    elif isinstance(reference, dict):
        item.update({k: v for k, v in reference.items() if k not in ("completion", "id")})
    else:
        item["answer"] = "" if reference is None else str(reference)
    item.update({k: v for k, v in options.options.items() if k in KIND_FIELDS.get(kind, ())})
    for field, column in (columns or options.columns).items():
        value = ground_truth if column == "ground_truth" else extra_info.get(column)
        if value is not None:
            item[field] = str(value) if field == "answer" else value
    return item


def _check_columns(options: VerlOptions, items: list[dict[str, Any]], extra_infos: Sequence[Any]) -> None:
    """On the first batch only: a missing reference raises MissingColumn instead of scoring every sample 0."""
    if options.checked:
        return
    keys = list(dict.fromkeys(k for info in extra_infos for k in (info or {})))
    check_columns(
        "verl compute_score",
        items,
        ["data_source", "solution_str", "ground_truth", *(f"extra_info.{k}" for k in keys)],
        _FIX,
        candidates=keys,
    )
    options.checked = True


def _code_tests(reference: dict[str, Any]) -> list[dict[str, Any]]:
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


def verl_result(verdict: dict[str, Any]) -> dict[str, Any]:
    # verl takes a dict with "score" and logs the other keys per sample: numbers only, same keys every time. verl has
    # no "no reward" value, so a sample the service could not score gets score 0.0 with infra_error 1.0
    # (docs/scoring.md): filter on it, or at least watch its mean.
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
    **reward_kwargs: Any,
) -> dict[str, Any]:
    """verl's custom reward function signature; `reward_kwargs` as the module docstring lists them."""
    options = options_for(_ours(reward_kwargs))
    item = verl_item(data_source, solution_str, ground_truth, extra_info, options=options)
    _check_columns(options, [item], [extra_info])
    return verl_result(client_for(options).score_raw([item], options.reward, options.deadline_s)[0])


def compute_score_batch(
    data_sources: Sequence[str],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[dict[str, Any] | None] | None = None,
    **reward_kwargs: Any,
) -> list[dict[str, Any]]:
    """verl's batched reward manager signature (`reward_manager=batch`): one request for the whole batch."""
    options = options_for(_ours(reward_kwargs))
    extra_infos = extra_infos or [None] * len(solution_strs)
    items = [verl_item(*row, options=options) for row in zip(data_sources, solution_strs, ground_truths, extra_infos)]
    _check_columns(options, items, extra_infos)
    return [verl_result(v) for v in client_for(options).score_raw(items, options.reward, options.deadline_s)]
