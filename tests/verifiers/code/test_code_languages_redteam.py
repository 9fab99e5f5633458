"""Issue 16's red-team findings, one regression test each: what a JavaScript, TypeScript or Java program chooses
never makes its verdict infra_error, never crashes the host's judge, never puts a hidden input in the reason, and
never runs outside its test's time limit."""

from __future__ import annotations

import json

import pytest

from groupscore.runtime.programs import ProgramRun, run_program
from groupscore.sandbox import BadRunRequest, RunResult, RunStatus
from groupscore.sandbox.languages import java_main_class, java_top_level_classes
from groupscore.sandbox.workdir import check_name
from groupscore.schema.verdict import Status
from groupscore.verifiers.code.assertions import Call
from groupscore.verifiers.code.item import CodeItem
from groupscore.verifiers.code.plan import CallUnit, ExpectedValue
from groupscore.verifiers.code.runner_plans import json_runner_plan, runner_groups
from groupscore.verifiers.code.verify import judge_runner, score_code


def item(language: str, program: str, tests: list[dict], hidden: list[dict] | None = None, **extra) -> CodeItem:
    completion = f"```{language}\n{program}\n```"
    return CodeItem(id="x", language=language, completion=completion, tests=tests, hidden_tests=hidden or [], **extra)


def call(fn: str, args: list, expected) -> dict:
    return {"type": "call", "fn": fn, "args": args, "expected": expected}


ADD_TESTS = [call("add", [1, 2], 3)], [call("add", [2, 2], 4)]

# -- 1: a Java program's names never make a jail fail --------------------------------------------------------------


def test_java_names_come_from_code_not_comments_or_strings():
    source = (
        "/*\npublic class Commented\n*/\n// public class Line\n"
        '@SuppressWarnings("public class S") public final class Real { class Inner {} String s = "}"; char c = \'{\'; }\n'
        "class Other { void f() { Object o = String.class; } }\n"
    )
    assert java_main_class(source.encode()) == "Real"
    assert java_top_level_classes(source) == [("Real", True), ("Other", False)]
    # Valid Java names unfit for a file name: no file of that name (javac then refuses the program).
    assert java_main_class(("public class " + "Q" * 256 + " {}").encode()) is None
    assert java_main_class(("public class A" + "\u4e2d" * 85 + " {}").encode()) is None
    assert java_main_class(b"/*\npublic class X") is None  # an unterminated comment hides what follows
    assert java_top_level_classes("/*\n" + "".join(f"class C{i}\n" for i in range(30000)) + "*/ class S {}") == [
        ("S", False)
    ]


def test_file_names_over_name_max_are_refused_as_the_requests_fault():
    with pytest.raises(BadRunRequest, match="255 bytes"):
        check_name("Q" * 256 + ".java")
    assert check_name("Q" * 250 + ".java")


@pytest.mark.usefixtures("jail_available")
@pytest.mark.parametrize(
    "decoy",
    [
        "/*\npublic class " + "Q" * 256 + "\n*/",
        "/*\npublic class A" + "\u4e2d" * 85 + "\n*/",
        "/*\nclass " + "Z" * 140000 + "\n*/",
    ],
    ids=["long-public-name", "multibyte-name", "argv-too-long"],
)
def test_java_names_in_comments_leave_a_wrong_call_program_incorrect(decoy):
    wrong = decoy + "\nclass Solution { public static int add(int a, int b) { return a - b; } }\n"
    v = score_code(item("java", wrong, *ADD_TESTS))
    assert (v.status, v.reward) == (Status.incorrect, 0.0), v.reason


@pytest.mark.usefixtures("jail_available")
def test_java_overlong_public_class_is_a_compile_error_not_a_sandbox_error():
    program = "public class " + "Q" * 256 + " { public static int add(int a, int b) { return a + b; } }"
    v = score_code(item("java", program, *ADD_TESTS))
    assert (v.status, v.reward) == (Status.error, 0.0), v.reason
    assert "compile error" in v.reason
    stdio = "public class " + "Q" * 256 + " { public static void main(String[] a) { System.out.println(1); } }"
    run = run_program(ProgramRun(code=stdio, language="java"))
    assert run.status.value == "compile_error", (run.status, run.error)


