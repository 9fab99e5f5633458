"""Malformed requests to the session endpoints (/v1/sessions) through the real app: every field is checked before it
touches a path or a jail, a bad one is a 4xx with one clear message (422 naming the field, 404 for a session id no
session has), never a 5xx, and the server serves a normal session afterwards. First the inputs that gave a 500 (a NUL
or a lone surrogate in the task address, task paths the server could not read) and the other bounds, one by one; then
a bounded hypothesis run per endpoint over arbitrary bytes, NULs, lone surrogates (as JSON escapes), deep and huge
values and wrong types."""

from __future__ import annotations

import json
import os
from urllib.parse import quote, quote_from_bytes

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groupscore.environments import SourceError, load_source, load_task
from groupscore.environments.sources import split_address
from groupscore.service.app import create_app
from groupscore.service.settings import Settings

TOKEN = "fuzz-token"
MAX_SESSIONS = 4
TASK = "demo:count-errors"
RIGHT = {"name": "shell", "arguments": {"command": "grep -c ' ERROR ' app.log > errors.txt"}}
UNKNOWN = "0" * 32  # a well-formed id that no session has
JSON = {"content-type": "application/json"}
TEN_MB = 10 << 20
# Derandomized, so CI sees the same cases every run; set the variable higher to explore more locally.
EXAMPLES = int(os.environ.get("GROUPSCORE_SESSIONS_FUZZ_EXAMPLES", "40"))


@pytest.fixture(scope="module")
def task_dir(tmp_path_factory):
    """A GROUPSCORE_TASK_DIRS folder holding what no task source is: a binary file, broken YAML, a symlink loop, a
    FIFO (reading one would wait forever)."""
    folder = tmp_path_factory.mktemp("tasks")
    (folder / "binary.jsonl").write_bytes(b"\xff\xfe\x00\x01")
    (folder / "broken.yaml").write_text("a: [b\n  - : :\n")
    (folder / "loop").symlink_to(folder / "loop")
    os.mkfifo(folder / "fifo")
    return folder


@pytest.fixture(scope="module")
def app(task_dir):
    return create_app(Settings(workers=1, token=TOKEN, max_sessions=MAX_SESSIONS, task_dirs=str(task_dir)))


@pytest.fixture(scope="module")
def http(app):
    headers = {"authorization": f"Bearer {TOKEN}"}
    with TestClient(app, headers=headers, raise_server_exceptions=False) as client:
        yield client


@pytest.fixture(autouse=True)
def nothing_left_open(app, http):
    yield
    sessions = app.state.session_host.sessions
    assert sessions.open_count() == 0 and sessions.jails_alive() == 0


def post(http, path, raw):
    return http.post(path, content=raw, headers=JSON)


def field_problem(answer, field):
    """The one 422 problem of `answer`, which names `field`."""
    assert answer.status_code == 422, answer.text[:500]
    [problem] = answer.json()["detail"]
    assert problem["field"] == field and "\n" not in problem["msg"] and len(problem["msg"]) < 400, problem
    return problem["msg"]


def open_one(http):
    answer = http.post("/v1/sessions", json={"task": TASK})
    assert answer.status_code == 200, answer.text
    return answer.json()["sessions"][0]["session_id"]


def assert_serves_a_session(http):
    """The server still opens, steps, scores and closes a session as ever."""
    session_id = open_one(http)
    try:
        observation = http.post(f"/v1/sessions/{session_id}/step", json={"call": RIGHT}).json()
        assert observation["is_error"] is False, observation
        assert http.post(f"/v1/sessions/{session_id}/score", json={}).json()["reward"] == 1.0
    finally:
        assert http.delete(f"/v1/sessions/{session_id}").json() == {"closed": True}


def deep(depth):
    return "[" * depth + "]" * depth


def shell_call_with(arguments):
    """A step's raw JSON: a shell call whose arguments object holds the raw `arguments`."""
    return '{"call": {"name": "shell", "arguments": {' + arguments + "}}}"


# -- the inputs that gave a 500, and the other bounds ----------------------------------------------------------------


@pytest.mark.parametrize(
    "address",
    ["demo\\u0000x:count-errors", "demo:count-errors\\u0000", "TASKS/a\\u0000b.jsonl:t", "\\u0000:x"],
)
def test_a_nul_in_the_task_address_is_422_not_500(http, task_dir, address):
    raw = '{"task": "' + address.replace("TASKS", str(task_dir)) + '"}'
    assert "NUL character" in field_problem(post(http, "/v1/sessions", raw), "body.task")
    assert_serves_a_session(http)


