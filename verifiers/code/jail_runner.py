"""The program run inside the jail for call-style tests: a trusted runner, a zygote, and workers holding the candidate.

This file is run by the jail's Python (3.8+, standard library only) as `python -S runner.py [site-packages dir...]
[+module...]` (modules of the item's Python environment that the program imports: imported before any worker forks)
(the host ships it compiled by that interpreter, as runner.pyc); the host imports it too, for the value codec both
sides share. It is one file because the jail receives exactly one program: verify.py reads this source, sandbox_jobs
compiles it to runner.pyc and ships that single file into the jail, where no package of ours can be imported.

Three kinds of process, because in-process grading can be fooled by the code it grades:
- the runner reads the test plan from stdin, never runs candidate code, and writes one marked JSON line per test unit
  to its stdout, the only channel the host reads. It is the jail's pid 1 (the sandbox's `as_init`), so the kernel
  drops every signal a worker sends it, and it reaps the orphans of workers;
- each worker imports the candidate and answers call requests with the returned value as plain data (builtin data
  only, subclasses read as their base type's data, so an object with a custom `__eq__` cannot come out). The first
  is forked from the runner *before* the plan is read, so its memory holds no test, with stdin and stdout replaced
  by /dev/null; it imports the program while the runner reads the plan;
- a zygote, only when a worker must be replaced (its unit timed out or it died): a fresh interpreter exec'd by the
  runner (`runner.pyc --zygote`), so it too holds nothing of the plan; it forks a worker at once and another on each
  request, and hands the runner each worker's two pipes (SCM_RIGHTS). Most items never need one, and forking it up
  front cost every item ~2 ms of CPU.
Workers see call inputs but never an expected value; the runner enforces per-unit deadlines by killing the worker's
process group and takes a fresh worker (which imports the program again) for the next unit. Assertions that the host
could not take over ("residual" code) run in the runner against proxies that forward each call to the worker, so
their outcome never depends on what the candidate's process claims. Runner and zygote make themselves non-dumpable
(workers inherit it), so a worker can neither read nor write their memory through /proc.

Start-up cost is most of a run, so the common path imports only builtin modules (no json, re, enum, signal, socket):
the plan (from the host) and call requests (from the runner) are in marshal format, which only trusted writers use;
answers, which the candidate's process writes, travel as JSON text of the codec's encoding, written by `json_text`
like the result lines. The host reads an answer with `parse_answer` (the runner too, for residual code only), whose
cost is bounded whatever the candidate forges on its pipe: see "reading answers" below.
"""

import _ctypes
import _signal
import _socket
import marshal
import math
import os
import select
import struct
import sys
import time

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up cost); type checkers read it as True
if TYPE_CHECKING:
    from typing import Any

MAX_FRAME_BYTES = 8 << 20  # one request or answer; a larger answer fails that call
MAX_DEPTH = 200
# Reading an answer: what the host builds from the (forgeable) text is bounded by these, not by the candidate.
MAX_ANSWER_ITEMS = 1_000_000  # values in one answer, containers and set/dict entries counted
MAX_INT_DIGITS = 4300  # Python's own default for int(str); int() of n digits costs more than n
MAX_SHARED_HASH = 8  # distinct set elements or dict keys of one hash: more is a collision attack, not data
ModuleType = type(sys)


class NotPlainData(TypeError):
    """A value that is not built from exact builtin data types (or is too deep to carry)."""


# -- the value codec: literals that keep tuples, sets, bytes and non-string dict keys apart -------------------------


