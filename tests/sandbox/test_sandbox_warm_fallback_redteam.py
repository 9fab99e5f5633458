"""Red team of the warm path's final shape: the nsjail rerun of a warm run whose jail could not be
set up (`never_started`), the template given up after two such failures in a row, the program's process joining its
cgroup slot itself (B, the run's init, stays out), and R, the template's fork that reaps an as_init run's B and sends
its "reaped" report.

A GRPO policy would want: a second try through nsjail for a program that has already run (a nondeterministic answer
drawn twice), a sandbox error instead of its own failing verdict, a slot that holds less than its processes (more
memory or processes than through nsjail), group-mates' runs failed or pushed onto the slow path (the template given
up), a forged report. Each test pins the secure outcome. What held: no program that has run can make its
run a `never_started` one or a sandbox error, every process it makes is in its slot, tmpfs and memfd OOMs, forks and
memory are nsjail's, hostile group-mates push no run onto nsjail. Holes: SysV shared memory a run left shrinking the
next run in its slot (both paths; fixed), two verdicts that differed (a zip-archive script, bytecode under a source
name; fixed, see each test), SysV message queues a run left (kernel memory) still charged to its slot when it is
reused (fixed: they and semaphores fail with ENOSYS), and a passing fork shortage turning warm runs off for good
(fixed: a shortage never counts toward giving up). One file: the fallback's red-team record, read together.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from helpers import host_pids_with, warm_then_nsjail

from groupscore.sandbox import Limits, RunResult, RunStatus, run, warm
from groupscore.sandbox import settings as sandbox_settings
from groupscore.sandbox.toolchains import toolchain

pytestmark = [
    pytest.mark.usefixtures("jail_available"),
    pytest.mark.skipif(
        os.geteuid() != 0, reason="warm runs need root (a host id per run); unprivileged runs use nsjail"
    ),
]

LIMITS = Limits(wall_time_s=6, memory_mb=96, cpu_time_s=3, max_processes=16, tmpfs_mb=128, max_file_bytes=300 << 20)
HEAD = "import sys as _s\nprint('WARM' if 'template' in ' '.join(_s.orig_argv) else 'COLD', {token!r}, flush=True)\n"


@pytest.fixture(autouse=True)
def _warm_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GROUPSCORE_SANDBOX_WARM", raising=False)
    sandbox_settings.reload()
    for as_init in (False, True):  # both templates up before no_nsjail is in force (the availability probe is nsjail)
        probe = _run("pass\n", as_init=as_init)
        if not probe.stdout.startswith("WARM"):
            pytest.skip(f"warm Python runs are not available here: {warm.note()}")


def _run(program: str, as_init: bool = False, token: str = "", **kw) -> RunResult:
    """`program` run warm when it can be: as the code verifier's call runner is (-S, the jail's pid 1) with as_init,
    else as a plain script. Its first line says which path ran it, and `token`."""
    kw.setdefault("limits", LIMITS)
    argv = [toolchain("python").executable, "-S", "-B", "main.py"] if as_init else None
    return run({"main.py": HEAD.format(token=token) + program}, argv, as_init=as_init, **kw)


def _templates() -> list[warm.Template]:
    return [t for t in warm._TEMPLATES.values() if t.alive()]


# Programs that try to pass for a run whose setup failed (and so get a second try through nsjail), or for a sandbox
# error (a masked infra_error instead of their own failing verdict), after their first line has run. Each ends with
# a status of its own choosing where it can: 3.
HOSTILE = {
    # B's and R's reports are JSON on a socket: write one, and the setup pipe's text, on every fd the program holds.
    "forged_reports": """
import json, os
for msg in (json.dumps({'setup_error': 'x'}), json.dumps({'reaped': True, 'exit': 0, 'signal': None}), 'run setup: x'):
    for fd in range(3, 1024):
        try:
            os.write(fd, msg.encode())
        except OSError:
            pass
print('{"setup_error": "OSError: forged"}', flush=True)
os._exit(3)
""",
    # The run's init, the reaper and the template, as far as a signal reaches.
    "signals_everywhere": """
import os, signal
for pid in {1, os.getppid()} - {os.getpid()}:
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except OSError:
            pass