@pytest.mark.parametrize(
    ("path", "raw", "field"),
    [
        ("/v1/sessions", '{"task": "\\ud800:x"}', "body.task"),  # was a 500
        ("/v1/sessions", '{"task": "demo:count-errors", "client": "\\udc80"}', "body.client"),  # was opened
        ("/v1/sessions/SESSION/step", '{"call": {"name": "\\udfff", "arguments": {}}}', "body.call.name"),
        ("/v1/sessions/UNKNOWN/step", '{"call": {"name": "sh\\ud800ell"}}', "body.call.name"),
    ],
)
def test_a_lone_surrogate_in_a_name_is_422_naming_the_field(http, path, raw, field):
    session_id = open_one(http)
    try:
        answer = post(http, path.replace("SESSION", session_id).replace("UNKNOWN", UNKNOWN), raw)
        assert "lone surrogate" in field_problem(answer, field)
    finally:
        http.delete(f"/v1/sessions/{session_id}")


def test_a_lone_surrogate_in_the_models_own_text_is_taken_as_written(http):
    """As /v1/score takes a completion: the model's messages and its calls' arguments are its own, answered or
    scored as they are (a tool's error here), never refused and never a 500."""
    session_id = open_one(http)
    try:
        echo = post(http, f"/v1/sessions/{session_id}/step", shell_call_with('"command": "echo \\ud800"'))
        assert echo.status_code == 200 and echo.json()["is_error"] is True
        turn = post(http, f"/v1/sessions/{session_id}/step", '{"message": "done \\udc80"}')
        assert turn.status_code == 200 and turn.json()["done"] is True
        verdict = post(http, f"/v1/sessions/{session_id}/score", '{"final_message": "\\ud800 \\u0000"}')
        assert verdict.status_code == 200 and verdict.json()["status"] == "incorrect"
    finally:
        http.delete(f"/v1/sessions/{session_id}")


@pytest.mark.parametrize(
    ("method", "path", "raw", "field", "words"),
    [
        ("POST", "/v1/sessions", '{"task": "demo:count-errors\\n"}', "body.task", "control character (U+000A)"),
        ("POST", "/v1/sessions", '{"task": "demo:x", "client": "a\\tb"}', "body.client", "control character"),
        ("POST", "/v1/sessions/UNKNOWN/step", '{"call": {"name": "shell\\n"}}', "body.call.name", "control"),
        ("DELETE", "/v1/sessions?client=a%00b", None, "query.client", "NUL character"),
        ("DELETE", "/v1/sessions?client=", None, "query.client", "at least 1 character"),
        ("DELETE", "/v1/sessions?client=" + "c" * 300, None, "query.client", "at most 256 characters"),
        ("POST", "/v1/sessions", '{"task": "demo:x", "seed": 9223372036854775808}', "body.seed", "less than"),
        ("POST", "/v1/sessions", '{"task": "demo:x", "seed": 1' + "0" * 5000 + "}", "body.0", "4300 digits"),
    ],
)
def test_control_characters_and_absurd_values_are_422_naming_the_field(http, method, path, raw, field, words):
    answer = http.request(method, path.replace("UNKNOWN", UNKNOWN), content=raw, headers=JSON)
    assert words in field_problem(answer, field)


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/sessions", {"task": "demo:" + "x" * TEN_MB}, "body.task"),
        ("/v1/sessions", {"task": TASK, "client": "x" * TEN_MB}, "body.client"),
        ("/v1/sessions/UNKNOWN/step", {"message": "x" * TEN_MB}, "body.message"),
        ("/v1/sessions/UNKNOWN/step", {"call": {"name": "x" * TEN_MB}}, "body.call.name"),
        ("/v1/sessions/UNKNOWN/score", {"final_message": "x" * TEN_MB}, "body.final_message"),
    ],
)
def test_a_10mb_string_field_is_refused_and_not_echoed(http, path, body, field):
    answer = http.post(path.replace("UNKNOWN", UNKNOWN), json=body)
    assert answer.status_code in (413, 422) and len(answer.content) < 1000
    if answer.status_code == 422:
        assert "at most" in field_problem(answer, field)


def test_a_10mb_argument_is_the_tools_to_refuse(http):
    session_id = open_one(http)
    try:
        call = {"name": "shell", "arguments": {"command": "x" * TEN_MB}}
        answer = http.post(f"/v1/sessions/{session_id}/step", json={"call": call})
        assert answer.status_code == 200 and answer.json()["is_error"] is True and len(answer.content) < 100_000
        assert http.post(f"/v1/sessions/{session_id}/step", json={"call": RIGHT}).json()["is_error"] is False
    finally:
        http.delete(f"/v1/sessions/{session_id}")


