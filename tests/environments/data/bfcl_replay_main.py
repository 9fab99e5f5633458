"""Inside the jail (the `bfcl` Python environment): run trajectories on BFCL's classes as a session does, keeping
per turn each call's result text and the instances' public state (class_state.py).

Reads replay_in.json: {"tasks": {task id: {"classes": [ClassTools fields]}}, "runs": [{"key", "task", "turns"}]};
prints one JSON object: {"values": {digest: encoded value}, "runs": [{"key", "turns": [{"calls": [...], "state":
{class: {attribute: digest}}}]}]}: a value is sent once however many turns and runs left it (a long context's
file system is megabytes). A call is `getattr(instance, name)(**arguments)` on the instance offering that method.
"""

import hashlib
import importlib
import json

from class_state import error_text, public_attrs, result_text

values: dict = {}


def digest(encoded):
    text = json.dumps(encoded, sort_keys=True)
    key = hashlib.sha256(text.encode()).hexdigest()[:24]
    values.setdefault(key, encoded)
    return key


def start(classes):
    instances, methods = {}, {}
    for spec in classes:
        obj = getattr(importlib.import_module(spec["module"]), spec["class_name"])(**spec.get("init_args", {}))
        if spec.get("setup"):
            getattr(obj, spec["setup"])(**json.loads(json.dumps(spec.get("setup_args", {}))))
        instances[spec["class_name"]] = obj
        for name in spec.get("methods") or [n for n in dir(obj) if not n.startswith("_")]:
            methods[name] = obj
    return instances, methods


def call(methods, name, arguments):
    obj = methods.get(name)
    try:
        if obj is None:
            raise NameError(f"name {name!r} is not defined")
        return result_text(getattr(obj, name)(**arguments))
    except Exception as exc:
        return error_text(exc)


def replay(classes, turns):
    instances, methods = start(classes)
    out = []
    for turn in turns:
        calls = [{**c, "text": call(methods, c["name"], c["arguments"])} for c in turn]
        state = {n: {a: digest(v) for a, v in public_attrs(obj).items()} for n, obj in instances.items()}
        out.append({"calls": calls, "state": state})
    return out


def main():
    with open("replay_in.json") as fh:
        job = json.load(fh)
    runs = []
    for run in job["runs"]:
        try:
            runs.append({"key": run["key"], "turns": replay(job["tasks"][run["task"]]["classes"], run["turns"])})
        except Exception as exc:
            runs.append({"key": run["key"], "error": f"{type(exc).__name__}: {exc}"})
    print(json.dumps({"values": values, "runs": runs}))


main()