try:
    os.kill(-1, signal.SIGKILL)
except OSError:
    pass
os._exit(3)
""",
    "no_stdio_then_127": "import os\nfor fd in range(3):\n    os.close(fd)\nos._exit(127)\n",
    "forkbomb_then_leave": """
import os, time
while True:
    try:
        if os.fork() == 0:
            os.setsid()
            time.sleep(60)
            os._exit(0)
    except OSError:
        break
os._exit(3)
""",
    "memory_hog": "keep = []\nwhile True:\n    keep.append(bytearray(1 << 20))\n",
    "tmpfs_and_memfd_full": """
import contextlib
import os
import re
fd = os.memfd_create('m')
with open('/work/fill', 'wb') as fh:
    for target in (fh.fileno(), fd):
        try:
            while True:
                os.write(target, b'x' * (1 << 20))
        except OSError:
            pass
os._exit(3)
""",
}
EXPECTED = {
    "forged_reports": (RunStatus.RUNTIME_ERROR, 3),
    "signals_everywhere": (RunStatus.RUNTIME_ERROR, 3),
    "no_stdio_then_127": (RunStatus.RUNTIME_ERROR, 127),
    "forkbomb_then_leave": (RunStatus.RUNTIME_ERROR, 3),
    "memory_hog": (RunStatus.MEMORY_LIMIT, None),
    "tmpfs_and_memfd_full": (RunStatus.MEMORY_LIMIT, None),
}


@pytest.mark.usefixtures("no_nsjail")
@pytest.mark.parametrize("as_init", [False, True], ids=["pid2", "as_init"])
@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_program_that_has_run_never_gets_a_second_try(name: str, as_init: bool) -> None:
    """Once the program's first line has run, nothing it does makes its run a `never_started` one (rerun through
    nsjail: no_nsjail fails the test on any nsjail start) nor a sandbox error: its verdict is its own, told once, and
    the template counts it as a setup that worked."""
    token = secrets.token_hex(8)
    r = _run(HOSTILE[name], as_init=as_init, token=token)
    status, code = EXPECTED[name]
    assert r.stdout.startswith(f"WARM {token}\n") and r.stdout.count(token) == 1, r
    assert r.status is status, r
    if code is not None:
        assert r.exit_code == code, r
    assert all(t.failed_starts == 0 for t in _templates())


def test_every_process_of_the_program_is_in_its_slot_and_the_init_is_not() -> None:
    """C joins the slot itself now: a process the program forks (here one that execs, so the host can find it by
    its argv) is in the run's memory and pids slot, from birth; B, outside, is no part of what the run may use."""
    found: dict[str, str] = {}
    markers = {as_init: secrets.token_hex(8) for as_init in (False, True)}

    def watch(marker: str) -> None:
        end = time.monotonic() + 5
        while time.monotonic() < end and marker not in found:
            for pid in host_pids_with(marker):
                try:
                    found[marker] = Path(f"/proc/{pid}/cgroup").read_text()
                except OSError:
                    pass
            time.sleep(0.02)

    for as_init, marker in markers.items():
        program = (
            "import os, sys, time\nif os.fork() == 0:\n"
            f"    os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(3)', '{marker}'])\n"
            "time.sleep(1.5)\nos._exit(0)\n"
        )
        watcher = threading.Thread(target=watch, args=(marker,))
        watcher.start()
        r = _run(program, as_init=as_init)
        watcher.join()
        assert r.stdout.startswith("WARM") and r.status is RunStatus.OK, r
    own = Path("/proc/self/cgroup").read_text()
    for marker in markers.values():
        lines = {ln.split(":")[1]: ln.split(":", 2)[2] for ln in found[marker].splitlines()}
        mine = {ln.split(":")[1]: ln.split(":", 2)[2] for ln in own.splitlines()}
        slotted = [c for c in ("memory", "pids", "") if c in lines and "/slot-" in lines[c]]
        assert slotted and all(lines[c] != mine.get(c) for c in slotted), (found[marker], own)