def encode_value(value, depth=0):
    """Plain data as nested lists of str/int/float/bool/None (tagged); anything else raises NotPlainData."""
    if depth > MAX_DEPTH:
        raise NotPlainData("a value nested too deeply")
    kind = type(value)  # exact types: a subclass could override __eq__ or __hash__
    if value is None or kind is bool or kind is str or kind is int:
        return value
    if kind is float:
        return value if math.isfinite(value) else ["float", repr(value)]
    if kind is list or kind is tuple or kind is set or kind is frozenset:
        items = [encode_value(v, depth + 1) for v in value]
        if kind is set or kind is frozenset:
            items.sort(key=repr)  # order-free types: one canonical order
        return [kind.__name__] + items
    if kind is dict:
        return ["dict"] + [[encode_value(k, depth + 1), encode_value(v, depth + 1)] for k, v in value.items()]
    if kind is bytes:
        return ["bytes", value.hex()]
    if kind is complex:
        return ["complex", encode_value(value.real, depth + 1), encode_value(value.imag, depth + 1)]
    for base, read_data in _BASE_DATA:
        if issubclass(kind, base):  # type(), not isinstance: a fake __class__ does not pass
            # A subclass of a builtin (Counter, OrderedDict, a namedtuple, an IntEnum) counts as the data it holds,
            # read through the base type's own C methods: nothing it overrides (__eq__, __iter__, ...) takes part.
            return encode_value(read_data(value), depth + 1)
    raise NotPlainData("a value of type %s is not plain data" % kind.__name__)


_BASE_DATA = (
    (list, list.copy),
    (tuple, lambda v: tuple.__getitem__(v, slice(None))),
    (dict, dict.copy),
    (set, set.copy),
    (frozenset, frozenset.copy),
    (str, str.__str__),
    (int, int.__index__),
    (float, float.__float__),
)


def decode_value(data, depth=0):
    """Encoded data back to a plain value; a set or dict is built only once its elements are known not to collide."""
    if depth > MAX_DEPTH:
        raise NotPlainData("a value nested too deeply")
    kind = type(data)
    if data is None or kind is bool or kind is str or kind is int:
        return data
    if kind is float:
        if not math.isfinite(data):  # the codec tags these; a bare 1e999 is forged
            raise NotPlainData("a malformed value")
        return data
    if kind is not list or not data or type(data[0]) is not str:
        raise NotPlainData("a malformed value")
    tag = data[0]
    if tag in ("list", "tuple", "set", "frozenset"):
        items = [decode_value(v, depth + 1) for v in data[1:]]
        if tag == "list":
            return items
        if tag == "tuple":
            return tuple(items)
        check_hash_spread(items)
        return set(items) if tag == "set" else frozenset(items)
    if tag == "dict":
        pairs = []
        for pair in data[1:]:
            if type(pair) is not list or len(pair) != 2:
                raise NotPlainData("a malformed value")
            pairs.append((decode_value(pair[0], depth + 1), decode_value(pair[1], depth + 1)))
        check_hash_spread([key for key, _ in pairs])
        return dict(pairs)
    if tag == "float" and len(data) == 2 and data[1] in ("inf", "-inf", "nan"):
        return float(data[1])
    if tag == "bytes" and len(data) == 2 and type(data[1]) is str:
        return bytes.fromhex(data[1])
    if tag == "complex" and len(data) == 3:
        return complex(decode_value(data[1], depth + 1), decode_value(data[2], depth + 1))
    raise NotPlainData("a malformed value")


def check_hash_spread(values):
    """Raise NotPlainData when more than MAX_SHARED_HASH distinct `values` share one hash.

    Putting a value in a set or dict costs a comparison with each entry of the same hash already there, and hashes of
    ints, floats and tuples are predictable (hash(k * (2**61 - 1)) == 0 for every k): n crafted values would cost
    n*n/2 comparisons. Counting first is linear: the buckets are keyed by hash values, whose own hashes differ (but
    for the few that are equal modulo 2**61 - 1), and each bucket holds at most MAX_SHARED_HASH values.
    Unhashable values raise TypeError, as set() would.
    """
    buckets: dict[int, list[object]] = {}
    for value in values:
        key = hash(value)
        bucket = buckets.get(key)
        if bucket is None:
            buckets[key] = [value]
            continue
        for seen in bucket:
            if seen == value:
                break
        else:
            if len(bucket) >= MAX_SHARED_HASH:
                raise NotPlainData(
                    "a set or dict whose elements collide in hash (over %d of one hash)" % MAX_SHARED_HASH
                )
            bucket.append(value)