def test_arguments_nested_10000_deep_are_422_and_a_legit_call_still_works(http):
    session_id = open_one(http)
    try:
        path = f"/v1/sessions/{session_id}/step"
        too_deep = post(http, path, shell_call_with('"x": ' + deep(10_000)))
        assert "nested too deeply" in field_problem(too_deep, "body.0")  # no parser reads it: no field to name
        deeper = post(http, path, shell_call_with('"x": ' + deep(500)))
        assert "nested more than 64 levels" in field_problem(deeper, "body.call.arguments")
        many = http.post(path, json={"call": {"name": "shell", "arguments": {"x": [0] * 100_001}}})
        assert "more than 100000 values" in field_problem(many, "body.call.arguments")
        nested = post(http, path, shell_call_with('"command": "true", "x": ' + deep(10)))
        assert nested.status_code == 200 and "unknown argument 'x'" in nested.json()["content"]
        assert http.post(path, json={"call": RIGHT}).json() == {
            "content": "",
            "is_error": False,
            "done": False,
            "steps": 2,
        }
        assert http.post(f"/v1/sessions/{session_id}/score", json={}).json()["reward"] == 1.0
    finally:
        http.delete(f"/v1/sessions/{session_id}")


@pytest.mark.parametrize("session_id", ["a%00b", "%FF", "%ED%A0%80", "x" * 5000, "a b", "nope!", "ab%0Acd"])
def test_a_session_id_no_session_could_have_is_404(http, session_id):
    for method, path, body in (
        ("POST", f"/v1/sessions/{session_id}/step", {"message": "hi"}),
        ("POST", f"/v1/sessions/{session_id}/score", {}),
        ("DELETE", f"/v1/sessions/{session_id}", None),
    ):
        answer = http.request(method, path, json=body)
        assert answer.status_code == 404, (method, path[:80], answer.text[:200])
        assert "never opened" in answer.json()["detail"] and len(answer.json()["detail"]) < 200
    assert http.delete(f"/v1/sessions/{UNKNOWN}").json() == {"closed": False}  # well-formed: nothing to close


@pytest.mark.parametrize(
    ("address", "words"),
    [
        ("TASKS/loop/x:t", "not a usable path"),  # a symlink loop: RuntimeError from resolve()
        ("TASKS/fifo:t", "no task file or folder"),
        ("TASKS/binary.jsonl:t", "cannot be read as a task source"),  # was a 500 (UnicodeDecodeError)
        ("TASKS/broken.yaml:t", "not YAML at line"),  # was a 500 (yaml's ParserError); quotes none of the file
        ("TASKS/" + "a" * 300 + ":t", "not a usable path"),  # was a 500 (ENAMETOOLONG)
        ("TASKS/../outside.jsonl:t", "GROUPSCORE_TASK_DIRS"),
        ("TASKS/../../../../etc/passwd:root", "GROUPSCORE_TASK_DIRS"),
        ("bfcl/../../etc:passwd", "no such BFCL category"),
        ("harbor:../../../../etc", "harbor has no task"),
        ("~/tasks.jsonl:t", "GROUPSCORE_TASK_DIRS"),
    ],
)
def test_path_tricks_in_the_task_address_are_422(app, http, task_dir, address, words):
    answer = http.post("/v1/sessions", json={"task": address.replace("TASKS", str(task_dir))})
    assert words in field_problem(answer, "body.task")
    assert app.state.session_host.sessions.open_count() == 0


@pytest.mark.parametrize(
    ("address", "words"),
    [
        ("demo\x00:count-errors", "NUL character"),
        ("\ud800:x", "lone surrogate"),
        ("/tmp/" + "a" * 300 + ":t", "not a usable path"),
        ("x" * 5000 + ":t", "at most 1024 characters"),
        ("nowhere", "SOURCE:TASK_ID"),
        (5, "not int"),
    ],
)
def test_the_python_api_refuses_the_same_addresses_with_a_one_line_source_error(address, words):
    with pytest.raises(SourceError) as caught:
        load_task(address)
    assert words in str(caught.value) and "\n" not in str(caught.value) and len(str(caught.value)) < 400
    if isinstance(address, str) and ":" in address:
        with pytest.raises(SourceError):
            load_source(address.rpartition(":")[0])
    assert split_address("a:b:c") == ("a:b", "c")


# -- a bounded hypothesis run per endpoint and field ----------------------------------------------------------------