@pytest.mark.parametrize(
    "fill",
    [
        "fh = open('/work/fill', 'wb')\nwrite = lambda: fh.write(b'x' * (1 << 20))\n",
        "import os\nfd = os.memfd_create('m')\nwrite = lambda: os.write(fd, b'x' * (1 << 20))\n",
        "fh = open('/work/fill', 'wb')\nfor _ in range(40):\n    fh.write(b'x' * (1 << 20))\n"
        "keep = []\nwrite = lambda: keep.append(bytearray(1 << 20))\n",
    ],
    ids=["tmpfs", "memfd", "tmpfs_then_heap"],
)
def test_memory_that_no_process_holds_ooms_as_through_nsjail(fill: str, through_nsjail) -> None:
    """tmpfs and memfd pages count in the slot but in no process's RSS; with B out of the slot the OOM killer can only
    pick the program's processes. Filling them until the cgroup OOMs is a memory limit both ways, after about as many
    MiB (warm, the started interpreter's pages are the template's: a few MiB more, no more than that)."""
    program = fill + "n = 0\nwhile True:\n    write()\n    n += 1\n    print(n, flush=True)\n"
    limits = LIMITS.model_copy(update={"memory_mb": 64, "tmpfs_mb": 200})
    hot = _run(program, limits=limits)
    with through_nsjail:
        cold = _run(program, limits=limits)
    assert hot.stdout.startswith("WARM") and cold.stdout.startswith("COLD"), (hot, cold)
    assert hot.status is cold.status is RunStatus.MEMORY_LIMIT, (hot, cold)
    got = [int(r.stdout.split()[-1]) for r in (hot, cold)]
    assert 10 < got[1] < 64 and abs(got[0] - got[1]) <= 6, got


@pytest.mark.usefixtures("no_nsjail")
def test_hostile_group_mates_never_push_the_others_onto_nsjail() -> None:
    """A group of hostile runs at once (fork bombs that leave, memory and tmpfs hogs, signal storms, forged reports),
    pid 2 and pid 1, beside clean runs: no run falls back (no_nsjail), no setup fails, the templates are the same
    processes after, none given up. Giving the template up takes two setups in a row that fail before the program's
    first line; no program can make one fail (what it may change, it changes after its own setup)."""
    before = sorted(t.proc.pid for t in _templates())
    jobs = [(name, as_init) for name in sorted(HOSTILE) for as_init in (False, True)] * 2
    clean = "print(sum(range(10)))\n"
    errors: list[str] = []

    def one(job: tuple[str, bool]) -> list[RunResult]:
        name, as_init = job
        try:
            return [_run(HOSTILE[name], as_init=as_init), _run(clean, as_init=not as_init)]
        except BaseException as exc:  # no_nsjail's AssertionError, raised in a worker thread
            errors.append(f"{name}: {exc}")
            return []

    start = time.monotonic()
    with ThreadPoolExecutor(6) as pool:
        results = [r for pair in pool.map(one, jobs) for r in pair]
    elapsed = time.monotonic() - start
    assert not errors, errors
    assert all(r.stdout.startswith("WARM") and r.status is not RunStatus.SANDBOX_ERROR for r in results), results
    assert all(r.stdout.endswith("\n45\n") and r.status is RunStatus.OK for r in results[1::2]), results[1::2]
    assert not warm._BROKEN and sorted(t.proc.pid for t in _templates()) == before, (warm._BROKEN, before)
    assert all(t.failed_starts == 0 for t in _templates())
    assert elapsed < 40, elapsed


