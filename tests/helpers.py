"""Plain functions that test modules share (fixtures are in conftest.py): a program as a model's fenced answer, JSONL
files, the `groupscore` command in a subprocess, the host's processes a sandboxed run may have left behind, jailed
programs' searches of their own memory and of all they can reach, and a call made warm and then through nsjail."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path


def py(program: str) -> str:
    """`program` as a completion: one fenced Python block."""
    return f"```python\n{program}\n```"


def write_jsonl(path: Path, rows: Iterable[dict]) -> Path:
    """Write one JSON object a line and return the path."""
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def groupscore(*args: str, **kwargs) -> subprocess.CompletedProcess:
    """Run `python -m groupscore ARGS` (text output captured); keyword arguments go to subprocess.run."""
    return subprocess.run([sys.executable, "-m", "groupscore", *args], capture_output=True, text=True, **kwargs)


def host_pids_with(marker: str) -> list[int]:
    """Host processes whose command line carries `marker` (a test passes one in a jailed program's argv)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    found.append(int(entry))
            except OSError:
                pass  # the process ended while we looked
    return found


# Jailed code (prepend it to a program): `readable_memory()` yields each readable mapping of the process in turn, for
# scans that look for data which must not be there (an earlier run's request, the plan a runner read).
READABLE_MEMORY = """
def readable_memory():
    mem = open('/proc/self/mem', 'rb', 0)
    for line in open('/proc/self/maps').read().splitlines():
        span, perms = line.split()[:2]
        start, end = (int(x, 16) for x in span.split('-'))
        if 'r' not in perms or end - start > 1 << 28:
            continue
        try:
            mem.seek(start)
            yield mem.read(end - start)
        except OSError:
            continue
"""


# Jailed code: `search(secret)` reads every file the program can reach for `secret` (the tree but the system dirs, and
# the /proc files, work files and open fds, followed, of every process it can see); the paths holding it, and how many
# files it read.
FIND_SECRET = """
import os, stat
def search(secret):
    found, seen = [], 0
    def look(path):
        nonlocal seen
        try:
            st = os.stat(path)
            if stat.S_ISREG(st.st_mode) and st.st_size < 1 << 22:
                seen += 1
                if secret in open(path, 'rb').read():
                    found.append(path)
        except OSError:
            pass
    for root, dirs, files in os.walk('/', followlinks=False):
        if root.startswith(('/usr', '/lib', '/lib64', '/bin', '/sbin', '/proc')):
            dirs[:] = []
            continue
        for name in files + dirs:
            look(os.path.join(root, name))
    for pid in os.listdir('/proc'):
        for leaf in ('environ', 'cmdline', 'mountinfo', 'cwd/secret.txt', 'root/work/secret.txt', 'root/work/out.txt'):
            look(f'/proc/{pid}/{leaf}')
        try:
            fds = os.listdir(f'/proc/{pid}/fd')
        except OSError:
            fds = []
        for fd in fds:
            look(f'/proc/{pid}/fd/{fd}')
    return found, seen
"""


def warm_then_nsjail(call, through_nsjail):
    """call() on the warm path, then again with every run through nsjail (conftest's `through_nsjail` switch)."""
    first = call()
    with through_nsjail:
        return first, call()


def seen_by_a_verifier(r) -> tuple:
    """What a verifier reads of a sandbox run: the fields a warm run and an nsjail run must agree on."""
    return (r.status, r.exit_code, r.signal, r.stdout, r.stderr, r.files, r.stdout_truncated)
