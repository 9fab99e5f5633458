"""The program that runs inside the jail for call-style tests: a trusted runner process and a worker holding the candidate.

This file is copied into the sandbox as it is and run by the jail's Python (3.8+, standard library only); the host
imports it too, for the one value codec both sides share.

Two processes, because in-process grading can be fooled by the code it grades:
- the runner (`python runner.py`) reads the test plan from stdin, never imports the candidate, and writes one
  marked JSON line per test unit to its stdout, the only channel the host reads;
- the worker (`python runner.py work solution.py`) is a fresh interpreter that imports the candidate and answers
  call requests over two pipes with the returned value as plain data (exact builtin types only, so an object with a
  custom `__eq__` cannot come out).
The worker sees call inputs but never an expected value; the runner enforces per-unit deadlines by killing the worker's
process group and starts a fresh one for the next unit. Assertions that the host could not take over ("residual" code)
run in the runner against proxies that forward each call to the worker, so their outcome never depends on what the
candidate's process claims. The runner makes itself non-dumpable so a worker cannot read its memory through /proc.
"""

import json
import math
import os
import select
import signal
import struct
import sys
import time

MAX_FRAME_BYTES = 8 << 20  # one request or result; a larger answer fails that call
MAX_DEPTH = 200


class NotPlainData(TypeError):
    """A value that is not built from exact builtin data types (or is too deep to carry)."""


# -- the value codec: typed JSON that keeps tuples, sets, bytes and non-string dict keys apart ----------------------

def encode_value(value, depth=0):
    if depth > MAX_DEPTH:
        raise NotPlainData("value nested too deeply")
    kind = type(value)  # exact types: a subclass could override __eq__ or __hash__
    if value is None or kind is bool or kind is str or kind is int:
        return value
    if kind is float:
        return value if math.isfinite(value) else ["float", repr(value)]
    if kind is list or kind is tuple or kind is set or kind is frozenset:
        items = [encode_value(v, depth + 1) for v in value]
        if kind is set or kind is frozenset:
            items.sort(key=lambda v: json.dumps(v, sort_keys=True))  # order-free types: one canonical order
        return [kind.__name__] + items
    if kind is dict:
        return ["dict"] + [[encode_value(k, depth + 1), encode_value(v, depth + 1)] for k, v in value.items()]
    if kind is bytes:
        return ["bytes", value.hex()]
    if kind is complex:
        return ["complex", encode_value(value.real, depth + 1), encode_value(value.imag, depth + 1)]
    raise NotPlainData("a value of type %s is not plain data" % kind.__name__)


def decode_value(data, depth=0):
    if depth > MAX_DEPTH:
        raise NotPlainData("value nested too deeply")
    if data is None or type(data) in (bool, str, int, float):
        return data
    if type(data) is not list or not data or type(data[0]) is not str:
        raise NotPlainData("malformed encoded value")
    tag, rest = data[0], data[1:]
    if tag in ("list", "tuple", "set", "frozenset"):
        items = [decode_value(v, depth + 1) for v in rest]
        return {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}[tag](items)
    if tag == "dict":
        out = {}
        for pair in rest:
            if type(pair) is not list or len(pair) != 2:
                raise NotPlainData("malformed dict entry")
            out[decode_value(pair[0], depth + 1)] = decode_value(pair[1], depth + 1)
        return out
    if tag == "float" and len(rest) == 1 and rest[0] in ("inf", "-inf", "nan"):
        return float(rest[0])
    if tag == "bytes" and len(rest) == 1 and type(rest[0]) is str:
        return bytes.fromhex(rest[0])
    if tag == "complex" and len(rest) == 2:
        return complex(decode_value(rest[0], depth + 1), decode_value(rest[1], depth + 1))
    raise NotPlainData("unknown tag %r" % tag)


def describe_exception(exc):
    try:
        text = str(exc)[:500]
    except BaseException:
        text = "<unprintable>"
    return "%s: %s" % (type(exc).__name__, text)


# -- framing on the worker pipes: 4-byte length, then JSON --------------------------------------------------------

def write_frame(fd, obj):
    body = json.dumps(obj, allow_nan=False).encode()
    if len(body) > MAX_FRAME_BYTES:
        body = json.dumps({"error": "ResultTooLarge: the value exceeds %d bytes" % MAX_FRAME_BYTES}).encode()
    data = struct.pack(">I", len(body)) + body
    while data:
        data = data[os.write(fd, data):]