def test_no_reaper_or_init_outlives_its_run() -> None:
    """R (an as_init run's reaper) and B (a pid-2 run's init) are outside the slot, so the slot's kill does not end
    them: each must end with its run. After a batch of both kinds, hostile ones among them, the templates' only
    processes are the templates (R's zombie is reaped within the template's one-second loop)."""
    for as_init in (False, True):
        for name in ("forkbomb_then_leave", "signals_everywhere"):
            _run(HOSTILE[name], as_init=as_init)

    def kids() -> dict[int, list[str]]:
        out = {}
        for t in _templates():
            nsjail_kids = Path(f"/proc/{t.proc.pid}/task/{t.proc.pid}/children").read_text().split()
            inner = nsjail_kids[0]  # the template's interpreter, nsjail's one child
            out[t.proc.pid] = Path(f"/proc/{inner}/task/{inner}/children").read_text().split()
        return out

    deadline = time.monotonic() + 3
    while any(kids().values()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(kids().values()), kids()


def test_a_script_that_is_a_zip_archive_runs_as_the_interpreter_runs_it(through_nsjail) -> None:
    """A hole the tests found (a verdict that differs), fixed with this test: CPython runs a script file that is a zip archive (by its
    content, whatever its name: an end-of-directory record near its end) as a zip application, its __main__.py; the
    template compiled the file as source. A text-only polyglot (ASCII: a model can write it) got RUNTIME_ERROR warm
    (NUL bytes in source) and OK through nsjail. Such a script now goes through nsjail (warm.warm_argv)."""
    import io
    import zipfile

    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as z:
        z.writestr(zipfile.ZipInfo("__main__.py", date_time=(1980, 1, 1, 0, 0, 0)), "print('from the zip')\n")
    # Bytes above 0x7f (a CRC, file attributes) zeroed: zipimport checks neither, and the file stays ASCII text.
    text = "print('from the source')\n'''\n" + bytes(b if b < 0x80 else 0 for b in archive.getvalue()).decode()
    hot, cold = warm_then_nsjail(lambda: run({"main.py": text}, limits=LIMITS), through_nsjail)
    assert cold.status is RunStatus.OK and cold.stdout == "from the zip\n", cold
    assert (hot.status, hot.stdout) == (cold.status, cold.stdout), hot


def test_bytecode_under_a_source_name_runs_as_the_interpreter_runs_it(through_nsjail) -> None:
    """A hole the tests found (a verdict that differs), fixed with this test: CPython runs a script as bytecode when its first two bytes
    are its magic number's, whatever the name (maybe_pyc_file); the template did so for a .pyc name only, so a main.py
    of bytecode (bytes files from a caller: UTF-8 text cannot start with those two bytes) failed warm and ran through
    nsjail. The template now tells bytecode as the interpreter does."""
    import subprocess

    tool = toolchain("python").executable
    dump = "import importlib.util, marshal, sys; sys.stdout.buffer.write(importlib.util.MAGIC_NUMBER + bytes(12) + "
    dump += "marshal.dumps(compile('print(\"bytecode ran\")', 'main.py', 'exec')))"
    data = subprocess.run([tool, "-c", dump], capture_output=True, check=True).stdout
    hot, cold = warm_then_nsjail(lambda: run({"main.py": data}, limits=LIMITS), through_nsjail)
    assert (cold.status, cold.stdout) == (RunStatus.OK, "bytecode ran\n"), cold
    assert (hot.status, hot.stdout) == (cold.status, cold.stdout), hot


PIDS_ROOT = Path("/sys/fs/cgroup/pids")


@pytest.mark.skipif(not (PIDS_ROOT / "cgroup.procs").exists(), reason="needs the v1 pids hierarchy to starve a fork")
def test_a_passing_fork_shortage_does_not_turn_warm_runs_off_for_good(monkeypatch: pytest.MonkeyPatch) -> None:
    """A hole the tests found (performance DoS, low), fixed with this test: two fork failures in a row in the template (EAGAIN: the
    worker's pids or memory cgroup full, as group-mates' fork bombs and hogs can make it where slots nest under a
    container's limits) gave the template up for the process's life (warm._BROKEN), though the shortage passes. Now a
    shortage (EAGAIN, ENOMEM) never counts toward giving up. Here the template's process is alone in a pids cgroup of
    its own, limited to itself: its forks fail as they would with the worker's cgroup full. Those runs rerun through
    nsjail (nothing of them ran); once the shortage has passed, Python runs go warm again."""
    monkeypatch.setattr(warm, "_BROKEN", {})
    template = next(t for t in _templates() if t.site_flag == "-s")
    inner = int(Path(f"/proc/{template.proc.pid}/task/{template.proc.pid}/children").read_text().split()[0])
    starved = PIDS_ROOT / f"groupscore-redteam-{os.getpid()}"
    starved.mkdir()
    try:
        (starved / "pids.max").write_text("1")
        (starved / "cgroup.procs").write_text(str(inner))
        during = [_run("pass\n") for _ in range(2)]
    finally:
        (PIDS_ROOT / "cgroup.procs").write_text(str(inner))
        starved.rmdir()
    assert all(r.status is RunStatus.OK and r.stdout.startswith("COLD") for r in during), during  # the rerun holds
    after = _run("pass\n")
    assert after.stdout.startswith("WARM"), (after, warm.note())


LEAVE_SHM = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
segment = libc.shmget(0, 100 << 20, 0o1600)  # IPC_PRIVATE, never removed: it lives as long as the IPC namespace
ctypes.memset(libc.shmat(segment, None, 0), 1, 100 << 20)
print('left', segment >= 0, flush=True)
"""


@pytest.mark.parametrize("path", ["warm", "nsjail"])
def test_shared_memory_a_run_leaves_does_not_shrink_the_next_run_in_its_slot(path: str, through_nsjail) -> None:
    """A hole the tests found (a group-mate's verdict, both paths; it pays in GRPO, whose advantage is relative to the group), fixed
    with this test: a SysV segment a run creates and never removes lives until its IPC namespace is freed, which the
    kernel does in a work item after the run's last process, so still charged to the run's (v1, reused) slot when the
    slot was released: 100 MiB charged there, the next run in that slot (128 MiB) got MEMORY_LIMIT for 90 MiB (1 in 3
    warm here). The slot now waits, as for survivors, until its shared memory is below a MiB before it is reused."""
    from groupscore.sandbox import harness

    limits = LIMITS.model_copy(update={"memory_mb": 128})
    heap = "keep = [bytearray(1 << 20) for _ in range(90)]\nprint('got', len(keep))\n"
    with through_nsjail if path == "nsjail" else contextlib.nullcontext():
        for _ in range(3):
            left = _run(LEAVE_SHM, limits=limits)
            assert left.status is RunStatus.OK and "left True" in left.stdout, left
            free = [s for s in harness.slot_pool()._free if s.support.version == "v1" and "memory" in s.dirs]
            shmem = [
                int(re.search(r"^shmem (\d+)", (s.dirs["memory"] / "memory.stat").read_text(), re.M)[1]) for s in free
            ]
            assert all(b < 1 << 20 for b in shmem), shmem
            after = _run(heap, limits=limits)
            assert after.status is RunStatus.OK and after.stdout.endswith("got 90\n"), after


LEAVE_MSG_QUEUES = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
message, queued = ctypes.create_string_buffer((1).to_bytes(8, 'little') + bytes(8000)), 0
while queued < 100 << 20 and (queue := libc.msgget(0, 0o1600)) >= 0:  # IPC_PRIVATE queues, never removed
    while queued < 100 << 20 and libc.msgsnd(queue, message, 8000, 0o4000) == 0:  # IPC_NOWAIT
        queued += 8000
print('queued', queued >> 20, flush=True)
"""


@pytest.mark.parametrize("path", ["warm", "nsjail"])
def test_message_queues_a_run_leaves_are_gone_before_its_slot_is_reused(path: str, through_nsjail) -> None:
    """A hole the tests found (a group-mate's memory, both paths; racy, so low), fixed with this test: SysV message queues a run leaves
    (kernel memory, not shmem) stayed charged to its v1 slot until its IPC namespace was freed after the run: the slot
    was released with ~100 MiB charged. Waiting on kernel memory as on shmem would wait out reclaimable slab (negative
    dentries) too; instead SysV message queues and semaphores fail with ENOSYS in the jail (seccomp.DENIED_ENOSYS)."""
    from groupscore.sandbox import harness

    with through_nsjail if path == "nsjail" else contextlib.nullcontext():
        left = _run(LEAVE_MSG_QUEUES, limits=LIMITS.model_copy(update={"memory_mb": 128}))
    assert left.status is RunStatus.OK and "queued 0" in left.stdout, left
    free = [s.dirs["memory"] / "memory.kmem.usage_in_bytes" for s in harness.slot_pool()._free if "memory" in s.dirs]
    kmem = [int(f.read_text()) for f in free if f.exists()]
    assert kmem and all(b < 8 << 20 for b in kmem), kmem
