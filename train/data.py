"""Data loading, in one place: each taskset source's rows, read from groupscore's own JSONL (its errors name the file
and line) or through `datasets` (a hub dataset, a save_to_disk folder, a JSONL / JSON / parquet / CSV / arrow file).
Every failure is one line naming the config field and what to do about it. The rows become tasks in taskset.py."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from groupscore.train.config import DatasetSource, TasksetConfig

if TYPE_CHECKING:
    from datasets import Dataset

# The builders `datasets` has for local files, by suffix.
FILE_BUILDERS = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv", ".arrow": "arrow"}
_OFFLINE_VARS = ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE")


@dataclass(frozen=True)
class Unreadable:
    """A line of a JSONL file that holds no row: what is wrong with it (reported with the row problems)."""

    problem: str


@dataclass(frozen=True)
class Rows:
    """One source's rows as read, each with the label its problems are reported under."""

    where: str  # the source, for the header of its problems ("" for a JSONL file: each label names the file)
    rows: list[Any]  # a row's columns (a dict when the source is sound), or an Unreadable line
    labels: list[str]  # per row: `file:line`, or `{where}: row {index}`
    keep: int | None = None  # the tasks kept after every row is checked (groupscore's own JSONL: max_rows)


def check_local_sources(cfg: TasksetConfig) -> None:
    """The taskset's files and folders exist: checked before anything goes to the network (a hub model or dataset)."""
    for field, source in _sources(cfg):
        _check_exists(source, field)


def all_local(cfg: TasksetConfig) -> bool:
    """Every source is a file or folder on this machine (nothing to fetch from the hub)."""
    return all(source.path is not None or source.env is not None for _, source in _sources(cfg))


def read_rows(source: DatasetSource, cfg: TasksetConfig, field: str, split: str | None = None) -> Rows:
    """The source's rows (`split` overrides the source's own; at most taskset.max_rows): groupscore's own JSONL rows
    line by line, anything else through `datasets`."""
    path = Path(source.path or "")
    own_jsonl = cfg.columns is None and source.path is not None and path.suffix.lower() == ".jsonl"
    if split is None and own_jsonl and path.is_file():
        return read_jsonl(path, keep=cfg.max_rows)
    loaded = _load(source, field, split)
    where = f"{field} ({_describe(source) if split is None else _describe(source) + ', split ' + split})"
    if cfg.max_rows is not None and cfg.max_rows < len(loaded):
        loaded = loaded.select(range(cfg.max_rows))
    rows = [dict(row) for row in loaded]
    if not rows:
        raise ValueError(f"{field}: {where} has no rows")
    return Rows(where, rows, [f"{where}: row {index}" for index in range(len(rows))])


def read_jsonl(path: Path, keep: int | None = None) -> Rows:
    """Every non-blank line of a JSONL file of groupscore's own rows, labelled `file:line`; a line that is not JSON
    is kept as its problem, so that all of them are reported at once."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"taskset file not found: {path}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(
            f"taskset: {path} is not UTF-8 text; a parquet, CSV or save_to_disk source needs its suffix or folder"
        ) from None
    rows: list[Any] = []
    labels = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            rows.append(Unreadable(f"not JSON ({exc.msg})"))
        labels.append(f"{path}:{lineno}")
    if not rows:
        raise ValueError(f"taskset is empty: {path}")
    return Rows("", rows, labels, keep)


def _sources(cfg: TasksetConfig) -> list[tuple[str, DatasetSource]]:
    return [(f"taskset.{name}", source) for name, source in (("train", cfg.train), ("eval", cfg.eval)) if source]


def _describe(source: DatasetSource) -> str:
    """The source as the run's lines name it."""
    if source.path is not None:
        return source.path + (f" (split {source.split})" if source.split else "")
    return f"{source.name}" + (f" ({source.config})" if source.config else "") + f", split {source.split or 'train'}"


def _check_exists(source: DatasetSource, field: str) -> None:
    """A local source's file or folder is there (a hub source: nothing to check without the network)."""
    if source.path is not None and not Path(source.path).exists():
        raise FileNotFoundError(
            f"{field}.path: {source.path} does not exist (a file, a save_to_disk folder; or give name:)"
        )


def _load(source: DatasetSource, field: str, split: str | None = None) -> Dataset:
    """What `datasets` reads of the source (`split` overrides the source's own)."""
    _quiet_datasets()
    split = split or source.split
    if source.name is not None:
        return _hub(source, field, split or "train")
    _check_exists(source, field)
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
        if _offline():
            raise ValueError(
                f"{field}.name: {name} is not in the local datasets cache and HF_DATASETS_OFFLINE/HF_HUB_OFFLINE is "
                f"set; fetch it ahead ({fetch}, or load it once online), or unset the variable"
            ) from None
        raise ValueError(
            f"{field}: cannot load {_describe(source)} ({_cause(exc)}); check name, config and split"
        ) from None
    return loaded


def _cause(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__


def _offline() -> bool:
    """Whether the user switched the hub off (the library never does it for them)."""
    return any(os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on") for v in _OFFLINE_VARS)


def _quiet_datasets() -> None:
    import datasets

    datasets.disable_progress_bars()  # per-shard bars would bury the run's own lines
    datasets.logging.set_verbosity_error()
