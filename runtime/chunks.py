"""How many workers, and how a batch is cut into the chunks they score: one formula for the CLI and the service."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Iterator

# `groupscore score` and `score_batch`: at most this many items per call to a worker. The service has its own
# maximum (Settings.chunk_items), and both cut by `chunk_size`.
MAX_CHUNK = 16


def worker_count(workers: int | None) -> int:
    """`workers`, checked; None: every core this process may run on."""
    if workers is None:
        return len(os.sched_getaffinity(0))
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    return workers


def chunk_size(count: int | None, workers: int, max_chunk: int = MAX_CHUNK) -> int:
    """Items per chunk for `count` items (None: not known yet) on `workers` workers.

    Big enough to amortise a round trip to the worker, small enough that every worker gets several chunks (so all are
    busy to the end) and that a chunk whose worker dies costs little to score again one item at a time."""
    if not count:
        return max_chunk
    return max(1, min(max_chunk, math.ceil(count / (4 * workers))))


def chunks[Entry](entries: Iterable[Entry], size: int) -> Iterator[list[Entry]]:
    """Consecutive chunks of at most `size` entries, in order, read lazily (a file is never held whole)."""
    part: list[Entry] = []
    for entry in entries:
        part.append(entry)
        if len(part) == size:
            yield part
            part = []
    if part:
        yield part


def chunks_with_singles[Entry](
    entries: Iterable[Entry], size: int, alone: Callable[[Entry], bool]
) -> list[list[Entry]]:
    """`chunks`, except that an entry for which `alone` is true is a chunk of its own.

    The service puts an item that runs programs alone: it may take as long as its limits allow, and the items of a
    chunk are answered together, so it would hold its chunk-mates' verdicts (and past the deadline mask them)."""
    out: list[list[Entry]] = []
    run: list[Entry] = []
    for entry in entries:
        if alone(entry):
            if run:
                out.append(run)
                run = []
            out.append([entry])
            continue
        run.append(entry)
        if len(run) == size:
            out.append(run)
            run = []
    if run:
        out.append(run)
    return out
