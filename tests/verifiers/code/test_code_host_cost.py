"""Host cost: what the host pays to decode and judge a candidate's answer stays bounded, whatever the jail returns.

The attacks run for real: a candidate program in the sandbox writes a hand-made answer frame on its worker's answer
pipe (the 4-byte length, the kind byte, the payload), as a hostile policy would, or simply returns a value that is
cheap to build in the jail and dear to rebuild on the host. Each case is scored in a fresh process, so that its host
CPU time and peak memory can be read afterwards (the jail's processes are not the scorer's, and are not counted).
Forged payloads use only what both the old literal codec and today's JSON codec read (double-quoted tags, numbers,
lists), so each one reaches the decoder rather than failing as malformed text.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time

import pytest
from helpers import py

from groupscore.verifiers.code import host_eval
from groupscore.verifiers.code.jail_runner import (
    MAX_ANSWER_ITEMS,
    MAX_DEPTH,
    MAX_INT_DIGITS,
    NotPlainData,
    encode_value,
    json_text,
    parse_answer,
)

HASH_MODULUS = 2**61 - 1  # hash(k * HASH_MODULUS) == 0 for every int k: as many colliding ints as one wants
COLLIDING = 20_000  # the old decoder needed ~9 s of host CPU for a set of this many
HOST_CPU_BOUND_S = 2.0
HOST_PEAK_BOUND_MB = 600  # the scoring process, interpreter and groupscore included

# A worker's answer pipe is its only write-only pipe: find it, write one frame, and leave.
FORGE = """
import fcntl, os, stat, struct

def forge(payload):
    data = payload.encode()
    frame = struct.pack(">I", len(data) + 1) + b"O" + data
    for fd in range(3, 256):
        try:
            if not stat.S_ISFIFO(os.fstat(fd).st_mode):
                continue
        except OSError:
            continue
        if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY:
            while frame:
                frame = frame[os.write(fd, frame):]
            os._exit(0)
"""


pytestmark = pytest.mark.usefixtures("jail_available")  # a harmless probe jail first (conftest.py)


def forged(payload_expression: str) -> str:
    """A program whose `f` answers with the frame `payload_expression` (Python, evaluated in the jail) spells."""
    return FORGE + f"\ndef f(x):\n    forge({payload_expression})\n"


def item(program: str, expected=None, tests=None, **extra) -> dict:
    tests = tests or [{"type": "call", "fn": "f", "args": [0], "expected": expected}]
    return {
        "id": "hostile",
        "verifier": "code",
        "completion": py(program),
        "tests": tests,
        "time_limit_s": 10.0,
        **extra,
    }


_SCORE_IN_CHILD = """
import json, sys, time
from groupscore.verifiers.code.item import CodeItem
from groupscore.verifiers.code.verify import score_code
item = CodeItem.model_validate_json(sys.stdin.read())
started = time.process_time()
verdict = score_code(item)
cpu_s = time.process_time() - started
# VmHWM, this process's own peak: ru_maxrss keeps the parent's peak across exec (pytest's, hundreds of MB late in a run)
with open("/proc/self/status") as status:
    peak_kb = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
print(json.dumps({"reward": verdict.reward, "status": verdict.status.value, "reason": verdict.reason,
                  "cpu_s": cpu_s, "peak_mb": peak_kb / 1024}))
