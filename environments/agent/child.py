"""A long-lived child of the agent: the python tool's interpreter (`python` mode) or the class tools' host (`classes`).

Started by procs.Child as `python -c BOOT MODE CPU_S`, it reads one JSON request a line on fd 3 and writes one JSON
reply a line on fd 4; what the code it runs prints goes to fd 1 and 2, which the agent reads up to the step's cap.
Every field it sends is cut to the request's `cap` here, in the child, so no reply outgrows what the agent reads.

The class host is ours and holds the state a checker compares: it is started with -P -s (no current directory, no
user site under HOME, the agent's work dir), drops any relative entry of its path, and is non-dumpable, so the
model's processes (the same uid) cannot open its pipes through /proc. The python interpreter is the agent's own: code
the model runs there imports from the work dir, as a Python prompt would.
"""

import json
import os
import sys

from .state import inside

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TextIO

instances: "dict[str, Any]" = {}
methods: "dict[str, Any]" = {}
encoder: "dict[str, Any]" = {}  # a task's own state encoding (public_state, result_text, error_text), when it has one
namespace: "dict[str, Any]" = {"__name__": "__main__"}  # the python tool's variables


def cut(text, n):
    """text cut to n characters, the cut said: what a tool makes may be any size, a reply may not."""
    return text if len(text) <= n else text[:n] + f"\n[output cut: {len(text) - n} more characters]"


def jsonable(v, seen=None):
    """A class tool's value as JSON data, to show the model: containers walked, objects as their public attributes,
    the rest as repr (lossy: a tuple shows as a list)."""
    return _encode(v, set() if seen is None else seen, tagged=False)


def state_of(v):
    """A class instance's public state as JSON data that keeps every difference a checker compares: keys that are not
    strings, tuples and sets are tagged, other values by their type and repr. No depth is cut: only a cycle is named
    (a structure deeper than the interpreter can walk raises, and the state is missing)."""
    return _encode(v, set(), tagged=True)


def _encode(v, seen, tagged):
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if id(v) in seen:
        return "<cycle>"  # a link back up (a tree's parent): named, never followed
    seen.add(id(v))
    try:
        if isinstance(v, dict):
            if not tagged or all(isinstance(k, str) for k in v):
                return {str(k): _encode(x, seen, tagged) for k, x in v.items()}
            items = [[_encode(k, seen, tagged), _encode(x, seen, tagged)] for k, x in v.items()]
            return {"__items__": sorted(items, key=repr)}
        if isinstance(v, (list, tuple)):
            out = [_encode(x, seen, tagged) for x in v]
            return {"__tuple__": out} if tagged and isinstance(v, tuple) else out
        if isinstance(v, (set, frozenset)):
            out = sorted((_encode(x, seen, tagged) for x in v), key=repr)
            return {"__set__": out} if tagged else out
        if hasattr(v, "__dict__"):
            obj = {"__class__": type(v).__name__}
            obj.update({k: _encode(x, seen, tagged) for k, x in vars(v).items() if not k.startswith("_")})
            return obj
        return {"__repr__": type(v).__name__ + ":" + repr(v)} if tagged else repr(v)
    finally:
        seen.discard(id(v))


def load(spec):
    """One class of the task: its module (source, or importable from a named Python environment), its instance, its
    setup, and its methods as tools."""
    import importlib

    if spec.get("encoder") and not encoder:
        exec(compile(spec["encoder"], "<state encoder>", "exec"), encoder)
    if spec.get("source") is not None:
        import types

        mod = types.ModuleType("gs_class_" + spec["class_name"])
        sys.modules[mod.__name__] = mod
        exec(compile(spec["source"], "<class " + spec["class_name"] + ">", "exec"), mod.__dict__)
    else:
        mod = importlib.import_module(spec["module"])
    obj = getattr(mod, spec["class_name"])(**spec.get("init_args", {}))
    if spec.get("setup"):
        getattr(obj, spec["setup"])(**spec.get("setup_args", {}))
    instances[spec["class_name"]] = obj
    names = spec.get("methods") or [n for n in dir(obj) if not n.startswith("_") and callable(getattr(obj, n))]
    for n in names:
        methods[n] = obj


def run_code(code):
    """The python tool: run code, printing the value of a last bare expression."""
    import ast

    tree = ast.parse(code, "<python>", "exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    exec(compile(tree, "<python>", "exec"), namespace)
    if last is not None:
        value = eval(compile(last, "<python>", "eval"), namespace)
        if value is not None:
            print(repr(value))


def answer(mode, msg, reply):
    """Fill `reply` for one request; raises what the tool raised."""
    cap = msg.get("cap", 1 << 20)
    if mode == "python":
        run_code(msg["code"])
    elif msg["op"] == "load":
        for spec in msg["classes"]:
            load(spec)
        reply["methods"] = sorted(methods)
    elif msg["op"] == "call":
        obj = methods.get(msg["name"])
        if obj is None:
            raise LookupError("no tool named " + repr(msg["name"]))
        try:
            result = getattr(obj, msg["name"])(**msg["arguments"])
        except Exception as exc:
            if encoder:
                reply["text"] = cut(str(encoder["error_text"](exc)), cap)
            raise
        value = jsonable(result)
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        reply["result"] = value if len(text) <= cap else cut(text, cap)
        if encoder:
            reply["text"] = cut(str(encoder["result_text"](result)), cap)
    elif msg["op"] == "state":
        if encoder:
            reply["state"] = encoder["public_state"](instances)
        else:
            reply["state"] = {name: state_of(obj) for name, obj in instances.items()}


def serve(mode, requests: "TextIO", replies: "TextIO"):
    import traceback

    for line in requests:
        msg = json.loads(line)
        cap = msg.get("cap", 1 << 20)
        reply: dict[str, Any] = {"ok": True}
        try:
            answer(mode, msg, reply)
        except SystemExit as exc:
            reply = {"ok": False, "error": cut("SystemExit: " + repr(exc.code), cap)}
        except BaseException as exc:  # noqa: BLE001 whatever the tool raised is its answer (KeyboardInterrupt too)
            if mode == "python":
                traceback.print_exc()
            try:
                error = type(exc).__name__ + ": " + cut(str(exc), cap)
            except BaseException:  # noqa: BLE001 an exception whose str() fails is still the tool's error
                error = type(exc).__name__
            reply = {"ok": False, "error": error, "text": reply.get("text")}
        sys.stdout.flush()
        sys.stderr.flush()
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


def main():
    mode = sys.argv[1]
    cpu_s = sys.argv.pop(2)  # the tool's CPU seconds ("" for none), set on itself before anything runs
    roots = json.loads(sys.argv.pop(2)) if len(sys.argv) > 2 else []  # where the agent writes
    if cpu_s:
        import resource

        resource.setrlimit(resource.RLIMIT_CPU, (int(cpu_s), int(cpu_s)))
    if mode == "classes":
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: no other process opens our /proc/pid/fd
        # No entry of the path may be relative (an empty PYTHONPATH entry is the work dir) or lie where the agent
        # writes (a task's PYTHONPATH=/app): a module planted there would run here and set the compared state.
        sys.path[:] = [p for p in sys.path if os.path.isabs(p) and not inside(os.path.normpath(p), roots)]
    else:
        sys.path.insert(0, "")  # the model's modules, from its working directory (the host ran us with -P)
    serve(mode, os.fdopen(3, "r", encoding="utf-8"), os.fdopen(4, "w", encoding="utf-8"))
