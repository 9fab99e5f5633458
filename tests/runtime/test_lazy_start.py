"""The symbolic pool (sympy) starts only for items that need it; `groupscore score` keeps heavy modules out of its own
process; the service still starts it up front. Checked by processes and counters, never by time."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from helpers import write_jsonl

NUMERIC = {"id": "n", "verifier": "math", "completion": "So the answer is \\boxed{42}.", "answer": "42"}
FORMAT = {"id": "f", "verifier": "format", "completion": "<answer>4</answer>", "tags": ["answer"]}
SYMBOLIC = {
    "id": "s",
    "verifier": "math",
    "completion": "\\boxed{\\lfloor 3.5 \\rfloor}",
    "answer": "3",
    "timeout_s": 60,
}  # the fast path cannot decide floor(): sympy does
HEAVY = ("sympy", "latex2sympy2_extended", "fastapi", "uvicorn", "torch", "transformers")

# Pool processes (templates and the workers forked from them all carry the template's command line) at depth 3 or
# more below `root`: depth 1 is the batch pool's template, 2 its workers, 3 a batch worker's own bounded pool (math's
# symbolic step) and 4 that pool's workers.
TEMPLATES = textwrap.dedent("""
    import os

    def templates_below(root, min_depth=3):
        children = {}
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                stat = open(f"/proc/{pid}/stat").read()
                cmdline = open(f"/proc/{pid}/cmdline", "rb").read()
            except OSError:
                continue
            ppid = int(stat.rpartition(")")[2].split()[1])
            children.setdefault(ppid, []).append((int(pid), b"_template_main" in cmdline))
        found, todo = 0, [(root, 0)]
        while todo:
            parent, depth = todo.pop()
            for pid, is_pool in children.get(parent, []):
                found += is_pool and depth + 1 >= min_depth
                todo.append((pid, depth + 1))
        return found
""")


def run_python(code: str) -> list:
    done = subprocess.run(
        [sys.executable, "-c", TEMPLATES + textwrap.dedent(code)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_items_the_fast_path_decides_start_no_symbolic_pool_and_a_symbolic_item_starts_one():
    numeric, symbolic = run_python(f"""
        import json, os
        from groupscore.runtime.batch import score_batch
        verdicts = score_batch([{NUMERIC!r}, {FORMAT!r}], workers=1)
        assert [v.status.value for v in verdicts] == ["correct", "correct"], verdicts
        numeric = templates_below(os.getpid())
        assert score_batch([{SYMBOLIC!r}], workers=1)[0].status.value == "correct"
        print(json.dumps([numeric, templates_below(os.getpid())]))
    """)
    assert numeric == 0  # the batch pool and its worker only: no bounded pool below them, so no sympy anywhere
    assert symbolic >= 1  # the batch worker started its bounded pool for the floor() item


def test_batch_workers_report_no_bounded_pool_and_no_sympy_until_needed():
    before, after = run_python(f"""
        import json
        from groupscore.runtime import batch
        batch.score_batch([{NUMERIC!r}], workers=1)
        pool = batch._batch_pool(1)
        before = pool.run(batch.worker_state, timeout_s=60)
        batch.score_batch([{SYMBOLIC!r}], workers=1)
        print(json.dumps([before, pool.run(batch.worker_state, timeout_s=60)]))
    """)
    assert before == {"bounded_templates_started": 0, "sympy_imported": False}
    assert after["bounded_templates_started"] == 1  # sympy itself lives in that pool's workers, not in the batch worker


def test_cli_process_on_an_empty_file_starts_nothing_and_imports_no_item_models(tmp_path):
    (tmp_path / "empty.jsonl").write_text("")
    started, loaded = run_python(f"""
        import json, os, sys
        from groupscore.cli import main
        from groupscore.bounded import workers
        assert main(["score", {str(tmp_path / "empty.jsonl")!r}, "-o", {str(tmp_path / "out.jsonl")!r}]) == 0
        print(json.dumps([workers.templates_started + templates_below(os.getpid(), min_depth=1),
                          sorted(m for m in ("pydantic", "tqdm", *{HEAVY!r}) if m in sys.modules)]))
    """)
    assert started == 0 and loaded == []


def test_cli_process_scoring_items_imports_no_heavy_module(tmp_path):
    write_jsonl(tmp_path / "in.jsonl", [NUMERIC, FORMAT, SYMBOLIC])
    records, loaded = run_python(f"""
        import json, sys
        from groupscore.cli import main
        assert main(["score", {str(tmp_path / "in.jsonl")!r}, "-o", {str(tmp_path / "out.jsonl")!r}, "-j", "1"]) == 0
        records = [json.loads(line)["status"] for line in open({str(tmp_path / "out.jsonl")!r})]
        print(json.dumps([records, sorted(m for m in ("pydantic", *{HEAVY!r}) if m in sys.modules)]))
    """)
    assert records == ["correct", "correct", "correct"]
    assert loaded == []  # validation and scoring happen in the workers; sympy only in the symbolic pool


def test_service_scoring_process_starts_its_symbolic_pool_at_warm_up():
    before, after, state = run_python("""
        import json
        from groupscore.bounded import workers
        from groupscore.runtime import batch
        from groupscore.runtime.tasks import warm
        before = workers.templates_started
        pid, problems = warm()
        assert not any(problems.values()), problems
        print(json.dumps([before, workers.templates_started, workers.run_bounded(batch.worker_state, timeout_s=60)]))
    """)
    assert (before, after) == (0, 1)
    assert state["sympy_imported"] is True  # the template preloaded it: no request waits for sympy
