"""SandboxFusion's /run_code with its own language names for the languages the sandbox runs beside Python and C/C++:
nodejs, typescript, java, go, rust and bash (schema/sandboxfusion.py maps them to the sandbox's names)."""

from __future__ import annotations

import pytest

from groupscore.sandbox import LANGUAGES
from groupscore.schema.sandboxfusion import SANDBOX_LANGUAGE_OF

pytestmark = pytest.mark.service(workers=1)

DOUBLE = {
    "nodejs": "console.log(2 * Number(require('fs').readFileSync(0, 'utf8')));",
    "typescript": "const n: number = Number(require('fs').readFileSync(0, 'utf8'));\nconsole.log(n * 2);",
    "java": "import java.util.Scanner;\npublic class Main { public static void main(String[] a) {"
    " System.out.println(new Scanner(System.in).nextInt() * 2); } }",
    "go": 'package main\nimport "fmt"\nfunc main() { var n int; fmt.Scan(&n); fmt.Println(n * 2) }',
    "rust": "fn main() { let mut s = String::new(); std::io::stdin().read_line(&mut s).unwrap();"
    ' let n: i64 = s.trim().parse().unwrap(); println!("{}", n * 2); }',
    "bash": "read -r n; echo $((n * 2))",
}
COMPILED = {"typescript", "java", "go", "rust"}


def _run_code(http, **fields) -> dict:
    body = {"compile_timeout": 30, "run_timeout": 10, "memory_limit_MB": 256, "files": {}, "fetch_files": [], **fields}
    answer = http.post("/run_code", json=body)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_every_language_the_sandbox_runs_has_a_sandbox_fusion_name():
    assert set(SANDBOX_LANGUAGE_OF.values()) == set(LANGUAGES)


@pytest.mark.parametrize("language", list(DOUBLE))
def test_run_code_in_sandbox_fusions_language_names(http, language):
    answer = _run_code(http, language=language, code=DOUBLE[language], stdin="21\n")
    assert answer["status"] == "Success", answer
    assert answer["run_result"]["stdout"] == "42\n" and answer["run_result"]["return_code"] == 0
    if language in COMPILED:
        assert answer["compile_result"]["status"] == "Finished" and answer["compile_result"]["return_code"] == 0
    else:
        assert answer["compile_result"] is None


def test_a_compile_error_fails_with_the_compilers_answer(http):
    answer = _run_code(http, language="java", code="public class Main { int x = ; }")
    assert answer["status"] == "Failed" and answer["run_result"] is None
    assert answer["compile_result"]["return_code"] != 0 and "error" in answer["compile_result"]["stderr"]


def test_a_nodejs_program_is_still_jailed(http):
    code = "require('net').connect(80, '127.0.0.1').on('connect', () => console.log('connected'))"
    answer = _run_code(http, language="nodejs", code=code + ".on('error', (e) => console.log(e.code));")
    assert answer["status"] == "Success" and "connected" not in answer["run_result"]["stdout"]
