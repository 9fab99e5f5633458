"""Reading a taskset source through `datasets`: a hub dataset, a save_to_disk folder, or a JSONL / JSON / parquet / CSV
file, as plain rows. Every failure is one line naming the config field and what to do about it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from groupscore.train.config import DatasetSource

if TYPE_CHECKING:
    from datasets import Dataset

# The builders `datasets` has for local files, by suffix.
FILE_BUILDERS = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv", ".arrow": "arrow"}
_OFFLINE_VARS = ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE")


def offline(variables: tuple[str, ...] = _OFFLINE_VARS) -> bool:
    """Whether the user switched the hub off (the library never does it for them)."""
    return any(os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on") for v in variables)


def _quiet_datasets() -> None:
    import datasets

    datasets.disable_progress_bars()  # per-shard bars would bury the run's own lines
    datasets.logging.set_verbosity_error()


def check_exists(source: DatasetSource, field: str) -> None:
    """A local source's file or folder is there (a hub source: nothing to check without the network)."""
    if source.path is not None and not Path(source.path).exists():
        raise FileNotFoundError(
            f"{field}.path: {source.path} does not exist (a file, a save_to_disk folder; or give name:)"
        )


def load_rows(source: DatasetSource, field: str, split: str | None = None) -> Dataset:
    """The source's rows (`split` overrides the source's own), as a `datasets.Dataset`."""
    _quiet_datasets()
    split = split or source.split
    if source.name is not None:
        return _hub(source, field, split or "train")
    check_exists(source, field)
    path = Path(source.path or "")
    if path.is_dir():
        return _folder(path, field, split)
    builder = FILE_BUILDERS.get(path.suffix.lower())
    if builder is None:
        raise ValueError(
            f"{field}.path: cannot tell how to read {path.name}; name a {', '.join(FILE_BUILDERS)} file "
            "or a save_to_disk folder"
        )
    if split not in (None, "train"):
        raise ValueError(f"{field}.split: a single file has no split {split!r}; use a fraction for eval_split")
    import datasets

    # A reader that fails logs an ERROR line of its own before raising (parquet does); the run reports the failure
    # once, in its own line, so datasets stays silent while the file is read.
    verbosity = datasets.logging.get_verbosity()
    datasets.logging.set_verbosity(datasets.logging.CRITICAL)
    try:
        loaded = datasets.load_dataset(builder, data_files=str(path), split="train")
    except Exception as exc:  # noqa: BLE001 - arrow, pandas and json raise many kinds; all mean "cannot read it"
        bad = _bad_jsonl_line(path) if path.suffix.lower() == ".jsonl" else None
        if bad is not None:  # datasets names no line: find it, as groupscore's own JSONL reader would say it
            raise ValueError(f"{field}.path: {bad}") from None
        raise ValueError(
            f"{field}.path: cannot read {path} as {builder} ({_cause(exc)}); check the file or its suffix"
        ) from None
    finally:
        datasets.logging.set_verbosity(verbosity)
    return loaded


def _bad_jsonl_line(path: Path) -> str | None:
    """`file:line: ...` for the first line of a JSONL file that is not one JSON object, or None."""
    import json

    try:
        with path.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    return f"{path}:{number}: not JSON ({exc.msg} at column {exc.colno})"
                if not isinstance(row, dict):
                    return f"{path}:{number}: expected a JSON object, got {type(row).__name__}"
    except UnicodeDecodeError as exc:
        return f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})"
    return None


def _folder(path: Path, field: str, split: str | None) -> Dataset:
    from datasets import Dataset, DatasetDict, load_from_disk

    if not any((path / marker).exists() for marker in ("dataset_info.json", "dataset_dict.json", "state.json")):
        raise ValueError(f"{field}.path: {path} is a folder but not one written by save_to_disk; name a file in it")
    try:
        loaded = load_from_disk(str(path))
    except Exception as exc:  # noqa: BLE001 - a damaged folder raises whatever arrow meets first
        raise ValueError(f"{field}.path: cannot read the save_to_disk folder {path} ({_cause(exc)})") from None
    if isinstance(loaded, DatasetDict):
        split = split or "train"
        if split not in loaded:
            raise ValueError(f"{field}.split: {path} has no split {split!r} (it has {', '.join(loaded)})")
        return loaded[split]
    if split not in (None, "train"):
        raise ValueError(f"{field}.split: {path} holds one dataset, no split {split!r}; use a fraction for eval_split")
    if not isinstance(loaded, Dataset):
        raise ValueError(f"{field}.path: {path} holds a {type(loaded).__name__}, not a dataset")
    return loaded


def _hub(source: DatasetSource, field: str, split: str) -> Dataset:
    from datasets import load_dataset

    name = source.name or ""
    try:
        loaded = load_dataset(name, source.config, split=split)
    except Exception as exc:  # noqa: BLE001 - hub, cache and builder errors: each gets its one line below
        fetch = f"hf download {name} --repo-type dataset"
        if offline():
            raise ValueError(
                f"{field}.name: {name} is not in the local datasets cache and HF_DATASETS_OFFLINE/HF_HUB_OFFLINE is "
                f"set; fetch it ahead ({fetch}, or load it once online), or unset the variable"
            ) from None
        raise ValueError(
            f"{field}: cannot load {source.describe()} ({_cause(exc)}); check name, config and split"
        ) from None
    return loaded


def _cause(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__


def as_dicts(rows: Dataset, max_rows: int | None) -> list[dict[str, Any]]:
    if max_rows is not None and max_rows < len(rows):
        rows = rows.select(range(max_rows))
    return [dict(row) for row in rows]