class WorkerGone(BaseException):
    """The worker died or broke the protocol (BaseException: test code must not swallow it)."""


class Deadline(BaseException):
    """The current unit ran out of time (BaseException so that test code's `except Exception` cannot swallow it)."""


def read_exact(fd, size, deadline):
    chunks, left = [], size
    while left:
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            raise Deadline()
        ready, _, _ = select.select([fd], [], [], remaining)
        if not ready:
            raise Deadline()
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise WorkerGone()
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_frame(fd, deadline):
    (size,) = struct.unpack(">I", read_exact(fd, 4, deadline))
    if size > MAX_FRAME_BYTES:
        raise WorkerGone()
    try:
        message = json.loads(read_exact(fd, size, deadline))
    except ValueError:
        raise WorkerGone()
    if type(message) is not dict:
        raise WorkerGone()
    return message


# -- the worker: imports the candidate, answers calls -------------------------------------------------------------

def work(solution_path, request_fd=3, answer_fd=4):
    import importlib.util
    import types

    # Keep the codec and the pipes in locals: rebinding module globals from the candidate changes nothing here.
    encode, dumps_frame, read = encode_value, write_frame, read_frame
    try:
        spec = importlib.util.spec_from_file_location("solution", solution_path)
        module = importlib.util.module_from_spec(spec)
        sys.modules["solution"] = module
        spec.loader.exec_module(module)
    except BaseException as exc:  # SystemExit and KeyboardInterrupt included: an import that exits has failed
        dumps_frame(answer_fd, {"import_error": describe_exception(exc)})
        return
    functions = sorted(k for k, v in vars(module).items() if isinstance(v, types.FunctionType))
    dumps_frame(answer_fd, {"ready": functions})
    while True:
        try:
            request = read(request_fd, None)
        except WorkerGone:
            return
        try:
            fn = getattr(module, request["fn"])
            args = decode_value(request["args"])
            kwargs = decode_value(request["kwargs"])
            answer = {"ok": encode(fn(*args, **kwargs))}
            json.dumps(answer, allow_nan=False)  # fails here, not in the frame writer (e.g. an int too long to print)
        except BaseException as exc:
            answer = {"error": describe_exception(exc)}
        dumps_frame(answer_fd, answer)


# -- the runner: trusted, never runs candidate code ---------------------------------------------------------------

class Worker:
    def __init__(self, solution_path, python):
        request_r, self.request_w = os.pipe()
        self.answer_r, answer_w = os.pipe()
        devnull = os.open(os.devnull, os.O_RDWR)
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
        actions = [(os.POSIX_SPAWN_DUP2, devnull, 0), (os.POSIX_SPAWN_DUP2, devnull, 1),
                   (os.POSIX_SPAWN_DUP2, devnull, 2), (os.POSIX_SPAWN_DUP2, request_r, 3),
                   (os.POSIX_SPAWN_DUP2, answer_w, 4)]
        # setsid: the worker leads its own process group, so one killpg ends it and the children it forked.
        self.pid = os.posix_spawn(python, [python, "-s", os.path.abspath(__file__), "work", solution_path],
                                  env, file_actions=actions, setsid=True)
        for fd in (request_r, answer_w, devnull):
            os.close(fd)
        self.functions = None

    def wait_ready(self, deadline):
        message = read_frame(self.answer_r, deadline)
        if "ready" in message:
            self.functions = list(message["ready"])
            return None
        return str(message.get("import_error", "import failed"))

    def call(self, fn, args_encoded, kwargs_encoded, deadline):
        write_frame(self.request_w, {"fn": fn, "args": args_encoded, "kwargs": kwargs_encoded})
        return read_frame(self.answer_r, deadline)

    def kill(self):
        for target in (lambda: os.killpg(self.pid, signal.SIGKILL), lambda: os.kill(self.pid, signal.SIGKILL)):
            try:
                target()
            except OSError:
                pass
        for fd in (self.request_w, self.answer_r):
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            os.waitpid(self.pid, 0)
        except OSError:
            pass
        # As pid 1 of the jail the runner inherits orphans (double-forked children); reap the dead ones.
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except OSError:
                break
            if pid == 0:
                break


class CandidateError(Exception):
    """The candidate raised an exception that is not a builtin type."""


