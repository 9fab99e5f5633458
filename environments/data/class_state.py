"""Inside the jail: class-tool instances' public state as tagged JSON whose equality is Python's, and a call's
result as the text BFCL's checker compares (standard library only; runs under the jail's Python, 3.11 or later).

BFCL compares live objects with `!=`; the host only ever sees JSON, so the encoding keeps what plain JSON would blur:
a tuple is not a list, a set is not a list, an int key is not a str key. Attributes that point back at an enclosing
object (GorillaFileSystem's `Directory.parent`) are left out: following them would never end, and the classes' own
`__eq__` ignores them. Values of other types compare by their repr (a datetime's repr is its value).
"""

from __future__ import annotations

import json


def _key(encoded):
    return json.dumps(encoded, sort_keys=True, default=str)


def encode(value, enclosing=()):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if id(value) in enclosing:  # a cycle through a container: named, never followed
        return {"$cycle": type(value).__name__}
    inner = (*enclosing, id(value))
    if isinstance(value, list):
        return [encode(v, inner) for v in value]
    if isinstance(value, tuple):
        return {"$tuple": [encode(v, inner) for v in value]}
    if isinstance(value, (set, frozenset)):
        return {"$set": sorted((encode(v, inner) for v in value), key=_key)}
    if isinstance(value, dict):
        if all(isinstance(k, str) and not k.startswith("$") for k in value):
            return {k: encode(v, inner) for k, v in value.items()}
        pairs = [[encode(k, inner), encode(v, inner)] for k, v in value.items()]
        return {"$dict": sorted(pairs, key=lambda p: _key(p[0]))}
    if hasattr(value, "__dict__") and not isinstance(value, type):
        return {"$object": type(value).__name__, "attrs": public_attrs(value, inner)}
    return {"$repr": type(value).__name__, "repr": repr(value)}


def public_attrs(obj, enclosing=()):
    """The attributes BFCL's state checker reads (not starting with '_'), back-references left out."""
    inner = enclosing or (id(obj),)
    return {
        name: encode(v, inner)
        for name, v in vars(obj).items()
        if not name.startswith("_") and id(v) not in inner
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
        except Exception:
            return str(value)
    return str(value)


def error_text(exc):
    """A call that raised, as BFCL's executor records it."""
    return f"Error during execution: {exc}"
