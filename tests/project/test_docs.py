"""The README and the docs/ pages say what is true: the README's five-minute tour runs as written (but for the
service's address), its links lead somewhere, it gives each make target's time, the other kinds' examples score as
their page says, and docs/limits.md links every page that states a known limit.

The site itself (every page in mkdocs.yml's nav, no broken link or anchor between pages) is `make lint`'s
`mkdocs build --strict`. The pages' other commands are tested where they were when the README held them: the
trainers' examples (docs/integrations.md) by tests/client/test_client_dist.py, the settings table
(docs/service/settings.md) by tests/service/test_settings.py, every `groupscore check` command by
tests/train/test_train_first_use.py, the layout table (README) by tests/project/test_layout.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from helpers import groupscore, read_jsonl

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
DEFAULT_URL = "http://127.0.0.1:8000"
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```$", re.M | re.S)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
# What a page says when it states a known limit or something left; docs/limits.md must link every such page.
LIMIT_MARKERS = re.compile(r"Left by design|Left open|known, not closed|Given up|unverified|not verified|not run here")


def _section(text: str, heading: str) -> str:
    return text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def _tour_blocks() -> list[tuple[str, str]]:
    return BLOCK.findall(_section(README.read_text(encoding="utf-8"), "A five-minute tour"))


def _env_with_groupscore() -> dict[str, str]:
    """The environment with this venv's `groupscore` first on PATH, as `make` leaves it."""
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def test_the_readme_tour_runs_as_written(tmp_path):
    from groupscore.service.embedded import start_embedded

    (lang0, activate), (lang1, score), (lang2, serve), (lang3, trl), (lang4, trl_env) = _tour_blocks()
    assert (lang0, lang1, lang2, lang3, lang4) == ("sh", "sh", "sh", "python", "python")

    # 0-1. Score a file: the block as it stands, in an empty folder, after the activation line run in the checkout
    # (a PATH without the venv, as a new shell has it).
    assert activate.startswith(". .venv/bin/activate")
    venv_bin = str(Path(sys.executable).parent)
    bare = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p != venv_bin)
    assert Path(venv_bin) == ROOT / ".venv" / "bin", "the tests run from the venv `make` builds"
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", f"cd {ROOT}\n{activate}\ncd {tmp_path}\n{score}"],
        env={**os.environ, "PATH": bare},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    verdicts = read_jsonl(tmp_path / "verdicts.jsonl")
    assert [(v["id"], v["reward"], v["status"]) for v in verdicts] == [(1, 1.0, "correct"), (2, 0.0, "incorrect")]
    assert "# item 1: reward 1.0, correct; item 2: 0.0" in score

    # 2. The service: the block's first line starts it (an embedded one on a free port stands in); its curl, as written.
    serve_line, _, curl = serve.partition("\n")
    assert serve_line.startswith("groupscore serve &") and DEFAULT_URL in curl
    with start_embedded(workers=1) as url:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", curl.replace(DEFAULT_URL, url)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert [r["reward"] for r in json.loads(done.stdout)["results"]] == [1.0]

        # 3. From TRL: the snippet as written, in a fresh interpreter.
        done = subprocess.run(
            [sys.executable, "-c", trl.replace(DEFAULT_URL, url)], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "[1.0]" and "# [1.0]" in trl

        # 4. Environments from TRL: the snippet as written (the task opened and closed once to read its tools).
        done = subprocess.run(
            [sys.executable, "-c", trl_env.replace(DEFAULT_URL, url)], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        tools = "['list_files', 'read_file', 'shell', 'write_file']"
        assert done.stdout.strip() == tools and f"# {tools}" in trl_env


def test_every_local_link_of_the_readme_leads_to_a_file():
    targets = [t for t in LINK.findall(README.read_text(encoding="utf-8")) if "://" not in t and not t.startswith("#")]
    assert targets, "the README links its docs pages"
    missing = [t for t in targets if not (ROOT / t.split("#", 1)[0]).exists()]
    assert missing == []


def test_the_readme_links_every_docs_page():
    linked = {(ROOT / t.split("#", 1)[0]).resolve() for t in LINK.findall(README.read_text(encoding="utf-8"))}
    pages = {p.resolve() for p in DOCS.rglob("*.md")} - {(DOCS / "train-guide.md").resolve()}
    assert sorted(str(p.relative_to(ROOT)) for p in pages - linked) == []


def test_the_readme_gives_each_make_targets_time():
    """`make demo`, `make test`, `make lint`, and `make test-fast` once the Makefile has it."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    targets = [t for t in ("demo", "test", "test-fast", "lint") if re.search(rf"^{re.escape(t)}:", makefile, re.M)]
    setup = _section(README.read_text(encoding="utf-8"), "Set-up: two commands (and a lint)")
    timing = next(p for p in setup.split("\n\n") if p.startswith("How long they take"))
    assert "@" not in timing, "a placeholder is left in the README's timings"
    for target in targets:
        assert f"`make {target}`" in timing, f"the README gives no time for `make {target}`"


def test_the_other_kinds_examples_score_as_their_page_says(tmp_path):
    page = (DOCS / "verifiers" / "other-kinds.md").read_text(encoding="utf-8")
    (items,) = [body for lang, body in BLOCK.findall(page) if lang == "jsonl"]
    rows = re.findall(r"^\| `([a-z]+-\d)` \| ([0-9.]+) \| `([a-z_]+)` \|", page, re.M)
    source = tmp_path / "kinds.jsonl"
    source.write_text(items, encoding="utf-8")
    done = groupscore("score", str(source), "-o", str(tmp_path / "verdicts.jsonl"), timeout=120)
    assert done.returncode == 0, done.stderr
    scored = [(v["id"], v["reward"], v["status"]) for v in read_jsonl(tmp_path / "verdicts.jsonl")]
    assert scored == [(i, float(reward), status) for i, reward, status in rows]
    assert {kind.split("-")[0] for kind, _, _ in rows} == {"format", "length", "json", "sql"}


def test_the_limits_page_links_every_page_that_states_a_limit():
    limits = DOCS / "limits.md"
    linked = {(limits.parent / t.split("#", 1)[0]).resolve() for t in LINK.findall(limits.read_text(encoding="utf-8"))}
    stating = {p.resolve() for p in DOCS.rglob("*.md") if p != limits and LIMIT_MARKERS.search(p.read_text("utf-8"))}
    assert stating, "the pages state known limits"
    assert sorted(str(p.relative_to(ROOT)) for p in stating - linked) == []