# Text, plain or with what paths, logs and JSON encoders choke on: NULs, C0 and C1 controls, separators, and (as JSON
# escapes) lone surrogates. Each kind alone as well: a lone surrogate in a field hides the NUL beside it.
_ODD = ["\x00", "\x1b", "\n", "\x7f", "\x85", "\u2028", "\ufeff", ":", "/", "..", "\\", "%"]
_SURROGATES = ["\ud800", "\udfff", "\udc80"]
TEXT = st.one_of(
    st.text(max_size=20),
    st.lists(st.one_of(st.characters(), st.sampled_from(_ODD)), max_size=20).map("".join),
    st.lists(st.one_of(st.characters(), st.sampled_from(_ODD + _SURROGATES)), max_size=20).map("".join),
)
# Known troublemakers, tried in every string field (a fuzzer's dictionary).
NASTY = ["\x00", "a\x00b", "\ud800", "x\udfffy", "\x1b[31m", "\n", "../../../etc/passwd", "a" * 300, "%00", "", " "]
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True), TEXT)
VALUES = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4), max_leaves=16
)
# Raw JSON text of one value: valid JSON (lone surrogates go as \udXXX escapes), nesting to 20,000 deep, strings to
# 10 MB, numbers no parser reads, and fragments that are no JSON at all.
FRAGMENTS = st.one_of(
    VALUES.map(json.dumps),
    st.integers(1, 20_000).map(deep),
    st.integers(1, 3_000).map(lambda n: '{"a":' * n + "1" + "}" * n),
    st.sampled_from([1 << 10, 1 << 20, TEN_MB]).map(lambda n: '"' + "x" * n + '"'),
    st.sampled_from(["NaN", "-Infinity", "1e999999", "9" * 5000, '"\\ud800"', '"\\u0000"', '"\\udc80\\ud800"']),
    st.sampled_from(["", "[", '"', "01", "tru", '"\\x"', "{,}", "[1,]", "\x00"]),
)


def texts(*good):
    """A string field's raw JSON: one of the `good` values, a troublemaker, text (odd or not), or anything."""
    return st.one_of(
        st.sampled_from(good).map(json.dumps), st.sampled_from(NASTY).map(json.dumps), TEXT.map(json.dumps), FRAGMENTS
    )


def render(obj):
    """A JSON object's raw text from its keys and its values' raw JSON."""
    return "{" + ",".join(f"{json.dumps(key)}:{raw}" for key, raw in obj.items()) + "}"


def near(base, field, values):
    """Raw JSON bodies near the valid request `base` (field -> raw JSON): `field` replaced by one of `values` (or
    dropped); the special fields "stray key" (an extra key) and "whole body" (anything at all, bytes too). One field
    at a time, so that the bad value is what validation meets, not the rest of the body."""
    if field == "whole body":
        return st.one_of(FRAGMENTS, st.binary(max_size=200))
    if field == "stray key":
        return st.tuples(TEXT, FRAGMENTS).map(lambda pair: render({**base, pair[0]: pair[1]}))
    dropped = {k: v for k, v in base.items() if k != field}
    return st.one_of(values.map(lambda raw: render({**base, field: raw})), st.just(render(dropped)))


