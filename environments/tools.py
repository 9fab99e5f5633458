"""The tools a session offers, in the OpenAI function format chat templates take, and how a call becomes a request to
the session's agent (sandbox/session_agent.py).

Built-in tools: `shell` (bash in the session's jail; the working directory and files persist between steps),
`python` (one interpreter kept for the session), `read_file`, `write_file`, `list_files`, and `sqlite` (queries on
the session's own database). A task's class tools add one tool per public method of its classes; their schemas are
the task's (BFCL ships them) or are read off the methods inside the jail (`class_schemas`).
"""

from __future__ import annotations

import functools
from typing import Any

from groupscore.environments.task import ClassTools


def _function(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


_STRING = {"type": "string"}
BUILTIN_SCHEMAS: dict[str, dict[str, Any]] = {
    "shell": _function(
        "shell",
        "Run a bash command in the task's machine. The working directory and files persist between calls; "
        "stdout and stderr are returned together, with the exit code.",
        {"command": {**_STRING, "description": "the bash command line"}},
        ["command"],
    ),
    "python": _function(
        "python",
        "Run Python code in an interpreter kept for the whole task (variables persist between calls). "
        "Printed output is returned, and the value of a last bare expression.",
        {"code": {**_STRING, "description": "Python source"}},
        ["code"],
    ),
    "read_file": _function(
        "read_file",
        "Read a text file (a path relative to the working directory, or absolute).",
        {"path": _STRING},
        ["path"],
    ),
    "write_file": _function(
        "write_file",
        "Write a text file, replacing it if it exists (parent directories are made).",
        {"path": _STRING, "content": _STRING},
        ["path", "content"],
    ),
    "list_files": _function(
        "list_files",
        "List a directory: one line per entry with its kind, size and name.",
        {"path": {**_STRING, "description": "default: the working directory"}},
        [],
    ),
    "sqlite": _function(
        "sqlite",
        "Run one SQL statement on the task's SQLite database; rows come back tab-separated with a header.",
        {"query": _STRING},
        ["query"],
    ),
}

# The arguments each built-in tool takes, and which it needs (checked before anything reaches the jail).
BUILTIN_ARGS: dict[str, tuple[set[str], set[str]]] = {
    name: (set(spec["function"]["parameters"]["properties"]), set(spec["function"]["parameters"]["required"]))
    for name, spec in BUILTIN_SCHEMAS.items()
}


def check_builtin_call(name: str, arguments: dict[str, Any]) -> str | None:
    """Why a built-in tool's call is malformed (a message the model sees), or None."""
    allowed, required = BUILTIN_ARGS[name]
    missing = sorted(required - set(arguments))
    if missing:
        return f"{name}: missing argument {missing[0]!r}"
    extra = sorted(set(arguments) - allowed)
    if extra:
        return f"{name}: unknown argument {extra[0]!r} (takes {', '.join(sorted(allowed)) or 'none'})"
    bad = [k for k, v in arguments.items() if not isinstance(v, str)]
    if bad:
        return f"{name}: argument {bad[0]!r} must be a string"
    return None


# JSON Schema's types as the arguments' Python values (a bool is no number here, as in JSON)
_SCHEMA_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


def check_schema_call(name: str, arguments: dict[str, Any], schema: dict[str, Any]) -> str | None:
    """Why a class tool's call does not fit its schema (a message the model sees, before the class runs), or None:
    a required argument missing, one the schema does not name (when it names any), or a value of another JSON type
    than its property's."""
    function = schema.get("function", schema)
    params = function.get("parameters") if isinstance(function, dict) else None
    if not isinstance(params, dict):
        return None  # not a shape this reads: the class decides
    properties, required = params.get("properties"), params.get("required")
    if not isinstance(properties, dict) or not isinstance(required, list):
        return None
    missing = [r for r in required if isinstance(r, str) and r not in arguments]
    if missing:
        return f"{name}: missing argument {missing[0]!r}"
    if properties and params.get("additionalProperties") is not True:
        extra = sorted(set(arguments) - set(properties))
        if extra:
            return f"{name}: unknown argument {extra[0]!r} (takes {', '.join(sorted(properties))})"
    for key, value in arguments.items():
        kind = properties.get(key, {}).get("type") if isinstance(properties.get(key), dict) else None
        kinds = (
            [kind]
            if isinstance(kind, str)
            else [k for k in kind if isinstance(k, str)]
            if isinstance(kind, list)
            else []
        )
        accepted = [t for k in kinds for t in _SCHEMA_TYPES.get(k, (object,))]
        if int in accepted and isinstance(value, float) and value.is_integer():
            continue  # JSON has one number type: 3.0 is an integer to JSON Schema
        if accepted and not (
            isinstance(value, tuple(accepted)) and not (isinstance(value, bool) and bool not in accepted)
        ):
            got = "null" if value is None else next((k for k, ts in _SCHEMA_TYPES.items() if type(value) in ts), "?")
            return f"{name}: argument {key!r} must be {' or '.join(kinds)}, not {got} ({_short(value)})"
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def class_tool_schemas(classes: tuple[ClassTools, ...], methods: list[str]) -> dict[str, dict[str, Any]]:
    """The schemas of class tools, by method name: the task's own where given, else a minimal one (the method's name
    and an open object of arguments)."""
    given: dict[str, dict[str, Any]] = {}
    for spec in classes:
        for schema in spec.tool_schemas:
            fn = schema.get("function", schema)
            given[fn["name"]] = schema if "function" in schema else {"type": "function", "function": schema}
    return {name: given.get(name) or _function(name, f"Call {name}.", {}, []) for name in methods}


_JSON_TYPES = {
    "str": "string",
    "int": "integer",
    "float": "number",
    "bool": "boolean",
    "list": "array",
    "dict": "object",
}


@functools.lru_cache(maxsize=256)  # read once per class, not at every session's reset (as BUILTIN_SCHEMAS are shared)
def schemas_from_source(source: str, class_name: str) -> tuple[dict[str, Any], ...]:
    """Schemas of a class's public methods, read from its source with `ast` (nothing of it runs on the host): the
    docstring's first paragraph as the description, annotated parameters as typed properties, parameters without a
    default as required."""
    import ast

    tree = ast.parse(source)
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name), None)
    if cls is None:
        raise ValueError(f"class {class_name!r} is not defined at the top of its source")
    out = []
    for fn in cls.body:
        if not isinstance(fn, ast.FunctionDef) or fn.name.startswith("_"):
            continue
        decorators = {ast.unparse(d) for d in fn.decorator_list}
        # keyword arguments only: the agent calls a method with **arguments (positional-only ones cannot be given)
        positional = fn.args.posonlyargs + fn.args.args
        given = [None] * (len(positional) - len(fn.args.defaults)) + list(fn.args.defaults)
        skip = 0 if "staticmethod" in decorators else 1  # self (or cls)
        pairs = [(a, d) for i, (a, d) in enumerate(zip(positional, given)) if i >= skip and a in fn.args.args]
        args, defaults = [a for a, _ in pairs], [d for _, d in pairs]
        props: dict[str, Any] = {}
        for a, default in [*pairs, *zip(fn.args.kwonlyargs, fn.args.kw_defaults)]:
            kind = _JSON_TYPES.get(ast.unparse(a.annotation).split("[")[0]) if a.annotation else None
            none_default = isinstance(default, ast.Constant) and default.value is None
            props[a.arg] = ({"type": [kind, "null"] if none_default else kind}) if kind else {}
        required = [a.arg for a, d in zip(args, defaults) if d is None]
        required += [a.arg for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults) if d is None]
        doc = (ast.get_docstring(fn) or f"Call {fn.name}.").split("\n\n")[0].strip()
        schema = _function(fn.name, doc, props, required)
        if fn.args.kwarg is not None:  # **kwargs: any other argument is the method's to take
            schema["function"]["parameters"]["additionalProperties"] = True
        out.append(schema)
    return tuple(out)
