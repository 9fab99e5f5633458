"""`groupscore score --compare OLD.jsonl`: every item whose verdict (reward or status) changed between two runs.

Records are matched by `id`; when an id repeats, its n-th record in one run is matched with its n-th in the other, and
records without an id are matched in order among themselves. So a file scored twice (by two verifier versions, say)
lines up record by record, and the report shows the drift a new version brings before anyone trains on it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

REWARD_TOLERANCE = 1e-9
Key = tuple[Any, int]  # (id, occurrence of that id)


@dataclass(frozen=True)
class Change:
    key: Key
    old: dict[str, Any]
    new: dict[str, Any]


@dataclass
class Drift:
    """How two runs' verdicts differ."""

    compared: int = 0
    changed: list[Change] = field(default_factory=list)
    only_old: list[Key] = field(default_factory=list)
    only_new: list[Key] = field(default_factory=list)
    versions: Counter[tuple[str | None, str | None]] = field(default_factory=Counter)  # (old, new) of changed items


def read_records(path: Path) -> list[dict[str, Any]]:
    """A verdict file as `groupscore score` writes it; ValueError names the first line that is not a record."""
    records = []
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise ValueError(f"{path}:{number}: not JSON ({exc})") from None
        if not isinstance(record, dict) or "reward" not in record or "status" not in record:
            raise ValueError(f"{path}:{number}: not a verdict record (needs id, reward and status): {line[:80]}")
        records.append(record)
    return records


def keyed(records: Iterable[dict[str, Any]]) -> dict[Key, dict[str, Any]]:
    seen: Counter[str] = Counter()
    out = {}
    for record in records:
        ident = record.get("id")
        marker = json.dumps(ident)  # 1 and "1" are different ids
        out[(ident, seen[marker])] = record
        seen[marker] += 1
    return out


def _differs(old: dict[str, Any], new: dict[str, Any]) -> bool:
    if old["status"] != new["status"]:
        return True
    try:
        return abs(float(old["reward"]) - float(new["reward"])) > REWARD_TOLERANCE
    except (TypeError, ValueError):
        return old["reward"] != new["reward"]


def compare(old_records: Iterable[dict[str, Any]], new_records: Iterable[dict[str, Any]]) -> Drift:
    old, new = keyed(old_records), keyed(new_records)
    drift = Drift()
    for key, record in new.items():
        before = old.get(key)
        if before is None:
            drift.only_new.append(key)
            continue
        drift.compared += 1
        if _differs(before, record):
            drift.changed.append(Change(key, before, record))
            drift.versions[(before.get("verifier_version"), record.get("verifier_version"))] += 1
    drift.only_old = [key for key in old if key not in new]
    return drift


def _name(key: Key) -> str:
    ident, occurrence = key
    return f"{ident if ident is not None else '(no id)'}" + (f" #{occurrence + 1}" if occurrence else "")


def _verdict(record: dict[str, Any]) -> str:
    version = record.get("verifier_version")
    return f"{record['status']} {record['reward']:g}" + (f" [{version}]" if version else "")


def write_report(drift: Drift, old_path: Path, out: IO[str]) -> None:
    """Every changed item, one line each, then the counts."""
    if drift.changed:
        width = max(len(_name(c.key)) for c in drift.changed)
        print(f"verdicts that changed since {old_path} (old -> new):", file=out)
        for change in drift.changed:
            print(f"  {_name(change.key):<{width}}  {_verdict(change.old)} -> {_verdict(change.new)}", file=out)
    for label, keys in (("only in the old run", drift.only_old), ("only in this run", drift.only_new)):
        if keys:
            shown = ", ".join(_name(k) for k in keys[:10]) + (f" and {len(keys) - 10} more" if len(keys) > 10 else "")
            print(f"{label}: {shown}", file=out)
    by_version = "; ".join(
        f"{old or '-'} -> {new or '-'}: {n}" for (old, new), n in sorted(drift.versions.items(), key=lambda kv: -kv[1])
    )
    print(
        f"groupscore score --compare: {len(drift.changed)} of {drift.compared} matched items changed verdict"
        f"{f' ({by_version})' if by_version else ''}; {len(drift.only_old)} only in the old run, "
        f"{len(drift.only_new)} only in this one",
        file=out,
    )


def write_changes(drift: Drift, path: Path) -> None:
    """The changed items as JSONL: {"id", "old": record, "new": record}."""
    with Path(path).open("w", encoding="utf-8") as sink:
        for change in drift.changed:
            sink.write(json.dumps({"id": change.key[0], "old": change.old, "new": change.new}, default=str) + "\n")
