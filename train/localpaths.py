"""Is `model.path` a folder on this machine or a Hugging Face hub id? Decided on the text alone, before anything is
read or downloaded: a missing folder is one line naming where it was looked for, never a minute of hub retries."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

LOCAL_PREFIXES = ("/", "./", "../", "~", ".\\", "..\\")


def looks_local(text: str, bases: Sequence[Path] = ()) -> bool:
    """A path, not a hub id: it starts with / ./ ../ or ~ (or is . or ..), it has more than one `/` (a hub id is
    `name` or `owner/name`), or its parent folder exists under one of `bases` (`models/x` beside an existing
    `models/`). A bare `name` or an `owner/name` whose `owner/` folder is nowhere is a hub id."""
    if text in (".", "..") or text.startswith(LOCAL_PREFIXES):
        return True
    if text.count("/") > 1 or "\\" in text:
        return True
    parent = Path(text).parent
    return parent != Path(".") and any((base / parent).is_dir() for base in bases)


def local_path(text: str, base: Path) -> Path:
    """`text` as an absolute path: `~` expanded, a relative path taken from `base`."""
    return Path(os.path.normpath((base / Path(text).expanduser()).absolute()))
