"""The scoring runtime: raw items in, verdicts out, on bounded worker processes, for the CLI and the service alike.

- `batch`: `score_batch` and the engine under `groupscore score` (`map_chunks`): a pool per process, kept warm,
  whose workers import a kind's scorer on its first item (a one-shot run starts fast).
- `engine`: `ScoringEngine`, the service's: every scorer loaded up front, requests scored under their deadline from
  an event loop, stuck calls' workers killed.
- `chunks` (how many workers, how a batch is cut), `isolate` (split on failure: only the item at fault fails),
  `tasks` (what the service's workers run), `preload` (what their template imports).
- The workers are `groupscore.bounded`'s killable processes: a hard wall-clock bound per call, a replacement forked in
  milliseconds, an address-space cap per worker (`worker_memory_mb`, $GROUPSCORE_WORKER_MEMORY_MB).
"""

from groupscore.bounded.workers import MIN_WORKER_MEMORY_MB, worker_memory_mb

__all__ = ["MIN_WORKER_MEMORY_MB", "worker_memory_mb"]
