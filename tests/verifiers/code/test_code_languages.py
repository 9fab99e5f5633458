"""Code items in the sandbox's other languages: stdio tests for all of them, call tests for JavaScript, TypeScript and
Java (their own runners in the jail, returned values judged on the host as for Python), and what no language may do.
"""

from __future__ import annotations

import pytest

from groupscore.schema.verdict import Status
from groupscore.verifiers.code.extract import ProgramExtraction, extract_program
from groupscore.verifiers.code.item import CodeItem
from groupscore.verifiers.code.verify import score_code

pytestmark = pytest.mark.usefixtures("jail_available")


def item(language: str, program: str, tests: list[dict], hidden: list[dict] | None = None, **extra) -> CodeItem:
    return CodeItem(
        id="x",
        language=language,
        completion=f"```{language}\n{program}\n```",
        tests=tests,
        hidden_tests=hidden or [],
        **extra,
    )


def call(fn: str, args: list, expected, **extra) -> dict:
    return {"type": "call", "fn": fn, "args": args, "expected": expected, **extra}


JS = """
function add(a, b) { return a + b; }
const pairs = (xs) => xs.map((x) => [x, x * x]);
function counts(s) { const out = {}; for (const c of s) out[c] = (out[c] || 0) + 1; return out; }
function boom() { throw new TypeError("no such thing"); }
function spin() { for (;;) {} }
"""


def test_javascript_call_tests_are_judged_on_the_host():
    v = score_code(
        item(
            "javascript",
            JS,
            [call("add", [1, 2], 3)],
            [
                call("add", [-5, 6], 1),
                call("pairs", [[1, 2]], [[1, 1], [2, 4]]),
                call("counts", ["abca"], {"a": 2, "b": 1, "c": 1}),
                call("add", [0.1, 0.2], 0.3, float_tol=1e-9),
            ],
        )
    )
    assert (v.status, v.reward) == (Status.correct, 1.0), v.reason


def test_javascript_wrong_values_exceptions_and_timeouts_fail_their_tests():
    v = score_code(
        item(
            "javascript",
            JS,
            [call("add", [1, 2], 4), call("boom", [], None), call("spin", [], None, time_limit_s=1)],
            [call("add", [2, 2], 4), call("add", [2, 2], 5)],
        )
    )
    assert v.reward == 0.5 and v.details["public_passed"] == 0 and v.details["hidden_passed"] == 1
    assert "add(1, 2) returned 3, expected 4" in v.reason
    v = score_code(item("javascript", JS, [call("boom", [], None)]))
    assert v.reward == 0 and "TypeError: no such thing" in v.reason
    v = score_code(item("javascript", JS, [call("spin", [], None, time_limit_s=1)]))
    assert v.status is Status.timeout


def test_typescript_call_tests_run_what_tsc_compiled():
    program = "function scale(xs: number[], k: number): number[] {\n  return xs.map((x) => x * k);\n}"
    v = score_code(item("typescript", program, [call("scale", [[1, 2], 3], [3, 6])], [call("scale", [[], 2], [])]))
    assert (v.status, v.reward) == (Status.correct, 1.0), v.reason
    v = score_code(item("typescript", program + "\nconst bad: number = 'x';", [call("scale", [[1], 1], [1])]))
    assert v.status is Status.error and v.details["compile_error"]


def test_javascript_exports_count_too():
    program = "module.exports = { double: (x) => 2 * x };"
    assert score_code(item("javascript", program, [call("double", [21], 42)])).reward == 1.0


def test_expected_values_never_reach_the_jail():
    # The program reads all it can of its own run (the runner's stdin: the plan) and looks for the expected value.
    program = "function leak() { return require('fs').readFileSync('/proc/self/fd/0', 'utf8').includes('zebra'); }"
    v = score_code(item("javascript", program, [call("leak", [], True)], [call("leak", [], "zebra-4242")]))
    assert v.details["public_passed"] == 0 and v.reward == 0.0


JAVA = """
import java.util.*;

class Solution {
    public int add(int a, int b) { return a + b; }
    static List<Integer> squares(int[] xs) { List<Integer> out = new ArrayList<>(); for (int x : xs) out.add(x * x); return out; }
    static Map<String, Integer> lengths(List<String> words) {
        Map<String, Integer> out = new TreeMap<>(); for (String w : words) out.put(w, w.length()); return out;
    }
    static double mean(double[] xs) { double s = 0; for (double x : xs) s += x; return s / xs.length; }
    static String shout(String s, char c) { return s.toUpperCase() + c; }
    static int[][] grid(int n) { return new int[n][n]; }
    static int fails(int x) { throw new IllegalStateException("bad " + x); }
    static int spin(int x) { while (true) { } }
}
"""