ADDRESSES = st.one_of(
    texts(TASK, "demo:no-such-task", "harbor:x", "bfcl/nope:x", "/etc:passwd", "TASKS/binary.jsonl:t"),
    # SOURCE:TASK_ID with a troublemaker in it, or odd text on either side, or a named source or a path in front
    st.tuples(st.sampled_from(["", "TASKS/", "demo", "/tmp/"]), st.sampled_from(NASTY), st.sampled_from([":t", ""]))
    .map("".join)
    .map(json.dumps),
    st.tuples(TEXT, TEXT).map(lambda pair: json.dumps(f"{pair[0]}:{pair[1]}")),
    st.tuples(st.sampled_from(["demo", "harbor", "bfcl/x", "/etc", "..", "TASKS", "TASKS/loop"]), TEXT).map(
        lambda pair: json.dumps(f"{pair[0]}:{pair[1]}")
    ),
)
OPEN_BASE = {"task": '"demo:no-such-task"', "seed": "0", "count": "1", "client": '"fuzz"'}
OPEN_FIELDS = {
    "task": ADDRESSES,
    "seed": st.one_of(st.integers().map(str), FRAGMENTS),
    "count": st.one_of(st.integers(-3, 300).map(str), FRAGMENTS),
    "client": st.one_of(st.just("null"), texts("trainer-a")),
    "stray key": None,
    "whole body": None,
}
CALL_BASE = {"name": '"list_files"', "arguments": '{"path": "."}'}
CALL_FIELDS = {
    "name": texts("read_file", "list_files", "no_such_tool"),  # never a tool that runs what it is given
    "arguments": st.one_of(st.dictionaries(TEXT, VALUES, max_size=4).map(json.dumps), FRAGMENTS),
}
# (body near which, field, values): the step's call (its name, its arguments, or all of it), its message, or the rest
STEP_CASES = {
    "call.name": ({"call": render(CALL_BASE)}, "call", near(CALL_BASE, "name", CALL_FIELDS["name"])),
    "call.arguments": ({"call": render(CALL_BASE)}, "call", near(CALL_BASE, "arguments", CALL_FIELDS["arguments"])),
    "call": ({"call": render(CALL_BASE)}, "call", st.one_of(FRAGMENTS, near(CALL_BASE, "stray key", None))),
    "message": ({"message": '"done"'}, "message", texts("done")),
    "stray key": ({"message": '"done"'}, "stray key", None),
    "whole body": ({}, "whole body", None),
}
SCORE_CASES = {
    "final_message": ({"final_message": '"done"'}, "final_message", texts("done")),
    "stray key": ({"final_message": '"done"'}, "stray key", None),
    "whole body": ({}, "whole body", None),
}
# A session id as a path segment: mostly the live session's (so that bodies reach a real session and its jail), an
# unknown one, or any text (percent-encoded, lone surrogates too).
OTHER_IDS = st.one_of(
    st.just(UNKNOWN),
    st.sampled_from(NASTY).map(lambda t: quote(t.encode("utf-8", "surrogatepass"), "")),
    TEXT.map(lambda t: quote(t.encode("utf-8", "surrogatepass"), "")),
)
IDS = st.sampled_from(["LIVE", "LIVE", "LIVE", "other"]).flatmap(
    lambda id_: OTHER_IDS if id_ == "other" else st.just(id_)
)
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)


def assert_no_5xx(http, answer, request):
    assert answer.status_code < 500, (request, answer.status_code, answer.text[:500])
    if answer.status_code == 422:
        for problem in answer.json()["detail"]:
            assert isinstance(problem["field"], str) and problem["msg"] and "\n" not in problem["msg"], problem
    if answer.status_code == 200 and request[1] == "/v1/sessions":  # a valid open: give its sessions back
        for opening in answer.json()["sessions"]:
            assert http.delete(f"/v1/sessions/{opening['session_id']}").json() == {"closed": True}


@pytest.mark.parametrize("field", list(OPEN_FIELDS))
def test_opening_never_5xx_whatever_a_field_holds(http, task_dir, field):
    @FUZZ
    @given(raw=near(OPEN_BASE, field, OPEN_FIELDS[field]))
    def opens(raw):
        if isinstance(raw, str):
            raw = raw.replace("TASKS", str(task_dir))
        assert_no_5xx(http, post(http, "/v1/sessions", raw), ("POST", "/v1/sessions", raw[:300]))

    opens()
    assert_serves_a_session(http)


@pytest.mark.parametrize(
    ("endpoint", "case"), [("step", case) for case in STEP_CASES] + [("score", case) for case in SCORE_CASES]
)
def test_stepping_and_scoring_never_5xx_whatever_a_field_or_the_id_holds(http, endpoint, case):
    base, field, values = (STEP_CASES if endpoint == "step" else SCORE_CASES)[case]
    live = open_one(http)

    @FUZZ
    @given(session_id=IDS, raw=near(base, field, values))
    def calls(session_id, raw):
        path = f"/v1/sessions/{session_id.replace('LIVE', live)}/{endpoint}"
        assert_no_5xx(http, post(http, path, raw), ("POST", path[:300], raw[:300]))

    try:
        calls()
    finally:
        http.delete(f"/v1/sessions/{live}")
    assert_serves_a_session(http)


def test_closing_never_5xx_whatever_the_id_or_client(http):
    queries = st.one_of(
        st.sampled_from(NASTY).map(lambda t: "client=" + quote(t.encode("utf-8", "surrogatepass"), "")),
        TEXT.map(lambda t: "client=" + quote(t.encode("utf-8", "surrogatepass"), "")),
        st.binary(max_size=100).map(quote_from_bytes),
        st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E, exclude_characters="#"), max_size=100),
    )

    @FUZZ
    @given(session_id=IDS, query=queries)
    def closes(session_id, query):
        for path in (f"/v1/sessions/{session_id}", f"/v1/sessions?{query}"):
            answer = http.delete(path)
            assert answer.status_code < 500, (path[:300], answer.status_code, answer.text[:500])

    closes()
    assert_serves_a_session(http)
