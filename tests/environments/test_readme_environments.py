"""README's "Environments" example, run as written."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_example_runs_as_written():
    section = README.read_text().split("## Environments", 1)[1].split("\n## ", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    assert out.getvalue().splitlines() == ["content='' is_error=False done=False steps=1", "1.0"]


def test_the_docs_command_lines_run_as_written(tmp_path):
    import os
    import subprocess
    import sys

    docs = (README.parent / "docs" / "environments.md").read_text()
    block = re.search(r"```sh\n(groupscore env list.*?)```", docs, re.S).group(1)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    # each command's exit status is printed after it: `env run` exits with its verdict's (0 solved, 1 not solved)
    traced = "".join(
        f"{line}\necho status=$?\n" if line.startswith("groupscore") else f"{line}\n" for line in block.splitlines()
    )
    done = subprocess.run(
        ["bash", "-c", traced], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True
    )
    statuses = [line for line in done.stdout.splitlines() if line.startswith("status=")]
    # the list, the solved trajectory, and the typed run with nothing typed (judged, not solved)
    assert statuses == ["status=0", "status=0", "status=1"], done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("count-errors\tturns=1")
    verdicts = [line for line in lines if line.startswith('{"id":')]
    assert [v.split('"reward":')[1].split(",")[0] for v in verdicts] == ["1.0", "0.0"]