def test_java_call_tests_static_and_instance_methods_with_converted_arguments():
    v = score_code(
        item(
            "java",
            JAVA,
            [call("add", [1, 2], 3)],
            [
                call("squares", [[1, 2, 3]], [1, 4, 9]),
                call("lengths", [["ab", "c"]], {"ab": 2, "c": 1}),
                call("mean", [[1, 2]], 1.5),
                call("shout", ["hi", "!"], "HI!"),
                call("grid", [2], [[0, 0], [0, 0]]),
            ],
        )
    )
    assert (v.status, v.reward) == (Status.correct, 1.0), v.reason


def test_java_wrong_values_and_exceptions_fail_their_tests():
    v = score_code(item("java", JAVA, [call("add", [2, 2], 5), call("fails", [3], 0)], [call("add", [2, 2], 4)]))
    assert v.reward == 1.0 and v.details["public_passed"] == 0  # hidden tests alone pay
    assert "add(2, 2) returned 4, expected 5" in v.reason
    v = score_code(item("java", JAVA, [call("fails", [3], 0)]))
    assert v.reward == 0 and "IllegalStateException: bad 3" in v.reason
    # A call past its unit's limit fails that unit only; the runner goes on with the next.
    v = score_code(item("java", JAVA, [call("spin", [1], 1, time_limit_s=1), call("add", [1, 1], 2)]))
    assert v.reward == 0.5 and "(spin): took longer than 1s" in v.reason


STDIO = {
    "typescript": "const n: number = Number(require('fs').readFileSync(0, 'utf8'));\nconsole.log(n * 2);",
    "java": "public class Main { public static void main(String[] a) {"
    " System.out.println(new java.util.Scanner(System.in).nextInt() * 2); } }",
    "go": 'package main\nimport "fmt"\nfunc main() { var n int; fmt.Scan(&n); fmt.Println(n * 2) }',
    "rust": "fn main() { let mut s = String::new(); std::io::stdin().read_line(&mut s).unwrap();"
    ' let n: i64 = s.trim().parse().unwrap(); println!("{}", n * 2); }',
    "bash": "read -r n; echo $((n * 2))",
    "javascript": "console.log(2 * Number(require('fs').readFileSync(0, 'utf8')));",
}


@pytest.mark.parametrize("language", list(STDIO))
def test_stdio_tests_in_every_language(language):
    tests = [{"type": "stdio", "stdin": "21\n", "stdout": "42\n"}, {"type": "stdio", "stdin": "5\n", "stdout": "11\n"}]
    v = score_code(item(language, STDIO[language], tests))
    assert v.reward == 0.5 and v.details["language"] == language, v.reason
    assert "stdio test 1: stdout '10\\n' differs" in v.reason


def test_a_compile_error_is_the_items_error_with_the_compilers_message():
    v = score_code(item("typescript", "const n: number = 'x';", [{"type": "stdio", "stdout": ""}]))
    assert v.status is Status.error and v.details["compile_error"] and "TS2322" in v.reason


def test_python_style_tests_are_refused_for_other_languages():
    v = score_code(item("java", JAVA, [{"type": "assert", "code": "assert add(1, 2) == 3"}]))
    assert v.status is Status.error and "java programs take stdio and call tests" in v.reason
    v = score_code(item("go", STDIO["go"], [call("f", [], 1)]))
    assert v.status is Status.error and "go programs take stdio tests" in v.reason
    v = score_code(item("typescript", STDIO["typescript"], [{"type": "assert", "code": "assert f() == 1"}]))
    assert v.status is Status.error and "typescript programs take stdio and call tests" in v.reason


def test_extraction_reads_each_languages_fence_tags_and_telltales():
    assert extract_program("```js\nlet a = 1\n```", ProgramExtraction("javascript")) == "let a = 1\n"
    assert extract_program("```py\nx = 1\n```", ProgramExtraction("javascript")) is None
    assert extract_program("package main\nfunc main() {}", ProgramExtraction("go")) == "package main\nfunc main() {}"
    assert extract_program("The answer is 4.", ProgramExtraction("rust")) is None