# -- 4: what a program writes never crashes the host's judge ------------------------------------------------------


def _unit() -> CallUnit:
    return CallUnit(0, False, "call test 0", 1.0, [Call("f")], [ExpectedValue(0, 1)])


@pytest.mark.parametrize(
    "line",
    [
        "M " + "[" * 200_000,  # a forged record, nested past the json module's recursion guard
        'M {"unit": 0, "status": "import_error", "detail": ' + "[" * 990 + "]" * 990 + "}",
    ],
    ids=["forged-record", "deep-detail"],
)
def test_deep_forged_records_are_skipped_not_a_crash(line):
    result = RunResult(status=RunStatus.OK, stdout=line + "\n")
    outcome = judge_runner([_unit()], result, "M")[0]
    assert not outcome.passed and outcome.why == "the runner ended before this test"


def test_a_returned_value_nested_deeper_than_the_bound_fails_its_test():
    payload = "[" * 995 + "1" + "]" * 995  # under json.loads's own guard, over the host's comparison's stack
    record = {"unit": 0, "status": "done", "answers": [["J", payload]]}
    outcome = judge_runner([_unit()], RunResult(status=RunStatus.OK, stdout=f"M {json.dumps(record)}\n"), "M")[0]
    assert not outcome.passed and outcome.why == "f() returned a value nested too deeply"
    shallow = {"unit": 0, "status": "done", "answers": [["J", "[" * 150 + "1" + "]" * 150]]}
    outcome = judge_runner([_unit()], RunResult(status=RunStatus.OK, stdout=f"M {json.dumps(shallow)}\n"), "M")[0]
    assert not outcome.passed and outcome.why.startswith("f() returned [[[[")


@pytest.mark.usefixtures("jail_available")
def test_javascript_deep_value_is_that_tests_failure():
    program = "function f() { let x = 1; for (let i = 0; i < 995; i++) x = [x]; return x; }"
    v = score_code(item("javascript", program, [call("f", [], 1)], [call("f", [], 2)]))
    assert (v.status, v.reward) == (Status.incorrect, 0.0), v.reason
    assert "nested too deeply" in v.reason


# -- 3: no hidden input reaches a reason ---------------------------------------------------------------------------

REREADS_PLAN = """
const fs = require('fs'); const buf = Buffer.alloc(1 << 20); const n = fs.readSync(0, buf, 0, buf.length, 0);
const plan = JSON.parse(buf.subarray(0, n).toString());
function f(x) {
  if (x === 'pub') throw new Error(JSON.stringify(plan.units.map(u => u.calls[0].args)).replace(/[^A-Za-z0-9]/g, ''));
  return 0;
}
"""


def test_runner_groups_keep_hidden_units_out_of_the_public_job():
    public = CallUnit(0, False, "call test 0", 1.0, [Call("f", ("pub",))], [ExpectedValue(0, 1)])
    hidden = CallUnit(1, True, "", 1.0, [Call("f", ("SECRET",))], [ExpectedValue(0, 1)])
    assert runner_groups("javascript", [public, hidden]) == [[public], [hidden]]
    assert runner_groups("java", [hidden]) == [[hidden]]
    assert runner_groups("python", [public, hidden]) == [[public, hidden]]  # per-unit workers, in order
    assert b"SECRET" not in json_runner_plan(item("javascript", "", [call("f", ["pub"], 1)]), [public], "M")


@pytest.mark.usefixtures("jail_available")
def test_a_program_that_rereads_its_plan_finds_no_hidden_input_to_quote():
    v = score_code(
        item("javascript", REREADS_PLAN, [call("f", ["pub"], 1)], [call("f", ["SECRETONE"], 1), call("f", ["X2"], 1)])
    )
    assert v.reward == 0.0
    assert "raised 'Error: pub'" in v.reason, v.reason  # the program did reread its plan: its public input only
    assert "SECRETONE" not in v.reason and "X2" not in v.reason, v.reason


# -- 2: a call test's time limit holds whatever the program replaces ----------------------------------------------