# -- reading answers: the candidate's process writes them, and can write any bytes it likes on its pipe -------------
# What the reader may build is bounded before it builds it: the text by MAX_FRAME_BYTES, the values it holds by
# MAX_ANSWER_ITEMS (counted on the text), ints by MAX_INT_DIGITS, nesting by MAX_DEPTH (and by the json module's
# own recursion guard first), and sets and dicts by check_hash_spread. JSON, read by the json module's C scanner,
# costs the host a few bytes per byte of text and linear time; ast.literal_eval built about 1 KB of syntax tree per
# value and ran the tokenizer in Python objects.


def parse_answer(text):
    """An answer's JSON text back to a plain value (host side, and the runner for residual code); NotPlainData (or
    ValueError for text that is not JSON) when it is malformed or beyond the bounds above."""
    import json  # not on the runner's common path: there only residual code reads answers

    return decode_value(_load_bounded(json, text, MAX_FRAME_BYTES))


def parse_json_data(text, max_bytes=MAX_FRAME_BYTES):
    """Plain JSON text (a JavaScript or Java runner's record or returned value, which the program can forge) as
    data, with parse_answer's bounds and nesting at most MAX_DEPTH (the host's comparisons recurse on it)."""
    import json

    data = _load_bounded(json, text, max_bytes)
    stack = [(data, 0)]
    while stack:  # iterative: the check itself must not recurse
        value, depth = stack.pop()
        if type(value) in (list, dict):
            if depth >= MAX_DEPTH:
                raise NotPlainData("a value nested too deeply")
            stack.extend((v, depth + 1) for v in (value.values() if type(value) is dict else value))
    return data


def _load_bounded(json, text, max_bytes):
    if len(text) > max_bytes:
        raise NotPlainData("a value too large to judge (over %d bytes)" % max_bytes)
    if count_values(text) > MAX_ANSWER_ITEMS:
        raise NotPlainData("a value too large to judge (over %d items)" % MAX_ANSWER_ITEMS)
    limit = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 0
    try:
        return json.loads(
            text, parse_constant=_refuse_constant, parse_int=int if 0 < limit <= MAX_INT_DIGITS else _bounded_int
        )
    except RecursionError:
        raise NotPlainData("a value nested too deeply")


def count_values(text):
    """At least the number of values in a JSON text: every value but the first follows a comma or opens an array."""
    count = text.count(",") + text.count("[") + 1
    if count > MAX_ANSWER_ITEMS and '"' in text:  # commas and brackets inside strings are no values: count without
        import re

        text = re.sub(r'"[^"\\]*(?:\\.[^"\\]*)*"', '""', text)
        count = text.count(",") + text.count("[") + 1
    return count


def _bounded_int(digits):
    # Only where the interpreter's own digit limit is off or higher: int() of n digits costs more than n.
    if len(digits) - digits.startswith("-") > MAX_INT_DIGITS:
        raise NotPlainData("an int of more than %d digits" % MAX_INT_DIGITS)
    return int(digits)


def _refuse_constant(name):
    raise NotPlainData("a malformed value")  # NaN, Infinity: the codec tags non-finite floats


def describe_exception(exc):
    try:
        text = str(exc)[:500]
    except BaseException:
        text = "<unprintable>"
    return "%s: %s" % (type(exc).__name__, text)


_JSON_ESCAPES = {i: "\\u%04x" % i for i in range(32)}
_JSON_ESCAPES.update({ord('"'): '\\"', ord("\\"): "\\\\"})


