"""`groupscore demo` (math stage): every bundled fixture is scored, written, and summarised per category."""

from __future__ import annotations

import json

from groupscore.demo import load_math_cases, run_demo


def test_demo_scores_every_fixture_and_prints_a_table_per_category(tmp_path, capsys):
    cases = load_math_cases()
    assert run_demo(tmp_path) == 0
    printed = capsys.readouterr().out
    records = [json.loads(line) for line in (tmp_path / "math_fixtures_verdicts.jsonl").read_text().splitlines()]
    assert [r["id"] for r in records] == [case.item["id"] for case in cases]
    assert all(r["status"] != "error" for r in records)
    families = {case.category.split("/")[0] for case in cases}
    table_rows = {line.split()[0] for line in printed.splitlines() if line.strip()}
    assert families | {"all"} <= table_rows
    all_row = next(line for line in printed.splitlines() if line.startswith("all "))
    assert all_row.split()[1] == str(len(cases))