BUSY = "const end = Date.now() + 1500; let x = 0; while (Date.now() < end) x++;"
SLOW_JS = {  # each a correct answer, 1.5 s of work (a 0.5 s limit) done where vm's timeout did not reach
    "work-in-toJSON": "function slow(n) { return { toJSON() { BUSY return n * 2; } }; }",
    "work-in-proxy-trap": "function slow(n) { return new Proxy({ v: n * 2 }, "
    "{ get(t, k) { if (k === 'toJSON') { BUSY } return Reflect.get(t, k); } }); }",
    "patched-clock": "let k = 0; process.hrtime.bigint = () => (k++ % 2 === 0 ? 10n ** 15n : 0n); "
    "Math.round = () => 1e9; function slow(n) { BUSY return n * 2; }",
}


@pytest.mark.usefixtures("jail_available")
@pytest.mark.parametrize("program", list(SLOW_JS.values()), ids=list(SLOW_JS))
def test_javascript_work_outside_the_call_is_timed(program):
    program = program.replace("BUSY", BUSY)
    wrap = (lambda x: {"v": x}) if "Proxy" in program else (lambda x: x)
    tests = [{**call("slow", [1], wrap(2)), "time_limit_s": 0.5}]
    v = score_code(item("javascript", program, tests, [{**call("slow", [5], wrap(10)), "time_limit_s": 0.5}]))
    assert v.reward == 0.0, v.reason


JAVA_BUSY = "long end = System.currentTimeMillis() + 1500; long x = 0; while (System.currentTimeMillis() < end) x++;"
SLOW_JAVA = {  # each a correct answer after 1.5 s of work, against a 0.5 s limit
    # Its file was the runner's: it replaced the runner (and answered from the plan it read, untimed).
    "public-class-GsCallRunner": "import java.util.regex.*;\npublic class GsCallRunner {\n"
    "  static long slow(long n) { BUSY return n * 2; }\n"
    "  public static void main(String[] a) throws Exception {\n"
    '    String plan = new String(System.in.readAllBytes(), "UTF-8");\n'
    '    Matcher mk = Pattern.compile("\\"marker\\": \\"([0-9a-f]+)\\"").matcher(plan); mk.find();\n'
    '    Matcher m = Pattern.compile("\\"args\\": .(-?[0-9]+).").matcher(plan); int unit = 0;\n'
    '    while (m.find()) System.out.print(mk.group(1) + " {\\"unit\\":" + (unit++) + '
    '",\\"status\\":\\"done\\",\\"answers\\":[[\\"J\\",\\"" + slow(Long.parseLong(m.group(1))) + "\\"]]}\\n");\n'
    "    System.out.flush(); Runtime.getRuntime().halt(0); } }",
    # Shadowed java.lang.Math inside the runner: join() waited ~forever.
    "class-Math": "class Math { static long round(double d) { return Long.MAX_VALUE / 4; }\n"
    "  static long max(long a, long b) { return a > b ? a : b; } static int max(int a, int b) { return a > b ? a : b; }\n"
    "  static int toIntExact(long v) { return java.lang.Math.toIntExact(v); }\n"
    "  static double rint(double d) { return java.lang.Math.rint(d); } }\n"
    "public class Solution { public static long slow(long n) { BUSY return n * 2; } }",
    # Static initialisers ran untimed in the runner's main thread.
    "static-initialiser": "public class Solution { static long pre; static { BUSY pre = 2; }\n"
    "  public static long slow(long n) { return n * pre; } }",
}


@pytest.mark.usefixtures("jail_available")
@pytest.mark.parametrize("program", list(SLOW_JAVA.values()), ids=list(SLOW_JAVA))
def test_java_work_outside_the_call_is_timed(program):
    tests = [{**call("slow", [1], 2), "time_limit_s": 0.5}]
    hidden = [{**call("slow", [5], 10), "time_limit_s": 0.5}]
    v = score_code(item("java", program.replace("BUSY", JAVA_BUSY), tests, hidden, time_limit_s=0.5))
    assert v.reward == 0.0 and v.status is Status.timeout, v.reason


@pytest.mark.usefixtures("jail_available")
def test_java_public_class_named_like_the_runner_is_just_a_class():
    program = "public class GsCallRunner { public static int add(int a, int b) { return a + b; } }"
    v = score_code(item("java", program, *ADD_TESTS))
    assert (v.status, v.reward) == (Status.correct, 1.0), v.reason
