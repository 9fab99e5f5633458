"""Scores a JsonItem: parse (strict JSON: no NaN or Infinity), then validate against the item's JSON schema.

jsonschema evaluates `pattern` and `patternProperties` with Python's backtracking `re`, and `uniqueItems` on
objects by comparing every pair, so a crafted document can keep it busy past any budget. Validations that use those
keywords, or of documents over IN_PROCESS_MAX_CHARS, run in a killable worker (`run_bounded`) within the item's
budget; the rest (small documents, linear keywords) validate in this process, without the worker's round trip.
`$ref` resolves only inside the schema itself: nothing is ever fetched.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from groupscore.schema.verdict import Status, Verdict
from groupscore.verifiers.json_schema.item import JsonItem
from groupscore.verifiers.text import find_document

MAX_MESSAGES = 5
IN_PROCESS_MAX_CHARS = 100_000
_SLOW_KEYWORDS = ("pattern", "patternProperties", "uniqueItems")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _uses_slow_keywords(node: Any) -> bool:
    if isinstance(node, dict):
        return any(k in node for k in _SLOW_KEYWORDS) or any(_uses_slow_keywords(v) for v in node.values())
    if isinstance(node, list):
        return any(_uses_slow_keywords(v) for v in node)
    return False


@lru_cache(maxsize=128)
def _validator(schema_json: str) -> Any:
    """A validator per distinct schema (building one costs far more than most validations)."""
    from jsonschema import validators
    from referencing import Registry

    schema = json.loads(schema_json)
    return validators.validator_for(schema)(schema, registry=Registry())  # empty registry: no remote fetches


def check_document(schema: dict[str, Any], document: Any) -> tuple[list[str], float]:
    """Error messages (at most MAX_MESSAGES, none when valid) and the fraction of declared properties that are valid."""
    validator = _validator(json.dumps(schema, sort_keys=True))
    errors = list(validator.iter_errors(document))
    messages = [f"{'/'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}"[:200] for e in errors]
    declared = set(schema.get("properties", {})) | set(schema.get("required", []))
    if not errors or not declared or not isinstance(document, dict):
        return messages[:MAX_MESSAGES], 1.0 if not errors else 0.0
    failing = {e.absolute_path[0] for e in errors if e.absolute_path}
    failing |= {p for p in schema.get("required", []) if p not in document}
    document_level = any(not e.absolute_path and e.validator != "required" for e in errors)
    passed = len(declared - failing)
    return messages[:MAX_MESSAGES], passed / (len(declared) + document_level)


def score_json(item: JsonItem) -> Verdict:
    if len(item.completion) > item.max_chars:
        return Verdict(
            id=item.id,
            reward=0.0,
            status=Status.unparsable,
            reason=f"completion has {len(item.completion)} characters, more than max_chars={item.max_chars}",
        )
    text = find_document(item.completion, item.extract)
    if text is None:
        return Verdict(
            id=item.id,
            reward=0.0,
            status=Status.no_answer,
            reason="no ```json block" if item.extract == "fenced" else "empty completion",
        )
    try:
        document = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        return Verdict(
            id=item.id, reward=0.0, status=Status.unparsable, extracted=text[:200], reason=f"not JSON: {str(exc)[:200]}"
        )
    if item.json_schema is None:
        return Verdict(id=item.id, reward=1.0, status=Status.correct, extracted=text[:200], reason="valid JSON")

    try:
        if len(text) > IN_PROCESS_MAX_CHARS or _uses_slow_keywords(item.json_schema):
            from groupscore.bounded.workers import (
                BudgetExceeded,
                WorkerCrashed,
                WorkerUnavailable,
                run_bounded,
                start_once,
            )

            start_once([__name__])  # the pool's cold start is not this item's time: it happens once, outside it
            try:
                messages, fraction = run_bounded(check_document, item.json_schema, document, timeout_s=item.timeout_s)
            except WorkerUnavailable as exc:  # validation never started: the host's failure
                return Verdict.infra_error(item.id, f"schema validation could not start: {exc}", "worker_unavailable")
            except BudgetExceeded:
                return Verdict(
                    id=item.id,
                    reward=0.0,
                    status=Status.timeout,
                    extracted=text[:200],
                    reason=f"schema validation ran past {item.timeout_s} s",
                )
            except WorkerCrashed:  # the memory cap raises MemoryError in the worker; a dead worker is the host's
                return Verdict.infra_error(item.id, "schema validation crashed its worker", "worker_died")
        else:
            messages, fraction = check_document(item.json_schema, document)
    except RecursionError:
        return Verdict(
            id=item.id,
            reward=0.0,
            status=Status.unparsable,
            extracted=text[:200],
            reason="document nested too deeply to validate",
        )
    except Exception as exc:  # noqa: BLE001 - an unresolvable $ref or a pattern Python cannot compile: the item's fault
        return Verdict.error(item.id, f"schema cannot be applied: {type(exc).__name__}: {str(exc)[:200]}")

    if not messages:
        return Verdict(
            id=item.id, reward=1.0, status=Status.correct, extracted=text[:200], reason="valid against the schema"
        )
    reward = fraction if item.partial_credit else 0.0
    return Verdict(
        id=item.id,
        reward=reward,
        status=Status.partial if reward > 0 else Status.incorrect,
        extracted=text[:200],
        reason="; ".join(messages),
        details={"valid_fraction": fraction},
    )
