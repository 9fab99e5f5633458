"""Inside the jail: class-tool instances' public state as tagged JSON whose equality is Python's, and a call's
result as the text BFCL's checker compares (standard library only; runs under the jail's Python, 3.11 or later).

BFCL compares live objects with `!=`; the host only ever sees JSON, so the encoding keeps what plain JSON would blur:
a tuple is not a list, a set is not a list, an int key is not a str key. An object compares by its public attributes,
less those holding an object of a class already on the path from the instance (a tree's links: GorillaFileSystem's
`Directory.parent`, which its `Directory.__eq__` ignores, and which after an `mv` points at a directory no longer in
the tree). Values of other types compare by their repr (a datetime's repr is its value).
"""

from __future__ import annotations

import json


def _key(encoded):
    return json.dumps(encoded, sort_keys=True, default=str)


def encode(value, enclosing=(), classes=()):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if id(value) in enclosing:  # a cycle through a container: named, never followed
        return {"$cycle": type(value).__name__}
    inner = (*enclosing, id(value))
    if isinstance(value, list):
        return [encode(v, inner, classes) for v in value]
    if isinstance(value, tuple):
        return {"$tuple": [encode(v, inner, classes) for v in value]}
    if isinstance(value, (set, frozenset)):
        return {"$set": sorted((encode(v, inner, classes) for v in value), key=_key)}
    if isinstance(value, dict):
        if all(isinstance(k, str) and not k.startswith("$") for k in value):
            return {k: encode(v, inner, classes) for k, v in value.items()}
        pairs = [[encode(k, inner, classes), encode(v, inner, classes)] for k, v in value.items()]
        return {"$dict": sorted(pairs, key=lambda p: _key(p[0]))}
    if _is_object(value):
        return {"$object": type(value).__name__, "attrs": public_attrs(value, inner, classes)}
    return {"$repr": type(value).__name__, "repr": repr(value)}


def _is_object(value):
    return hasattr(value, "__dict__") and not isinstance(value, type)


def public_attrs(obj, enclosing=(), classes=()):
    """The attributes BFCL's state checker reads (not starting with '_'), links within a tree left out."""
    inner = enclosing or (id(obj),)
    classes = (*classes, type(obj))
    return {
        name: encode(v, inner, classes)
        for name, v in vars(obj).items()
        if not name.startswith("_") and not (_is_object(v) and isinstance(v, classes))
    }


def public_state(instances):
    """{class name: {attribute: tagged JSON}} of every instance."""
    return {name: public_attrs(obj) for name, obj in instances.items()}


def result_text(value):
    """A call's result as BFCL's executor records it: a str as it is, a dict as JSON (else its str), else str()."""
    if type(value) is str:
        return value
    if type(value) is dict:
        try:
            return json.dumps(value)
        except Exception:  # noqa: BLE001 - BFCL falls back to str() on whatever json.dumps raises
            return str(value)
    return str(value)


def error_text(exc):
    """A call that raised, as BFCL's executor records it."""
    return f"Error during execution: {exc}"
