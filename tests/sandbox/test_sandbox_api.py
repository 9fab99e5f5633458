"""The public sandbox API: arguments, results, collected files, the compile cache and the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from helpers import groupscore, host_pids_with

from groupscore.sandbox import Limits, RunRequest, RunStatus, harness, run, run_many
from groupscore.sandbox.policy import host_cgroups
from groupscore.sandbox.toolchains import toolchain

QUICK = Limits(wall_time_s=5, memory_mb=256)


def test_result_carries_times_and_memory():
    r = run({"main.py": "x = bytearray(30 << 20)\nx[::4096] = b'1' * len(x[::4096])\nprint('done')"}, limits=QUICK)
    assert r.status is RunStatus.OK and r.ok and r.stdout == "done\n" and r.exit_code == 0 and r.signal is None
    assert 0 < r.wall_time_s < 5 and 0 < r.cpu_time_s < 5
    assert r.peak_memory_mb is not None and r.peak_memory_mb >= 25
    assert r.cgroup


def test_same_program_same_output_across_runs():
    prog = "print(list({'apple', 'banana', 'cherry', 'date', 'elderberry'}))"
    outs = {run({"main.py": prog}, limits=QUICK).stdout for _ in range(3)}
    assert len(outs) == 1  # fixed hash seed: set order is reproducible


def test_collect_returns_written_files_capped_by_the_file_size_limit():
    prog = (
        "import errno\nopen('results.jsonl', 'w').write('{\"a\": 1}\\n')\n"
        "try:\n    open('big.bin', 'wb').write(b'x' * (2 << 20))\nexcept OSError as e:\n"
        "    print(errno.errorcode[e.errno])\n"
    )
    r = run(
        {"main.py": prog},
        collect=["results.jsonl", "big.bin", "never.txt"],
        limits=Limits(wall_time_s=5, memory_mb=256, max_file_bytes=1 << 20),
    )
    assert r.status is RunStatus.OK and r.stdout == "EFBIG\n"
    assert r.files["results.jsonl"] == b'{"a": 1}\n' and r.files["never.txt"] == b""
    assert len(r.files["big.bin"]) == 1 << 20 and r.files_truncated == []


def test_files_can_be_nested_and_binary():
    r = run(
        {
            "main.py": "import pkg.mod\nprint(open('data/blob', 'rb').read()[:3])",
            "pkg/__init__.py": "",
            "pkg/mod.py": "print('mod')",
            "data/blob": b"\x00\x01\x02\xff",
        },
        limits=QUICK,
    )
    assert r.status is RunStatus.OK and r.stdout == "mod\nb'\\x00\\x01\\x02'\n"


@pytest.mark.parametrize("name", ["/etc/passwd", "../up.py", "a/../../b", "", "a//b"])
def test_bad_file_names_are_refused(name):
    with pytest.raises(ValueError, match="bad file name"):
        run({name: "x", "main.py": "pass"}, limits=QUICK)


def test_missing_main_and_unknown_language_are_refused():
    with pytest.raises(ValueError, match="main file"):
        run({"other.py": "pass"}, limits=QUICK)
    with pytest.raises(ValueError, match="unknown language"):
        run({"main.kt": "fun main() {}"}, language="kotlin")


def test_command_runs_any_file_with_arguments_and_text_stdin():
    exe = toolchain("python").executable
    r = run(
        {"tool.py": "import sys\nprint(sys.argv[1:], input())"},
        [exe, "tool.py", "a", "b c"],
        stdin="héllo",
        limits=QUICK,
    )
    assert r.status is RunStatus.OK and r.stdout == "['a', 'b c'] héllo\n"


def test_unknown_command_is_a_runtime_error_not_a_sandbox_error():
    r = run({"main.py": "pass"}, ["/no/such/binary"], limits=QUICK)
    assert r.status is RunStatus.RUNTIME_ERROR and r.exit_code == 127


def test_c_compile_happens_once_for_many_runs():
    src = '#include <stdio.h>\nint main(void){int a; if(scanf("%d",&a)!=1) return 1; printf("%d\\n", a*a); return 0;} /* unique-7731 */\n'
    results = run_many(
        [{"files": {"main.c": src}, "language": "c", "stdin": str(i), "limits": QUICK} for i in range(4)], workers=2
    )
    assert [r.stdout for r in results] == ["0\n", "1\n", "4\n", "9\n"]
    assert sorted(r.compile.cached for r in results) == [False, True, True, True]
    assert all(r.compile.status is RunStatus.OK for r in results)


def test_run_request_model_and_defaults():
    req = RunRequest(files={"main.py": "print(1)"})
    assert req.language == "python" and req.limits == Limits() and req.compile_limits is None
    [r] = run_many([req])
    assert r.stdout == "1\n"


def test_cli_runs_a_file(tmp_path):
    prog = tmp_path / "p.py"
    prog.write_text("print(int(input()) + 1)")
    stdin = tmp_path / "in.txt"
    stdin.write_text("41\n")
    out = groupscore(
        "sandbox", "run", str(prog), "--stdin", str(stdin), "--time-limit", "5", "--memory-mb", "256", timeout=120
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert (data["status"], data["stdout"]) == ("ok", "42\n")


def test_cli_reports_a_failing_program(tmp_path):
    prog = tmp_path / "p.c"
    prog.write_text("int main(void){ return 4; }")
    out = groupscore("sandbox", "run", str(prog), "--language", "c", timeout=120)
    data = json.loads(out.stdout)
    assert out.returncode == 1 and (data["status"], data["exit_code"]) == ("runtime_error", 4)
    assert data["compile"]["status"] == "ok"


def test_run_dir_is_closed_to_other_local_users():
    import os
    import stat as st

    from groupscore.sandbox.workdir import RunDir

    d = RunDir(65534, 65534) if os.geteuid() == 0 else RunDir(os.geteuid(), os.getegid())
    try:
        d.add_input("main.py", b"print(1)")
        d.add_collect("out.txt")
        cfg = d.write("jail.cfg", "x")
        inp, out = d.path / "f1", d.path / "f2"
        for p in (d.path, inp, out, cfg):
            assert os.stat(p).st_mode & st.S_IRWXO == 0, p  # nothing for "others"
        if os.geteuid() == 0:
            assert (os.stat(inp).st_uid, os.stat(inp).st_gid, st.S_IMODE(os.stat(inp).st_mode)) == (0, 65534, 0o640)
            assert (os.stat(out).st_uid, st.S_IMODE(os.stat(out).st_mode)) == (65534, 0o600)
            assert st.S_IMODE(os.stat(cfg).st_mode) == 0o600 and os.stat(cfg).st_uid == 0
    finally:
        d.remove()
    assert not d.path.exists()


def test_collecting_an_input_file_is_refused():
    with pytest.raises(ValueError, match="also input files"):
        run({"main.py": "pass", "out.txt": "x"}, collect=["out.txt"], limits=QUICK)


def test_a_run_whose_cgroup_limits_cannot_be_set_does_not_start(monkeypatch):
    from groupscore.sandbox import SandboxUnavailable
    from groupscore.sandbox.cgroups import Slot

    if harness.slot_pool().support.version is None or harness.slot_pool().broken:
        pytest.skip("no cgroups on this host")

    def refuse(self, memory_bytes, max_pids):
        raise OSError("refused")

    monkeypatch.setattr(Slot, "prepare", refuse)
    with pytest.raises(SandboxUnavailable, match="cannot set cgroup limits"):
        run({"main.py": "print('must not run')"}, limits=QUICK)


def test_as_init_runs_the_program_as_pid_1_and_reports_its_own_exit_code():
    prog = (
        "import os, signal, sys\nprint(os.getpid())\n"
        "os.kill(1, signal.SIGTERM)\nos.kill(1, signal.SIGKILL)\n"  # from inside, the kernel drops both
        "sys.exit(int(sys.argv[1]))\n"
    )
    tool = toolchain("python")
    r = run({"main.py": prog}, [tool.executable, "main.py", "130"], limits=QUICK, as_init=True)
    # 130 is the program's own status: no init shell in between, so not read as "killed by signal 2"
    assert r.status is RunStatus.RUNTIME_ERROR and r.stdout == "1\n" and r.exit_code == 130 and r.signal is None
    shell = run({"main.py": prog}, [tool.executable, "main.py", "0"], limits=QUICK)
    assert shell.status is RunStatus.OK and shell.stdout == "2\n"  # under the init shell the program is pid 2


def test_as_init_program_killed_by_the_wall_clock_leaves_nothing():
    marker = f"as-init-survivor-{uuid.uuid4().hex}"
    prog = "import os, time\nfor _ in range(3):\n    if os.fork() == 0:\n        time.sleep(60)\ntime.sleep(60)\n"
    r = run(
        {"main.py": prog},
        [toolchain("python").executable, "main.py", marker],
        limits=Limits(wall_time_s=1, memory_mb=256),
        as_init=True,
    )
    assert r.status is RunStatus.TIMEOUT and r.wall_time_s < 5
    deadline = time.monotonic() + 5
    while host_pids_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert host_pids_with(marker) == []


v1_only = pytest.mark.skipif(host_cgroups().version != "v1", reason="the slot thread is the v1 path")


@v1_only
def test_v1_runs_start_inside_their_slot_and_the_slot_never_lists_this_process():
    # Born in the slot (no move): the slot's thread is in its tasks, the run is charged there, and this process, which
    # v1 lists because one of its threads is inside, is never among the slot's processes (kill_all would kill it).
    r = run({"main.py": "x = bytearray(40 << 20)\nx[::4096] = b'1' * len(x[::4096])\n"}, limits=QUICK)
    assert r.status is RunStatus.OK and r.peak_memory_mb >= 38
    pool = harness.slot_pool()
    slot = next(s for s in pool._free if s._launcher is not None)
    own_threads = {str(t.native_id) for t in threading.enumerate()}
    for d in slot.dirs.values():
        assert set((d / "tasks").read_text().split()) <= own_threads  # only the slot's thread stays between runs
    assert os.getpid() not in slot.pids() and slot.pids() == []


@v1_only
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_makes_its_own_slots_and_leaves_the_parents_alone():
    # Without the fork hooks the child would reuse the parent's slots, and its exit would run the parent's cleanup:
    # kill_all there lists the parent (its slot thread is inside) and would kill it, ending this test run.
    run({"main.py": "print(1)"}, limits=QUICK)
    parent_pool = harness.slot_pool()
    parent_dirs = {str(d) for s in parent_pool._free for d in s.dirs.values()}
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a run of its own, then what its exit would run (the parent's atexit hook is inherited)
        try:
            os.close(read_end)
            r = run({"main.py": "print(2)"}, limits=QUICK)
            child_dirs = {str(d) for s in harness.slot_pool()._free for d in s.dirs.values()}
            parent_pool.close()
            os.write(write_end, json.dumps([r.stdout, sorted(child_dirs)]).encode())
        finally:
            os._exit(0)  # not sys.exit: this is a copy of the pytest process
    os.close(write_end)
    with os.fdopen(read_end) as fh:
        child_stdout, child_dirs = json.loads(fh.read())
    os.waitpid(pid, 0)
    assert child_stdout == "2\n" and child_dirs and not set(child_dirs) & parent_dirs
    assert all(Path(d).is_dir() for d in parent_dirs)  # the child's exit did not remove the parent's slots
    assert run({"main.py": "print(3)"}, limits=QUICK).stdout == "3\n"


@v1_only
def test_the_memory_cgroup_oom_killer_never_picks_the_harness_through_its_slot_thread(tmp_path):
    # The slot's thread puts this process in the run's memory cgroup. The kernel's memcg OOM scan looks only at
    # thread-group leaders, so a harness far bigger than the run is never the victim: checked with a 400 MB harness
    # (in a child process, so a wrong pick would not take pytest down) against 64 MB runs.
    script = tmp_path / "big_harness.py"
    script.write_text(
        "from groupscore.sandbox import run, Limits\n"
        "ballast = bytearray(400 << 20)\nballast[::4096] = b'x' * len(ballast[::4096])\n"
        "bomb = 'a = []\\nwhile True:\\n    a.append(bytearray(8 << 20)); a[-1][::4096] = b\"x\" * len(a[-1][::4096])\\n'\n"
        "for _ in range(2):\n"
        "    print(run({'main.py': bomb}, limits=Limits(wall_time_s=5, memory_mb=64)).status.value, flush=True)\n"
        "print('harness alive')\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-500:]
    assert done.stdout.split() == ["memory_limit", "memory_limit", "harness", "alive"]
