"""The config as written: its YAML file read (an error names the file and line), and `--set key.path=value` overrides
read as YAML, applied to the raw config before it is validated, a relative path among them taken from the directory
it was typed in, a model source among them replacing the file's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from groupscore.train.localpaths import local_path, looks_local


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
        if path[2:] == [] and isinstance(value, str) and value.startswith("env:"):  # a task source
            local = Path(value[len("env:") :])
            return f"env:{local.resolve()}" if local.exists() else value
        if path[2:] == [] and isinstance(value, str):
            return str(Path(value).resolve())
        if path[2:] == [] and isinstance(value, dict) and isinstance(value.get("path"), str):
            return {**value, "path": str(Path(value["path"]).resolve())}
        if path[2:] == ["path"] and isinstance(value, str):
            return str(Path(value).resolve())
    if path == ["model", "path"] and isinstance(value, str):
        if looks_local(value, [Path.cwd()]):  # a folder, there or not: a missing one is named, never a hub id
            return str(local_path(value, Path.cwd()))
        if Path(value).exists():  # `name` or `owner/name` that is a folder here
            return str(Path(value).resolve())
    return value


def switch_model_source(raw: dict[str, Any], sets: list[tuple[list[str], Any]]) -> dict[str, Any]:
    """`--set model.smollm2=true` (or model.path=..., model.tiny=...) on a config that names another model source
    replaces that source: the file's other source is dropped, so switching a recipe's model needs no
    `--set model.path=null`."""
    chosen = {
        path[1] for path, value in sets if path[:1] == ["model"] and len(path) >= 2 and value not in (None, False)
    }
    chosen &= {"path", "tiny", "smollm2"}
    model = raw.get("model")
    if not chosen or not isinstance(model, dict):
        return raw
    others = {"path", "tiny", "smollm2"} - chosen
    return {**raw, "model": {k: v for k, v in model.items() if k not in others}}


def read_yaml(path: Path) -> Any:
    """The file's YAML; an error names the file, its line and column (not PyYAML's `<unicode string>`)."""
    try:
        with path.open(encoding="utf-8") as stream:
            return yaml.safe_load(stream)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        context = getattr(exc, "context", None)
        raise ValueError(f"{where}: not valid YAML: {problem}" + (f" ({context})" if context else "")) from None
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8 text, so not a YAML config") from None
