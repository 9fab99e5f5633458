"""`groupscore demo` (service stages): every bundled math and code fixture is scored through a real service."""

from __future__ import annotations

import json

from groupscore.demo import load_math_cases, run_demo


def test_demo_scores_every_fixture_and_prints_a_table_per_category(tmp_path, capsys):
    cases = load_math_cases()
    assert run_demo(tmp_path, train=False) == 0
    printed = capsys.readouterr().out
    records = [json.loads(line) for line in (tmp_path / "math_fixtures_verdicts.jsonl").read_text().splitlines()]
    assert [r["id"] for r in records] == [case.item["id"] for case in cases]
    assert all(r["status"] != "error" for r in records)
    families = {case.category.split("/")[0] for case in cases}
    table_rows = {line.split()[0] for line in printed.splitlines() if line.strip()}
    assert families | {"all"} <= table_rows
    all_row = next(line for line in printed.splitlines() if line.startswith("all "))
    assert all_row.split()[1] == str(len(cases))


def test_demo_scores_the_code_fixtures_in_the_sandbox_through_the_service(tmp_path):
    assert run_demo(tmp_path, train=False) == 0
    verdicts = {
        v["id"]: v for v in map(json.loads, (tmp_path / "code_fixtures_verdicts.jsonl").read_text().splitlines())
    }
    references = [v for key, v in verdicts.items() if str(key).endswith("(reference)")]
    assert references and all(v["reward"] == 1.0 for v in references)
    assert verdicts["add-honest"]["reward"] == 1.0
    assert verdicts["add-hardcoded"]["reward"] == 0.0 and verdicts["add-exit-zero"]["reward"] == 0.0