def json_text(value):
    """JSON for the runner's records and the workers' answers (None, bools, ints, finite floats, strings, lists,
    string-keyed dicts) without importing json."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if type(value) is int:
        return str(value)
    if type(value) is str:
        return '"' + value.translate(_JSON_ESCAPES) + '"'
    if type(value) in (list, tuple):
        if len(value) > 64:
            text = _bulk_json_text(value)
            if text is not None:
                return text
        return "[" + ",".join([json_text(v) for v in value]) + "]"
    if type(value) is float and math.isfinite(value):  # encoded answers only: the codec tags the others
        return float.__repr__(value)
    if type(value) is dict:
        return "{" + ",".join(json_text(str(k)) + ":" + json_text(v) for k, v in value.items()) + "}"
    raise TypeError("not a record value: %s" % type(value).__name__)


def _bulk_json_text(value):
    """A long list (after its first item, an encoded value's tag) of only ints, only floats or only strings that need
    no escape, written by C loops; None for any other list. A call per element made the worker's answers 5-10x
    dearer than repr() for large lists of numbers or strings."""
    rest = value[1:]
    kinds = set(map(type, rest))
    if kinds == {int} or kinds == {float}:  # repr() of a list of these is JSON (finite floats: the codec tags others)
        body = repr(rest)[1:-1]
    elif kinds == {str}:
        plain = "".join(rest)
        if not plain.isprintable() or '"' in plain or "\\" in plain:
            return None
        body = '"' + '","'.join(rest) + '"'
    else:
        return None
    return "[" + json_text(value[0]) + "," + body + "]"


# -- frames on the worker pipes: 4-byte length, 1-byte kind, payload ----------------------------------------------
# Worker to runner: R ready (function names, one a line), I import error, O ok (JSON of the encoded value),
# E the call raised. Runner to worker: C call ((fn, args, kwargs) encoded, in marshal format: the runner is trusted
# and marshal reads in microseconds what eval would first have to compile).
MARSHAL_VERSION = 4  # what Python 3.4 and later all read: the host (plan) and the jail (calls) may differ


def write_frame(fd, kind, payload):
    data = payload if type(payload) is bytes else payload.encode("utf-8", "backslashreplace")
    if len(data) > MAX_FRAME_BYTES:
        kind, data = b"E", b"ResultTooLarge: the answer exceeds 8 MiB"
    data = struct.pack(">I", len(data) + 1) + kind + data
    while data:
        data = data[os.write(fd, data) :]


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


def read_frame(fd, deadline, raw=False):
    (size,) = struct.unpack(">I", read_exact(fd, 4, deadline))
    if not 1 <= size <= MAX_FRAME_BYTES + 1:
        raise WorkerGone()
    data = read_exact(fd, size, deadline)
    if raw:
        return data[:1], data[1:]
    try:
        return data[:1], data[1:].decode("utf-8")
    except UnicodeDecodeError:
        raise WorkerGone()


# -- the worker: imports the candidate, answers calls -------------------------------------------------------------


def work(solution_path, request_fd, answer_fd):
    # Keep the codec and the pipes in locals: rebinding module globals from the candidate changes nothing here.
    encode, text, send, read, loads = encode_value, json_text, write_frame, read_frame, marshal.loads
    module = ModuleType("solution")
    module.__file__ = solution_path
    sys.modules["solution"] = module
    try:
        with open(solution_path, "rb") as source:
            code = compile(source.read(), solution_path, "exec")
        exec(code, module.__dict__)
    except BaseException as exc:  # SystemExit and KeyboardInterrupt included: an import that exits has failed
        send(answer_fd, b"I", describe_exception(exc))
        return
    send(answer_fd, b"R", "")  # ready; which names a test takes from the program is the host's plan, not this list
    while True:
        try:
            _, request = read(request_fd, None, True)
        except WorkerGone:
            return
        try:
            fn, args, kwargs = loads(request)  # written by the runner
            result = getattr(module, fn)(*decode_value(args), **decode_value(kwargs))
        except BaseException as exc:
            # "X" for what `except Exception` does not catch (SystemExit, KeyboardInterrupt, a BaseException
            # subclass), so in-jail test code sees the same kind of exception plain Python would give it.
            kind, payload = (b"E" if issubclass(type(exc), Exception) else b"X"), describe_exception(exc)
        else:
            try:
                kind, payload = b"O", text(encode(result))  # fails here on e.g. an int too long to print
            except BaseException as exc:
                # A value that cannot come out (a generator, an object) was returned, not raised: test code must
                # not be able to catch it as if the function had raised.
                kind, payload = b"X", describe_exception(exc)
        send(answer_fd, kind, payload)


def become_worker(request_r, answer_w):
    """In a freshly forked child: its own session, the usual signal handlers, then serve calls until the runner
    goes away. Never returns."""
    try:
        os.setsid()  # its own process group: one killpg ends it and whatever it forked
        sys.argv = ["solution.py"]
        _signal.signal(_signal.SIGCHLD, _signal.SIG_DFL)
        _signal.signal(_signal.SIGINT, _signal.default_int_handler)  # the candidate sees a usual Python
        work(os.path.abspath("solution.py"), request_r, answer_w)
    finally:
        os._exit(0)


def fork_worker(close_in_child=(), prepare=None):
    """(pid, runner's end of the request pipe, runner's end of the answer pipe). In the child, `prepare` runs before
    the worker starts."""
    request_r, request_w = os.pipe()
    answer_r, answer_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            for fd in (request_w, answer_r, *close_in_child):
                os.close(fd)
            if prepare is not None:
                prepare()
        except BaseException:
            os._exit(1)
        become_worker(request_r, answer_w)
    os.close(request_r)
    os.close(answer_w)
    return pid, request_w, answer_r


def quiet_stdio():
    # The plan may still be unread on stdin, and stdout is the results channel: neither is a worker's.
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)


def fork_first_worker(site_dirs):
    """The first worker, forked before the runner reads the plan."""

    def prepare():
        quiet_stdio()
        add_site_packages(site_dirs)

    return fork_worker(prepare=prepare)


def zygote(control):
    """Fork a worker at once, then one per request; each time send the runner the worker's pid and the runner's ends
    of its two pipes."""
    _signal.signal(_signal.SIGCHLD, _signal.SIG_IGN)  # workers are reaped by the kernel
    while True:
        pid, request_w, answer_r = fork_worker(close_in_child=(control.fileno(),))
        rights = [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, struct.pack("2i", request_w, answer_r))]
        try:
            control.sendmsg([struct.pack(">i", pid)], rights)
        except OSError:
            return
        finally:
            os.close(request_w)
            os.close(answer_r)
        try:
            request = control.recv(16)  # the runner asks for the next worker
        except OSError:
            return
        if not request:
            return  # the runner is gone


def exec_zygote(site_dirs, modules=()):
    """Start the zygote as a new interpreter (nothing of the runner's memory survives the exec); its control socket."""
    runner_end, zygote_end = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:
        try:
            keep = zygote_end.fileno()
            quiet_stdio()
            os.closerange(3, keep)  # the results channel among them
            os.closerange(keep + 1, 4096)
            os.set_inheritable(keep, True)
            # -I: no script directory on the path, so the zygote's own imports never come from what a worker wrote.
            argv = [sys.executable, "-I", "-S", "-B", sys.argv[0], "--zygote", str(keep), *site_dirs]
            os.execv(sys.executable, argv + ["+" + m for m in modules])
        finally:
            os._exit(127)
    zygote_end.close()
    return runner_end


def zygote_main(control_fd, args):
    set_not_dumpable()
    site_dirs, modules = split_args(args)
    add_site_packages(site_dirs)
    preimport(site_dirs, modules)
    zygote(_socket.socket(fileno=control_fd))


def split_args(args):
    """The host's arguments: site-packages dirs (absolute paths) and modules to import first ("+numpy")."""
    return [a for a in args if a.startswith("/")], [a[1:] for a in args if a.startswith("+")]


def preimport(site_dirs, modules):
    """Import slow modules of the item's Python environment that the program imports, before this process forks a
    worker: every worker finds them loaded. Only the environment's read-only dirs are on the path (never the work
    dir); a module that fails to import is left for the program's own import to report."""
    if not modules:
        return
    add_site_packages(site_dirs)
    for name in modules:
        try:
            __import__(name)
        except BaseException:
            pass


def add_site_packages(site_dirs):
    # The runner starts with -S (site processing costs more than the rest of its start-up); the candidate may still
    # import installed packages, so put their directories (listed by the host) on the path without running .pth files.
    sys.path.extend(p for p in site_dirs if os.path.isdir(p) and p not in sys.path)


class Workers:
    """Where workers come from: the first was forked before the plan was read; later ones come from the zygote,
    exec'd when the first replacement is needed."""

    def __init__(self, site_dirs, modules=()):
        self.site_dirs, self.modules = site_dirs, modules
        self.first = fork_first_worker(site_dirs)
        self.control = None

    def next(self, deadline):
        if self.first is not None:
            (pid, request_w, answer_r), self.first = self.first, None
            return Worker(pid, request_w, answer_r, child=True)
        try:
            if self.control is None:
                self.control = exec_zygote(self.site_dirs, self.modules)  # it forks its first worker unasked
            else:
                self.control.send(b"spawn")
            self.control.settimeout(max(0.001, deadline - time.monotonic()))
            message, ancillary, _, _ = self.control.recvmsg(16, _socket.CMSG_LEN(8))
        except (_socket.timeout, TimeoutError):  # the same class from Python 3.10 on
            raise Deadline()
        except OSError:
            raise WorkerGone()
        fds: list[int] = []
        for level, kind, data in ancillary:
            if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
                fds.extend(struct.unpack("%di" % (len(data) // 4), data[: len(data) // 4 * 4]))
        if len(message) != 4 or len(fds) != 2:
            for fd in fds:
                os.close(fd)
            raise WorkerGone()
        (pid,) = struct.unpack(">i", message)
        return Worker(pid, *fds)


class Worker:
    def __init__(self, pid, request_w, answer_r, child=False):
        self.pid, self.request_w, self.answer_r = pid, request_w, answer_r
        self.child = child  # the runner's own child (the first worker); the zygote's are reaped by the kernel

    def wait_ready(self, deadline):
        kind, payload = read_frame(self.answer_r, deadline)
        if kind == b"R":
            return None
        return payload if kind == b"I" else "the program did not start"

    def call(self, fn, args_encoded, kwargs_encoded, deadline):
        """[kind, payload]: ["O", JSON of the encoded result], ["E", an Exception] or ["X", another BaseException]."""
        write_frame(self.request_w, b"C", marshal.dumps((fn, args_encoded, kwargs_encoded), MARSHAL_VERSION))
        kind, payload = read_frame(self.answer_r, deadline)
        if kind not in (b"O", b"E", b"X"):
            raise WorkerGone()
        return [kind.decode(), payload]

    def kill(self):
        if self.pid > 1:
            for target in (-self.pid, self.pid):  # its process group, then itself
                try:
                    os.kill(target, _signal.SIGKILL)
                except OSError:
                    pass
        for fd in (self.request_w, self.answer_r):
            try:
                os.close(fd)
            except OSError:
                pass
        if self.child and self.pid > 1:
            # Gone before the next unit starts (a zombie would still be listed and counted): SIGKILL takes a moment.
            end = time.monotonic() + 1.0
            while time.monotonic() < end:
                try:
                    if os.waitpid(self.pid, os.WNOHANG)[0]:
                        break
                except OSError:
                    break
                time.sleep(0.0005)
        reap_orphans()


def reap_orphans():
    """Reap dead orphans: as pid 1 the runner inherits whatever a worker double-forked, and zombies count against the
    jail's process limits."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except OSError:
            return
        if pid == 0:
            return


# -- the runner: trusted, never runs candidate code ---------------------------------------------------------------


class CandidateError(Exception):
    """The candidate raised an exception that is not a builtin type."""


class CandidateExit(BaseException):
    """The candidate raised what `except Exception` does not catch (SystemExit, KeyboardInterrupt, GeneratorExit, a
    BaseException subclass): test code that catches Exception must not swallow it, as in plain Python."""


# Raised by the candidate, these would not fail a test but end its loops early (StopIteration inside map() or
# next() is the end of the iteration): the test sees a CandidateError instead.
NOT_RERAISED = ("StopIteration", "StopAsyncIteration")


def make_proxy(worker, fn, deadline):
    """A stand-in for one candidate function in residual test code: arguments out, a fresh plain value back."""
    import builtins

    def proxy(*args, **kwargs):
        kind, payload = worker.call(fn, encode_value(list(args)), encode_value(dict(kwargs)), deadline)
        if kind == "O":
            try:
                return parse_answer(payload)
            except Exception:
                raise WorkerGone()
        if kind == "X":
            raise CandidateExit(payload)
        # Re-raise as the same builtin exception type, so tests that expect e.g. ValueError still work.
        name = payload.split(":", 1)[0]
        exception = None if name in NOT_RERAISED else getattr(builtins, name, None)
        if isinstance(exception, type) and issubclass(exception, Exception):
            raise exception(payload)
        raise CandidateError(payload)

    proxy.__name__ = fn
    return proxy


def solution_module(worker, program_names, test_builtins, deadline):
    """`solution` as residual test code imports it: proxies of the program's callables, never the program itself run
    in this process. `from solution import *` takes the names the host planned as the program's (never a builtin).

    A proxy per name asked for, whatever the worker listed: a function wrapped by functools.cache is no plain function
    but still the program's to call; a name the program lacks fails when called, in the worker."""
    module = ModuleType("solution")

    def __getattr__(name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)  # module machinery (__path__, __spec__, ...), never the program's
        proxy = make_proxy(worker, name, deadline)
        setattr(module, name, proxy)
        return proxy

    # Set in the module's namespace, as attribute assignment would: ModuleType declares neither name to type checkers.
    module.__dict__["__getattr__"] = __getattr__
    module.__dict__["__all__"] = [name for name in program_names if name not in test_builtins]
    return module


def run_residual(residual, worker, deadline):
    """Run a unit's residual code with its names resolved as the host planned them (names.NameSources): builtins
    are Python's (a fresh copy per unit), helpers the prompt's, `math` the module, the test's own names its own; only
    what the test takes from the program (implicit `program` names, `from solution import`, the HumanEval candidate)
    is a proxy of the worker's functions."""
    import builtins

    real_import = builtins.__import__
    test_builtins = dict(builtins.__dict__)
    solution = solution_module(worker, residual.get("program", ()), test_builtins, deadline)

    def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and (name == "solution" or name.startswith("solution.")):
            return solution
        return real_import(name, globals, locals, fromlist, level)

    test_builtins["__import__"] = guarded_import
    namespace: dict[str, Any] = {"__builtins__": test_builtins, "__name__": "__residual__"}
    for name in residual.get("modules", ()):
        namespace[name] = real_import(name)
    for name, module_name in residual.get("stdlib", ()):  # names.STDLIB_NAMES: the library's, not the program's
        module = real_import(module_name)
        namespace[name] = module if name == module_name else getattr(module, name)
    for name in solution.__all__:
        namespace[name] = getattr(solution, name)
    if residual.get("support"):
        # The item's prompt (item data like the test) defines helpers the test uses: run it here, take those.
        scope = {"__builtins__": test_builtins, "__name__": "__prompt__"}
        exec(compile(residual["support"], "<prompt>", "exec"), scope)
        namespace.update((name, scope[name]) for name in residual.get("helpers", ()) if name in scope)
    exec(compile(residual["code"], "<test>", "exec"), namespace)
    if residual["kind"] == "humaneval":
        namespace[residual["check"]](make_proxy(worker, residual["entry_point"], deadline))


def run_unit(unit, worker, deadline):
    """The unit's record fields; raises Deadline or WorkerGone."""
    answers = [worker.call(call["fn"], call["args"], call["kwargs"], deadline) for call in unit["calls"]]
    residual = None
    if unit["residual"]:
        try:
            run_residual(unit["residual"], worker, deadline)
            residual = "passed"
        except (Deadline, WorkerGone):
            raise
        except BaseException as exc:
            residual = "failed: " + describe_exception(exc)
    return {"status": "done", "answers": answers, "residual": residual}


def set_not_dumpable():
    # A non-dumpable process cannot be read or written through /proc/<pid>/mem (nor ptraced) by the same uid.
    # prctl(PR_SET_DUMPABLE=4, 0) through _ctypes directly: importing ctypes would double the runner's start-up.
    try:
        # dlopen(None): the running program's own symbols (libc's among them), which typeshed's signature leaves out
        prctl = _ctypes.dlsym(_ctypes.dlopen(None), "prctl")  # type: ignore[arg-type]
        done = _ctypes.call_function(prctl, (4, 0, 0, 0, 0)) == 0 and _ctypes.call_function(prctl, (3, 0, 0, 0, 0)) == 0
    except (AttributeError, OSError):  # an interpreter without these internals: the public way
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        done = libc.prctl(4, 0, 0, 0, 0) == 0 and libc.prctl(3, 0, 0, 0, 0) == 0
    if not done:
        raise OSError("prctl(PR_SET_DUMPABLE, 0) failed; refusing to run tests in a dumpable runner")


def read_plan():
    chunks = []
    while True:
        chunk = os.read(0, 1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
    os.dup2(os.open(os.devnull, os.O_RDWR), 0)
    # Strings, numbers, lists and dicts the host wrote in marshal format (version MARSHAL_VERSION).
    return marshal.loads(b"".join(chunks))


def runner(site_dirs, modules=()):
    # Python's own SIGINT handler would let a worker raise KeyboardInterrupt in the runner; as pid 1 with the default
    # action, the kernel drops SIGINT from inside the jail like every other signal.
    _signal.signal(_signal.SIGINT, _signal.SIG_DFL)
    # The work directory holds the program and whatever it writes there: the runner never imports from it (a
    # `random.py` there would run in this process when the test imports random). Workers inherit the path.
    here = os.path.dirname(os.path.abspath(sys.argv[0]))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    # Non-dumpable before any worker exists (workers inherit it), and the first worker forked before anything of the
    # plan is in this process's memory.
    set_not_dumpable()
    preimport(site_dirs, modules)  # before the first worker is forked, which then inherits them
    workers = Workers(site_dirs, modules)
    plan = read_plan()
    marker, out_fd = plan["marker"], os.dup(1)  # stdout is the results channel; nothing else of ours writes to it

    def emit(record):
        line = ("%s %s\n" % (marker, json_text(record))).encode("utf-8", "backslashreplace")
        while line:
            line = line[os.write(out_fd, line) :]

    import_limit = float(plan["import_limit_s"])
    worker, stopped = None, None  # stopped: (status, detail) that every later unit gets
    for index, unit in enumerate(plan["units"]):
        if stopped is not None:
            emit({"unit": index, "status": stopped[0], "detail": stopped[1]})
            continue
        if worker is None:
            status, problem, deadline = "import_error", None, time.monotonic() + import_limit
            try:
                worker = workers.next(deadline)
                problem = worker.wait_ready(deadline)
            except Deadline:
                status, problem = "import_timeout", "importing the program took longer than %.3gs" % import_limit
            except (WorkerGone, OSError):
                problem = "the program exited while being imported"
            if problem is not None:
                if worker is not None:
                    worker.kill()
                worker, stopped = None, (status, problem)
                emit({"unit": index, "status": status, "detail": problem})
                continue
        assert worker is not None  # a unit whose worker could not start was answered above
        record: dict[str, Any] = {"unit": index}
        try:
            record.update(run_unit(unit, worker, time.monotonic() + float(unit["time_limit_s"])))
        except Deadline:
            record["status"] = "timeout"
        except (WorkerGone, OSError):  # the worker died, or closed its pipes, during this unit
            record["status"] = "crashed"
        if record["status"] != "done":
            worker.kill()
            worker = None  # a fresh one, importing the program again, serves the next unit
        else:
            reap_orphans()
        emit(record)
        failed = (
            record["status"] != "done"
            or record["residual"] not in (None, "passed")
            or any(kind != "O" for kind, _ in record["answers"])
        )
        if plan["stop_on_failure"] and failed:
            stopped = ("skipped", "an earlier test failed")
    if worker is not None:
        worker.kill()
    emit({"end": True})


if __name__ == "__main__":
    if sys.argv[1:2] == ["--zygote"] and sys.argv[2:3] and sys.argv[2].isdigit():
        zygote_main(int(sys.argv[2]), sys.argv[3:])
        os._exit(0)
    if any(not arg.startswith(("/", "+")) for arg in sys.argv[1:]):
        sys.exit("usage: python -S runner.py [site-packages dir...] [+module...] < plan")
    runner(*split_args(sys.argv[1:]))
    os._exit(0)  # everything is written; skip interpreter teardown, a noticeable share of a short run