def make_proxy(worker, fn, deadline):
    """A stand-in for one candidate function in residual test code: arguments out, a fresh plain value back."""
    import builtins

    def proxy(*args, **kwargs):
        answer = worker.call(fn, encode_value(list(args)), encode_value(dict(kwargs)), deadline)
        if "ok" in answer:
            return decode_value(answer["ok"])
        text = str(answer.get("error", "error"))
        # Re-raise as the same builtin exception type, so tests that expect e.g. ValueError still work.
        name = text.split(":", 1)[0]
        kind = getattr(builtins, name, None)
        if isinstance(kind, type) and issubclass(kind, Exception):
            raise kind(text)
        raise CandidateError(text)

    proxy.__name__ = fn
    return proxy


def run_residual(residual, worker, deadline):
    names = {name: make_proxy(worker, name, deadline) for name in worker.functions}
    namespace = dict(names)
    namespace["__name__"] = "__residual__"
    if residual["kind"] == "humaneval":
        exec(compile(residual["code"], "<test>", "exec"), namespace)
        namespace[residual["check"]](names.get(residual["entry_point"]) or make_proxy(worker, residual["entry_point"], deadline))
    else:
        exec(compile(residual["code"], "<test>", "exec"), namespace)


def run_unit(unit, worker, deadline):
    """Returns (status, per-call answers, residual outcome); raises Deadline or WorkerGone."""
    answers = []
    for call in unit["calls"]:
        answers.append(worker.call(call["fn"], call["args"], call["kwargs"], deadline))
    residual = None
    if unit.get("residual"):
        try:
            run_residual(unit["residual"], worker, deadline)
            residual = "passed"
        except (Deadline, WorkerGone):
            raise
        except BaseException as exc:
            residual = "failed: " + describe_exception(exc)
    return "done", answers, residual


def set_not_dumpable():
    # A non-dumpable process cannot be read through /proc/<pid>/mem or ptrace by another process of the same uid.
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE = 4
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def runner():
    plan = json.loads(sys.stdin.buffer.read())
    marker = plan["marker"]
    out_fd = os.dup(1)  # the results channel; nothing else of ours writes to it
    os.dup2(os.open(os.devnull, os.O_RDWR), 0)

    def emit(obj):
        line = ("%s %s\n" % (marker, json.dumps(obj, allow_nan=False))).encode()
        while line:
            line = line[os.write(out_fd, line):]

    set_not_dumpable()
    python, solution = sys.executable, os.path.abspath(plan["solution"])
    import_limit = float(plan["import_limit_s"])
    worker, stopped = None, None  # stopped: (status, detail) that every later unit gets
    for index, unit in enumerate(plan["units"]):
        if stopped is not None:
            emit({"unit": index, "status": stopped[0], "detail": stopped[1]})
            continue
        if worker is None:
            worker = Worker(solution, python)
            status = "import_error"
            try:
                problem = worker.wait_ready(time.monotonic() + import_limit)
            except Deadline:
                status, problem = "import_timeout", "importing the program took longer than %.3gs" % import_limit
            except (WorkerGone, OSError):
                problem = "the program exited while being imported"
            if problem is not None:
                worker.kill()
                worker, stopped = None, (status, problem)
                emit({"unit": index, "status": status, "detail": problem})
                continue
        record = {"unit": index}
        try:
            status, answers, residual = run_unit(unit, worker, time.monotonic() + float(unit["time_limit_s"]))
            record.update(status=status, answers=answers, residual=residual)
        except Deadline:
            record["status"] = "timeout"
        except (WorkerGone, OSError):  # the worker died, or closed its pipes, during this unit
            record["status"] = "crashed"
        if record["status"] != "done":
            worker.kill()
            worker = None  # a fresh one, importing the program again, serves the next unit
        emit(record)
        failed = record["status"] != "done" or record.get("residual", "passed") not in (None, "passed") or any(
            "ok" not in answer for answer in record.get("answers", ()))
        if plan.get("stop_on_failure") and failed:
            stopped = ("skipped", "an earlier test failed")
    if worker is not None:
        worker.kill()
    emit({"end": True})


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "work":
        work(sys.argv[2])
    elif len(sys.argv) == 1:
        runner()
    else:
        sys.exit("usage: runner.py < plan.json | runner.py work solution.py")