"""


def score_measured(raw: dict, env: dict[str, str] | None = None, timeout_s: float = 180.0) -> dict:
    """Score one code item in a fresh process: its verdict, the host CPU the scoring took and the process's peak RSS."""
    done = subprocess.run(
        [sys.executable, "-c", _SCORE_IN_CHILD],
        input=json.dumps(raw),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env={**os.environ, **(env or {})},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def assert_cheap(outcome: dict) -> None:
    assert outcome["cpu_s"] < HOST_CPU_BOUND_S, outcome
    assert outcome["peak_mb"] < HOST_PEAK_BOUND_MB, outcome


# -- forged and honest answers through the real sandbox --------------------------------------------------------------


def test_a_forged_set_of_ints_with_colliding_hashes_costs_the_host_no_quadratic_time():
    payload = f'"[\\"set\\", " + ", ".join(str({HASH_MODULUS} * k) for k in range(1, {COLLIDING + 1})) + "]"'
    outcome = score_measured(item(forged(payload), expected=[1]))
    assert outcome["reward"] == 0.0 and "f(0)" in outcome["reason"], outcome
    assert_cheap(outcome)


def test_a_forged_dict_whose_keys_collide_costs_the_host_no_quadratic_time():
    payload = f'"[\\"dict\\", " + ", ".join("[%d, 0]" % ({HASH_MODULUS} * k) for k in range(1, {COLLIDING + 1})) + "]"'
    outcome = score_measured(item(forged(payload), expected={"a": 1}))
    assert outcome["reward"] == 0.0, outcome
    assert_cheap(outcome)


def test_a_plain_list_of_colliding_ints_made_into_a_set_by_a_host_assert_is_refused_not_hashed():
    # Nothing forged: the jail builds a list (no hashing there), the host's `set(...)` would have been quadratic.
    program = f"def f(x):\n    return [{HASH_MODULUS} * k for k in range(1, {COLLIDING + 1})]\n"
    outcome = score_measured(item(program, tests=[{"type": "assert", "code": "assert len(set(f(0))) == 3"}]))
    assert outcome["reward"] == 0.0, outcome
    assert_cheap(outcome)


def test_a_returned_list_of_millions_of_zeros_is_refused_before_the_host_builds_it():
    # 2.7M elements fit the 8 MiB frame; the old decoder built ~2.6 GB of syntax tree to read them.
    outcome = score_measured(item("def f(x):\n    return [0] * 2_700_000\n", expected=[0]))
    assert outcome["reward"] == 0.0 and "too large" in outcome["reason"], outcome
    assert_cheap(outcome)


def test_a_forged_int_of_millions_of_digits_is_refused_even_with_the_interpreters_digit_limit_off():
    # int() of n digits is superlinear; Python's own 4300-digit limit can be switched off on the host.
    payload = '"[\\"list\\", " + "7" * 3_000_000 + "]"'
    outcome = score_measured(item(forged(payload), expected=[7]), env={"PYTHONINTMAXSTRDIGITS": "0"})
    assert outcome["reward"] == 0.0, outcome
    assert_cheap(outcome)


@pytest.mark.parametrize(
    "payload",
    [
        '"[" * 3_000_000 + "]" * 3_000_000',  # nesting far past any depth bound
        '"[\\"list\\", \\"" + "\\\\u00e9" * 1_300_000 + "\\"]"',  # one string of escapes, nearly 8 MiB of them
        '"[\\"list\\", " + "1" * 4_000_000 + ".5e-3]"',  # a float written with millions of digits
        '"[\\"bytes\\", \\"" + "ab" * 3_500_000 + "\\"]"',  # hex of 3.5 MB
    ],
    ids=["deep nesting", "string of escapes", "long float", "long hex"],
)
def test_other_dear_literals_stay_cheap_on_the_host(payload):
    outcome = score_measured(item(forged(payload), expected=[1]))
    assert outcome["reward"] == 0.0, outcome
    assert_cheap(outcome)


def test_a_long_stdout_token_that_is_almost_a_number_costs_the_host_linear_time():
    # stdio `float` comparison reads each output token with a number pattern; one that backtracks is quadratic in
    # the token (20 000 digits then `x` took 20 s of host CPU; the output cap allows a million).
    program = "print('1' * 1_000_000 + 'x')\n"
    outcome = score_measured(
        item(program, tests=[{"type": "stdio", "stdin": "", "stdout": "5\n", "compare": "float"}]), timeout_s=120
    )
    assert outcome["reward"] == 0.0, outcome
    assert_cheap(outcome)


def test_an_honest_large_answer_is_still_judged_right():
    program = "def f(x):\n    return [i * i for i in range(x)], {str(i): (i, -i) for i in range(3)}, {1.5, 2}\n"
    expected = [[i * i for i in range(200_000)], {"0": [0, 0], "1": [1, -1], "2": [2, -2]}]
    outcome = score_measured(
        item(
            program,
            tests=[
                {"type": "assert", "code": f"assert f(200000)[0] == {expected[0]!r}"},
                {"type": "assert", "code": "assert f(3)[1] == {'0': (0, 0), '1': (1, -1), '2': (2, -2)}"},
                {"type": "assert", "code": "assert f(3)[2] == {2, 1.5}"},
            ],
        )
    )
    assert outcome["reward"] == 1.0, outcome


# -- the codec itself -------------------------------------------------------------------------------------------------

ROUND_TRIPS = [
    None,
    True,
    False,
    0,
    -1,
    10**4000,
    -(10**4299),
    1.5,
    -0.0,
    5e-324,
    1e308,
    math.inf,
    -math.inf,
    "",
    "é\n\"'\\",
    "\ud800 lone surrogate",
    "\x00\x1f\x7f",
    b"\x00\xff",
    3 - 4j,
    [],
    (),
    set(),
    frozenset(),
    {},
    [1, [2, [3]]],
    (1, "a", (None,)),
    {1, 2.5, "x", (1, 2), frozenset({3})},
    {(1, 2): [3], "k": {"n": None}, 4: b"x", None: 1},
    [True, 1, 1.0],
    {-1, -2},  # -1 and -2 share a hash: two values per hash are nothing to refuse
    # long lists take the worker's bulk writer when they are all ints, all floats or all plain strings
    list(range(-50, 150)),
    [0.1 * i for i in range(100)],
    [str(i) for i in range(100)],
    ['a"b\\'] * 100,
    ["\u2028\x7f\ud800"] * 100,
    [True] * 100,
    [1] * 50 + [True] * 50,
    [1.5] * 50 + [2] * 50,
    tuple(range(100)),
    [[i] for i in range(100)],
    {i: str(i) for i in range(100)},
]


def _value_id(value: object) -> str:
    """repr, with a set's members in sorted order: a set's own order changes with the hash seed, and every
    pytest-xdist worker (a process with a seed of its own) must collect the same ids."""
    if isinstance(value, (set, frozenset)):
        return f"{type(value).__name__}({', '.join(sorted(map(_value_id, value)))})"
    return repr(value)


@pytest.mark.parametrize("value", ROUND_TRIPS, ids=_value_id)
def test_every_plain_value_survives_the_codec(value):
    text = json_text(encode_value(value))
    back = parse_answer(text)
    # The encoding is canonical (tags keep every type apart, sets are sorted): equal text, equal value.
    assert type(back) is type(value) and back == value and json_text(encode_value(back)) == text


def test_nan_survives_the_codec():
    assert math.isnan(parse_answer(json_text(encode_value(math.nan))))


@pytest.mark.parametrize(
    "text",
    [
        "[",
        "",
        "NaN",
        "Infinity",
        '["float", "1e999"]',
        '["list", NaN]',
        '{"a": 1}',
        '["set", [1]]',
        '["dict", [1]]',
        '["bytes", "zz"]',
        '["nope"]',
        "1" * (MAX_INT_DIGITS + 1),
        '["list", ' + "1" * (MAX_INT_DIGITS + 1) + "]",
        '["list", 1e999]',
        "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5),
        '["list", ' + ", ".join(["0"] * (MAX_ANSWER_ITEMS + 1)) + "]",
        '["list", ' + ", ".join(['["list"]'] * (MAX_ANSWER_ITEMS // 2 + 1)) + "]",
        "['list', 1]",  # the old literal form: quotes JSON does not read
    ],
    ids=lambda t: t[:40],
)
def test_malformed_or_oversized_answers_are_refused(text):
    with pytest.raises((NotPlainData, ValueError)):
        parse_answer(text)


def test_oversized_answers_are_refused_before_they_are_parsed():
    text = '["list", ' + ", ".join(["0"] * 2_700_000) + "]"
    started = time.thread_time()  # this thread only: pytest's other threads are not ours to count
    with pytest.raises(NotPlainData, match="too large"):
        parse_answer(text)
    assert time.thread_time() - started < HOST_CPU_BOUND_S  # the old readers took seconds to hours


def test_sets_and_dicts_with_many_colliding_hashes_are_refused_quickly():
    colliding = ", ".join(str(HASH_MODULUS * k) for k in range(1, 50_001))
    for text in (
        f'["set", {colliding}]',
        f'["frozenset", {colliding}]',
        '["dict", ' + ", ".join(f"[{HASH_MODULUS * k}, 0]" for k in range(1, 50_001)) + "]",
    ):
        started = time.thread_time()  # this thread only: pytest's other threads are not ours to count
        with pytest.raises(NotPlainData, match="hash"):
            parse_answer(text)
        assert time.thread_time() - started < HOST_CPU_BOUND_S  # the old readers took seconds to hours


def test_host_asserts_refuse_to_hash_colliding_values():
    colliding = [HASH_MODULUS * k for k in range(1, 50_001)]
    for expression in ("set(r0)", "frozenset(r0)", "dict(r1)"):
        started = time.thread_time()  # this thread only: pytest's other threads are not ours to count
        with pytest.raises(host_eval.EvalFailed, match="hash"):
            host_eval.evaluate(
                host_eval.ast.parse(expression, mode="eval").body, {"r0": colliding, "r1": [[k, 0] for k in colliding]}
            )
        assert time.thread_time() - started < HOST_CPU_BOUND_S  # the old readers took seconds to hours
    assert host_eval.evaluate(host_eval.ast.parse("len(set(r0))", mode="eval").body, {"r0": [1, 2, 2, -1, -2]}) == 4


# -- the service: capped scoring processes, and one hostile item holds up nobody else --------------------------------

SERVICE_MEMORY_MB = 1024


@pytest.fixture(scope="module")
def service():
    import httpx

    from groupscore.service.embedded import start_embedded

    env = {"GROUPSCORE_DEBUG": "1", "GROUPSCORE_WORKER_MEMORY_MB": str(SERVICE_MEMORY_MB)}
    with start_embedded(workers=2, env=env) as url, httpx.Client(base_url=url, timeout=300) as http:
        yield http


def math_item(id: str, **metadata) -> dict:
    return {"id": id, "verifier": "math", "completion": "\\boxed{4}", "answer": "4", "metadata": metadata}


def test_the_services_scoring_processes_run_under_a_memory_cap(service):
    pids = service.get("/debug/workers").json()["pids"]
    assert pids
    for pid in pids:
        with open(f"/proc/{pid}/limits") as limits:
            line = next(row for row in limits if row.startswith("Max address space"))
        assert int(line.split()[3]) == SERVICE_MEMORY_MB << 20, line


def test_an_item_that_runs_its_scoring_process_into_the_cap_gets_an_error_and_the_others_are_scored(service):
    pids = service.get("/debug/workers").json()["pids"]
    items = [math_item("a"), math_item("greedy", debug_alloc_mb=SERVICE_MEMORY_MB + 512), math_item("b")]
    results = service.post("/v1/score", json={"items": items}).json()["results"]
    assert [v["status"] for v in results] == ["correct", "error", "correct"], results
    assert "memory cap" in results[1]["reason"]
    assert service.get("/debug/workers").json()["pids"] == pids  # the process lived on
    assert service.post("/v1/score", json={"items": [math_item("c")]}).json()["results"][0]["status"] == "correct"


def test_a_hostile_answer_does_not_hold_up_another_request(service):
    import threading

    payload = f'"[\\"set\\", " + ", ".join(str({HASH_MODULUS} * k) for k in range(1, {COLLIDING + 1})) + "]"'
    hostile = [{**item(forged(payload), expected=[1]), "id": f"hostile-{i}"} for i in range(2)]  # one per process
    answers: dict = {}
    thread = threading.Thread(
        target=lambda: answers.setdefault("hostile", service.post("/v1/score", json={"items": hostile}).json())
    )
    thread.start()
    time.sleep(1.0)  # both hostile items are in their processes' hands by now
    started = time.monotonic()
    other = service.post("/v1/score", json={"items": [math_item("other")]}).json()["results"][0]
    waited_s = time.monotonic() - started
    thread.join()
    assert other["status"] == "correct"
    assert [v["reward"] for v in answers["hostile"]["results"]] == [0.0, 0.0]
    assert waited_s < 4.0, f"a plain math item waited {waited_s:.1f}s behind two hostile answers"


def test_a_host_assert_does_not_read_a_long_digit_string_as_an_int_even_with_the_digit_limit_off():
    digits = "7" * 3_000_000  # a returned string; the test asserts int(f(x)) == ...
    previous = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        started = time.thread_time()  # this thread only: pytest's other threads are not ours to count
        with pytest.raises(host_eval.EvalFailed, match="int"):
            host_eval.evaluate(host_eval.ast.parse("int(r0) == 7", mode="eval").body, {"r0": digits})
        assert time.thread_time() - started < HOST_CPU_BOUND_S  # the old readers took seconds to hours
    finally:
        sys.set_int_max_str_digits(previous)
    assert host_eval.evaluate(host_eval.ast.parse("int(r0) == 7", mode="eval").body, {"r0": "7"}) is True
