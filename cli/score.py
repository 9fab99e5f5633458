"""`groupscore score`: a JSONL file of items in, a JSONL file of verdict records out, with a progress bar.

The command's own process only reads lines, hands chunks of them to the scoring runtime's workers
(`groupscore.runtime.batch`) and writes what comes back: the item models, the registry and pydantic are imported in
the workers, and here only on a failure path, so a one-shot run starts fast.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from contextlib import AbstractContextManager, nullcontext
from functools import partial
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from groupscore.runtime.batch import (
    MAX_CHUNK,
    chunk_size,
    infra_failure,
    map_chunks,
    prepare_worker,
    score_one,
    worker_count,
)

if TYPE_CHECKING:
    from groupscore.schema.reward import RewardSpec
    from groupscore.schema.verdict import Verdict

# The statuses a run counts as failed (schema.Status values).
FAILED_STATUSES = ("error", "infra_error")
PROGRESS_DELAY_S = 1.0


def score_jsonl(
    input_path: Path | str,
    output_path: Path | str | None = None,
    workers: int | None = None,
    progress: bool = True,
    reward: RewardSpec | None = None,
    verifier: str | None = None,
) -> int:
    """Score a JSONL file of items into a JSONL file of records (stdout without `output_path`).

    One record per non-blank input line, in input order: id, reward, status, extracted, reason, plus components and
    details where the verifier gives them. A line that is not valid JSON or not a valid item gets an error record that
    names its line number. Returns 0, or 1 when any record has status "error" or "infra_error". Input "-" reads stdin.
    `reward`: a composite reward spec for every item (the service's `reward` field), else each item's own verifier.
    `verifier`: the kind of lines that name none (bare `{completion, answer}` lines); ValueError if it is no kind.
    """
    if verifier is not None:
        from groupscore.schema.reward import KIND_NAMES

        if verifier not in KIND_NAMES:
            from groupscore.schema.names import did_you_mean

            hint = did_you_mean(verifier, KIND_NAMES)
            raise ValueError(f"--verifier {verifier!r} is not a verifier kind{hint}; kinds: {', '.join(KIND_NAMES)}")
    input_path = Path(input_path)
    if str(input_path) != "-" and not input_path.is_file():
        raise FileNotFoundError(f"no such input file: {input_path}")
    total = _count_lines(input_path) if progress and str(input_path) != "-" else None
    chunk = chunk_size(total, worker_count(workers)) if total else MAX_CHUNK
    statuses: Counter[str] = Counter()
    started = time.monotonic()

    with (
        _open_input(input_path) as source,
        _open_output(output_path) as sink,
        _ProgressBar(total, enabled=progress) as bar,
    ):
        lines = ((number, text) for number, text in enumerate(source, start=1) if text.strip())
        score = partial(_score_lines, reward, verifier)
        for records in map_chunks(score, _infra_record, lines, workers, chunk):
            for status, record in records:
                statuses[status] += 1
                sink.write(record + "\n")
            bar.update(len(records))

    scored = sum(statuses.values())
    rate = scored / max(time.monotonic() - started, 1e-9)
    summary = ", ".join(f"{status} {count}" for status, count in sorted(statuses.items()))
    print(f"groupscore score: {scored} items ({rate:.0f}/s): {summary or 'nothing to score'}", file=sys.stderr)
    return 1 if any(statuses[status] for status in FAILED_STATUSES) else 0


class _ProgressBar:
    """tqdm's bar on stderr, made only once a run has lasted PROGRESS_DELAY_S (as tqdm's own `delay` would show it):
    a short run never imports tqdm, which costs a one-shot `groupscore score` about a tenth of a second."""

    def __init__(self, total: int | None, enabled: bool) -> None:
        self.total, self.enabled, self.done = total, enabled, 0
        self.started = time.monotonic()
        self.bar: Any = None

    def update(self, count: int) -> None:
        self.done += count
        if self.bar is not None:
            self.bar.update(count)
        elif self.enabled and time.monotonic() - self.started >= PROGRESS_DELAY_S:
            from tqdm import tqdm

            self.bar = tqdm(total=self.total, initial=self.done, unit="item", file=sys.stderr, dynamic_ncols=True)

    def __enter__(self) -> _ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.close()


def _score_lines(
    reward: RewardSpec | None, verifier: str | None, lines: list[tuple[int, bytes | str]]
) -> list[tuple[str, str]]:
    prepare_worker()
    return [_record(score_one(_with_kind(text, verifier), reward), number) for number, text in lines]


def _with_kind(text: bytes | str, verifier: str | None) -> Any:
    """The line, given `verifier` as its kind when it is a JSON object that names none (else as it came)."""
    if verifier is None:
        return text
    try:
        raw = json.loads(text)
    except ValueError:
        return text  # score_one makes the error verdict
    if isinstance(raw, dict) and raw.get("verifier") is None:
        raw["verifier"] = verifier
    return raw


def _record(verdict: Verdict, line_number: int | None = None) -> tuple[str, str]:
    """The status and the output line for `groupscore score`."""
    record: dict[str, Any] = {
        "id": verdict.id,
        "reward": verdict.reward,
        "status": verdict.status.value,
        "extracted": verdict.extracted,
        "reason": verdict.reason,
    }
    if verdict.components is not None:
        record["components"] = verdict.components
    if verdict.details:
        record["details"] = verdict.details
    if verdict.verifier_version is not None:
        record["verifier_version"] = verdict.verifier_version
    if verdict.status.value in FAILED_STATUSES and line_number is not None:
        record["line"] = line_number
    return verdict.status.value, json.dumps(record, default=str)


def _infra_record(entry: tuple[int, bytes | str], exc: Exception) -> tuple[str, str]:
    from groupscore.verifiers.scoring import raw_item_id

    number, text = entry
    try:
        raw_id = raw_item_id(json.loads(text))
    except ValueError:
        raw_id = None
    return _record(infra_failure(raw_id, exc), number)


def _count_lines(path: Path) -> int:
    with path.open("rb") as f:
        return sum(block.count(b"\n") for block in iter(lambda: f.read(1 << 20), b""))


def _open_input(path: Path) -> AbstractContextManager[IO[bytes]]:
    # Bytes, so that a line that is not UTF-8 becomes an error record instead of stopping the run.
    return nullcontext(sys.stdin.buffer) if str(path) == "-" else path.open("rb")


def _open_output(path: Path | str | None) -> AbstractContextManager[IO[str]]:
    return nullcontext(sys.stdout) if path is None else Path(path).open("w", encoding="utf-8")
