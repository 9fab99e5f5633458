"""The user's own functions, named by reference: `module:function` or `path/to/file.py:function` (the name may be
dotted, `module:Class.method`). `groupscore check` loads its targets here and the trainer its extra reward functions.

In the client because both may import it (the checks and the trainer import the client and the schema, never each
other) and it is the trainer's side of the service; it imports nothing of ours. Each step raises on its own, so that
each caller says in its own words which step failed.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any


def split_reference(ref: str) -> tuple[str, str]:
    """(module name or file path, attribute name) of `ref`; ValueError when it has no `:` or either side is empty."""
    module_ref, sep, attr = ref.rpartition(":")
    if not sep or not module_ref or not attr:
        raise ValueError(f"{ref!r} is not module:function")
    return module_ref, attr


def file_of(module_ref: str) -> Path | None:
    """The file a module reference names (it ends in .py or holds a path separator), resolved; None: a module name."""
    if module_ref.endswith(".py") or os.sep in module_ref or "/" in module_ref:
        return Path(module_ref).resolve()
    return None


def load_module(module_ref: str) -> ModuleType:
    """A module by name, or a Python file by path (`file_of`).

    A file is imported once, under a name of its own that stays the same for the same path (so a second load, or
    pickle, finds it again); FileNotFoundError when there is no such file, and a file whose import raises leaves
    nothing behind. A module name is imported as `python -m` would: the current directory is on the path (a
    rewards.py beside the config or the cases file is importable). Whatever the module raises on import propagates.
    """
    path = file_of(module_ref)
    if path is None:
        if "" not in sys.path and os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        return importlib.import_module(module_ref)
    if not path.is_file():
        raise FileNotFoundError(f"file not found: {module_ref}")
    name = f"_groupscore_user_{path.stem}_{hashlib.sha1(str(path).encode()).hexdigest()[:8]}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {module_ref} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def attribute(module: ModuleType, name: str) -> Any:
    """`module.name`, through every part of a dotted name; AttributeError when a part is missing."""
    found: Any = module
    for part in name.split("."):
        found = getattr(found, part)
    return found
