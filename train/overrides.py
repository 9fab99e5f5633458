"""`--set key.path=value` overrides: read as YAML, applied to the raw config before it is validated, and a relative
path among them taken from the directory it was typed in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def parse_overrides(pairs: list[str]) -> list[tuple[list[str], Any]]:
    """`--set key.path=value` pairs: the value is read as YAML (numbers, true/false, null, [lists], {mappings});
    text with a colon stays text unless it is written in braces."""
    parsed = []
    for pair in pairs:
        key, sep, text = pair.partition("=")
        path = key.strip().split(".")
        if not sep or not all(path):
            raise ValueError(f"--set: expected key.path=value (e.g. grpo.max_steps=10), got {pair!r}")
        try:
            value = yaml.safe_load(text) if text.strip() else ""
        except yaml.YAMLError as exc:
            raise ValueError(f"--set {key}: the value is not valid YAML: {exc}") from None
        if isinstance(value, dict) and not text.lstrip().startswith("{"):
            value = text  # "Be brief: think." is a sentence, not a mapping; {a: 1} spells one out
        parsed.append((path, value))
    return parsed


def apply_overrides(raw: dict[str, Any], overrides: list[tuple[list[str], Any]]) -> dict[str, Any]:
    """A copy of the raw config with each dotted key set (sections made as needed)."""
    import copy

    out = copy.deepcopy(raw)
    for path, value in overrides:
        node = out
        for depth, part in enumerate(path[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            elif not isinstance(child, dict):
                where = ".".join(path[: depth + 1])
                raise ValueError(f"--set {'.'.join(path)}: {where} is {child!r}, not a section")
            node = child
        node[path[-1]] = value
    return out


def from_cwd(path: list[str], value: Any) -> Any:
    """A relative path typed on the command line (`--set taskset.train=data/x.parquet`, `--set model.path=./m`) is
    taken from the current directory, where it was typed; a path written in the file, from the file's folder."""
    if path[:1] == ["taskset"] and path[1:2] in (["train"], ["eval"]):
        if path[2:] == [] and isinstance(value, str):
            return str(Path(value).resolve())
        if path[2:] == [] and isinstance(value, dict) and isinstance(value.get("path"), str):
            return {**value, "path": str(Path(value["path"]).resolve())}
        if path[2:] == ["path"] and isinstance(value, str):
            return str(Path(value).resolve())
    if path == ["model", "path"] and isinstance(value, str) and Path(value).exists():  # else a hub id
        return str(Path(value).resolve())
    return value
