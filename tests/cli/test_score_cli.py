"""`groupscore score` and the batch scorer under it: order kept, every line answered, bad lines isolated."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from helpers import groupscore, read_jsonl, write_jsonl

from groupscore import score as score_cli
from groupscore.runtime import batch
from groupscore.schema.reward import RewardSpec
from groupscore.schema.verdict import Status
from groupscore.verifiers import registry
from groupscore.verifiers.math.item import MathItem

RECORD_FIELDS = {"id", "reward", "status", "extracted", "reason"}


def math_line(item_id, completion, answer) -> str:
    return json.dumps({"id": item_id, "verifier": "math", "completion": completion, "answer": answer})


def run_cli(*args: str, timeout_s: float = 120) -> subprocess.CompletedProcess:
    return groupscore("score", *args, timeout=timeout_s)


def test_cli_scores_good_lines_and_answers_each_bad_line_with_its_number(tmp_path):
    source = tmp_path / "in.jsonl"
    with source.open("wb") as f:
        f.write((math_line("good-1", "So the answer is \\boxed{42}.", "42") + "\n").encode())
        f.write(b"{this is not json\n")
        f.write(b"\n")  # blank lines are skipped, not errors
        f.write(b'{"id": "no-answer-field", "verifier": "math", "completion": "x"}\n')
        f.write(b'{"id": "bad-kind", "verifier": "poetry", "completion": "x"}\n')
        f.write(b"\xff\xfe\xfa not utf-8\n")
        f.write((math_line("good-2", "#### 17", "18") + "\n").encode())
    out = tmp_path / "out.jsonl"
    done = run_cli(str(source), "-o", str(out), "-j", "1")
    assert done.returncode == 1, done.stderr  # some lines were bad
    records = read_jsonl(out)
    assert [r["id"] for r in records] == ["good-1", None, "no-answer-field", "bad-kind", None, "good-2"]
    for record in records:
        assert record.keys() >= RECORD_FIELDS
        assert 0.0 <= record["reward"] <= 1.0
    assert records[0]["status"] == "correct" and records[0]["reward"] == 1.0 and records[0]["extracted"] == "42"
    assert records[-1]["status"] == "incorrect" and records[-1]["reward"] == 0.0
    bad = records[1:5]
    assert [r["line"] for r in bad] == [2, 4, 5, 6]
    assert all(r["status"] == "error" and r["reward"] == 0.0 for r in bad)
    assert "invalid JSON" in bad[0]["reason"]
    assert "answer" in bad[1]["reason"] and "Field required" in bad[1]["reason"]
    assert "poetry" in bad[2]["reason"]
    assert "line" not in records[0]
    assert "6 items" in done.stderr


def test_cli_keeps_input_order_across_workers_and_writes_stdout_without_o(tmp_path):
    source = tmp_path / "in.jsonl"
    # Mixed costs (plain numbers, symbolic forms) so that chunks finish out of order on two workers.
    lines = []
    for i in range(300):
        if i % 3 == 0:
            lines.append(math_line(f"item-{i}", f"The answer is \\boxed{{{i}}}.", str(i)))
        elif i % 3 == 1:
            lines.append(math_line(f"item-{i}", f"\\boxed{{\\frac{{{i}}}{{2}}}}", f"{i / 2}"))
        else:
            lines.append(math_line(f"item-{i}", f"\\boxed{{\\sqrt{{{i}}}+1}}", f"1+\\sqrt{{{i}}}"))
    source.write_text("\n".join(lines) + "\n")
    done = run_cli(str(source), "-j", "2", "--no-progress")
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["id"] for r in records] == [f"item-{i}" for i in range(300)]
    assert all(r["status"] == "correct" for r in records), [r for r in records if r["status"] != "correct"][:3]


def test_cli_missing_input_is_one_clear_line(tmp_path):
    done = run_cli(str(tmp_path / "nowhere.jsonl"))
    assert done.returncode == 2
    assert "nowhere.jsonl" in done.stderr and "Traceback" not in done.stderr


def test_score_jsonl_in_process_matches_score_batch(tmp_path):
    items = [{"id": i, "verifier": "math", "completion": f"Final answer: {i % 7}", "answer": "3"} for i in range(40)]
    source = tmp_path / "in.jsonl"
    write_jsonl(source, items)
    out = tmp_path / "out.jsonl"
    assert score_cli.score_jsonl(source, out, workers=2, progress=False) == 0
    from_file = [(r["id"], r["status"], r["reward"]) for r in read_jsonl(out)]
    from_batch = [(v.id, v.status.value, v.reward) for v in batch.score_batch(items, workers=2)]
    assert from_file == from_batch
    assert [status for _, status, _ in from_file].count("correct") == sum(1 for i in range(40) if i % 7 == 3)


def test_score_batch_takes_models_dicts_and_json_and_isolates_invalid_ones():
    raws = [
        MathItem(id="model", completion="\\boxed{5}", answer="5"),
        {"id": "dict", "verifier": "math", "completion": "\\boxed{6}", "answer": "6"},
        math_line("json", "\\boxed{7}", "8"),
        {"id": "bad", "verifier": "math", "completion": "\\boxed{6}"},
        "[1, 2",
        {"id": "tolerance", "verifier": "math", "completion": "1", "answer": "1", "rel_tol": 5},
    ]
    verdicts = batch.score_batch(raws, workers=2)
    assert [v.id for v in verdicts] == ["model", "dict", "json", "bad", None, "tolerance"]
    assert [v.status for v in verdicts[:3]] == [Status.correct, Status.correct, Status.incorrect]
    assert verdicts[3].status is Status.error and "answer: Field required" in verdicts[3].reason
    assert verdicts[4].status is Status.error and "invalid JSON" in verdicts[4].reason
    assert verdicts[5].status is Status.error and "rel_tol" in verdicts[5].reason


def test_score_batch_rejects_a_worker_count_below_one():
    with pytest.raises(ValueError, match="at least 1"):
        batch.score_batch([], workers=0)


# A scorer that raises, registered in place of the math scorer for one test (scored in this process).
def exploding_scorer(item):
    raise ZeroDivisionError("scorer bug")


def test_a_raising_scorer_costs_only_its_item(monkeypatch):
    kind = registry.KINDS["math"]
    monkeypatch.setitem(
        registry.KINDS,
        "math",
        registry.VerifierKind(kind.name, kind.item_model, f"{__name__}:exploding_scorer", kind.summary),
    )
    verdict = batch.score_one({"id": "x", "verifier": "math", "completion": "1", "answer": "1"})
    assert verdict.status is Status.error and verdict.id == "x"
    assert "ZeroDivisionError: scorer bug" in verdict.reason


# Chunk functions for the dispatcher: one entry kills its worker, another hangs.
def doubled_or_die(entries):
    if 13 in entries:
        os._exit(9)
    if 29 in entries:
        import time

        time.sleep(60)
    return [2 * e for e in entries]


def test_a_worker_dying_or_hanging_on_one_entry_costs_only_that_entry(monkeypatch):
    monkeypatch.setattr(batch, "CHUNK_GUARD_BASE_S", 1.0)
    monkeypatch.setattr(batch, "CHUNK_GUARD_PER_ITEM_S", 0.1)
    monkeypatch.setattr(batch, "ITEM_GUARD_S", 2.0)
    results = [
        r
        for part in batch.map_chunks(
            doubled_or_die, lambda entry, exc: (entry, f"{type(exc).__name__}"), range(40), workers=2, chunk=8
        )
        for r in part
    ]
    assert len(results) == 40
    for entry, result in enumerate(results):
        if entry == 13:
            assert result[0] == 13 and "WorkerCrashed" in result[1]
        elif entry == 29:
            assert result[0] == 29 and "BudgetExceeded" in result[1]
        else:
            assert result == 2 * entry


REWARD_SPEC = {
    "components": [
        {"name": "correct", "weight": 1.0},
        {"name": "format", "verifier": "format", "weight": 0.25, "gate": True, "params": {"tags": ["think", "answer"]}},
    ]
}


def test_cli_reward_spec_scores_every_item_with_its_components(tmp_path):
    # The service's composite reward from the command line: correctness plus a gated format component.
    source, spec, out = tmp_path / "in.jsonl", tmp_path / "reward.json", tmp_path / "out.jsonl"
    source.write_text(
        "\n".join(
            [
                math_line("right-formatted", "<think>6*7</think><answer>\\boxed{42}</answer>", "42"),
                math_line("right-unformatted", "\\boxed{42}", "42"),
                math_line("wrong-formatted", "<think>6*6</think><answer>\\boxed{36}</answer>", "42"),
            ]
        )
        + "\n"
    )
    spec.write_text(json.dumps(REWARD_SPEC))
    done = run_cli(str(source), "-o", str(out), "-j", "1", "--reward", str(spec))
    assert done.returncode == 0, done.stderr
    records = {r["id"]: r for r in read_jsonl(out)}
    assert records["right-formatted"]["reward"] == 1.0
    assert records["right-formatted"]["components"] == {"correct": 1.0, "format": 1.0}
    assert records["right-unformatted"]["reward"] == 0.0  # the format gate zeroes the total
    assert records["right-unformatted"]["components"]["correct"] == 1.0
    assert records["wrong-formatted"]["reward"] == pytest.approx(0.25 / 1.25)
    # the same spec through score_batch gives the same rewards
    verdicts = batch.score_batch(read_jsonl(source), workers=1, reward=RewardSpec.model_validate(REWARD_SPEC))
    assert [v.reward for v in verdicts] == [records[k]["reward"] for k in records]


@pytest.mark.parametrize(
    "spec_text, expected",
    [
        ("{not json", "bad reward spec"),
        (json.dumps({"components": []}), "components"),
        (json.dumps({"components": [{"name": "x", "verifier": "poetry"}]}), "poetry"),
        (json.dumps({"components": [{"name": "a"}, {"name": "a"}]}), "unique"),
    ],
)
def test_cli_bad_reward_spec_is_one_clear_line_and_exit_2(tmp_path, spec_text, expected):
    source, spec = tmp_path / "in.jsonl", tmp_path / "reward.json"
    source.write_text(math_line("a", "\\boxed{1}", "1") + "\n")
    spec.write_text(spec_text)
    done = run_cli(str(source), "--reward", str(spec))
    assert done.returncode == 2 and done.stdout == ""
    assert expected in done.stderr and "Traceback" not in done.stderr


def test_cli_missing_reward_spec_file(tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_text(math_line("a", "\\boxed{1}", "1") + "\n")
    done = run_cli(str(source), "--reward", str(tmp_path / "nope.json"))
    assert done.returncode == 2 and "cannot read the reward spec" in done.stderr


# -- --compare: the drift between two runs ---------------------------------------------------------------------------


def _old_record(item_id, status, reward, version="math@1"):
    return json.dumps(
        {
            "id": item_id,
            "reward": reward,
            "status": status,
            "extracted": None,
            "reason": "",
            "verifier_version": version,
        }
    )


def test_compare_reports_every_item_whose_verdict_changed_keyed_by_id(tmp_path, capsys):
    from groupscore.cli import main

    source, old, out, changes = (tmp_path / n for n in ("in.jsonl", "old.jsonl", "out.jsonl", "changes.jsonl"))
    source.write_text(
        "\n".join(
            [
                math_line("same", "\\boxed{42}", "42"),
                math_line("fixed", "\\boxed{7}", "7"),
                math_line("broke", "\\boxed{3}", "4"),
                math_line("new", "\\boxed{1}", "1"),
            ]
        )
        + "\n"
    )
    # An earlier run, in another order, by an older version: "fixed" was wrong then, "broke" was right.
    old.write_text(
        "\n".join(
            [
                _old_record("broke", "correct", 1.0),
                _old_record("same", "correct", 1.0),
                _old_record("fixed", "incorrect", 0.0),
                _old_record("gone", "correct", 1.0),
            ]
        )
        + "\n"
    )
    assert (
        main(
            [
                "score",
                str(source),
                "-o",
                str(out),
                "-j",
                "1",
                "--no-progress",
                "--compare",
                str(old),
                "--compare-out",
                str(changes),
            ]
        )
        == 0
    )
    report = capsys.readouterr().err
    version = f"math@{registry.VERSIONS['math']}"
    assert f"fixed  incorrect 0 [math@1] -> correct 1 [{version}]" in report
    assert f"broke  correct 1 [math@1] -> incorrect 0 [{version}]" in report
    assert "same " not in report.split("(old -> new):")[1].split("only in")[0]
    assert "only in the old run: gone" in report and "only in this run: new" in report
    assert f"2 of 3 matched items changed verdict (math@1 -> {version}: 2)" in report
    assert [json.loads(line)["id"] for line in changes.read_text().splitlines()] == ["fixed", "broke"]
    assert [r["id"] for r in read_jsonl(out)] == ["same", "fixed", "broke", "new"]  # scoring output as usual


def test_compare_matches_repeated_and_missing_ids_in_order(tmp_path, capsys):
    from groupscore.compare import compare

    old = [
        {"id": 1, "reward": 1.0, "status": "correct"},
        {"id": 1, "reward": 0.0, "status": "incorrect"},
        {"reward": 0.0, "status": "error"},
        {"id": "1", "reward": 0.0, "status": "incorrect"},
    ]
    new = [
        {"id": 1, "reward": 1.0, "status": "correct"},
        {"id": 1, "reward": 1.0, "status": "correct"},
        {"reward": 0.0, "status": "no_answer"},
        {"id": "1", "reward": 0.0, "status": "incorrect"},
    ]
    drift = compare(old, new)
    assert drift.compared == 4 and not drift.only_old and not drift.only_new
    assert [(c.key, c.old["status"], c.new["status"]) for c in drift.changed] == [
        ((1, 1), "incorrect", "correct"),
        ((None, 0), "error", "no_answer"),
    ]
    partial = compare(
        [{"id": "a", "reward": 0.5, "status": "partial"}], [{"id": "a", "reward": 0.75, "status": "partial"}]
    )
    assert len(partial.changed) == 1  # a reward change alone is a change


def test_compare_prints_the_records_on_stdout_when_no_output_is_named(tmp_path):
    source, old = tmp_path / "in.jsonl", tmp_path / "old.jsonl"
    source.write_text(math_line("a", "\\boxed{2}", "2") + "\n")
    old.write_text(_old_record("a", "incorrect", 0.0) + "\n")
    done = run_cli(str(source), "-j", "1", "--no-progress", "--compare", str(old))
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["id"] for line in done.stdout.splitlines()] == ["a"]
    assert "1 of 1 matched items changed verdict" in done.stderr


@pytest.mark.parametrize(
    "text, expected", [("{not json\n", "old.jsonl:1: not JSON"), ('{"id": 1}\n', "old.jsonl:1: not a verdict record")]
)
def test_compare_with_a_bad_old_file_is_one_line_and_scores_nothing(tmp_path, text, expected):
    source, old, out = tmp_path / "in.jsonl", tmp_path / "old.jsonl", tmp_path / "out.jsonl"
    source.write_text(math_line("a", "\\boxed{2}", "2") + "\n")
    old.write_text(text)
    done = run_cli(str(source), "-o", str(out), "--compare", str(old))
    assert done.returncode == 2 and expected in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_an_option_of_another_command_is_named_as_such_not_suggested_back():
    """`train --run-dir` (demo's option): the hint says whose option it is, never "did you mean --run-dir?"."""
    result = groupscore("train", "train/demo.yaml", "--run-dir", "/tmp/x")
    assert result.returncode == 2
    last = result.stderr.strip().splitlines()[-1]
    assert "did you mean --run-dir" not in last
    assert last.endswith("(--run-dir is an option of groupscore demo only)")
    misspelt = groupscore("train", "train/demo.yaml", "--dry-runn")
    assert misspelt.stderr.strip().endswith("(did you mean --dry-run?)")
