"""cgroup detection (v1, v2, hybrid, container, none) and the slot life cycle, on fake cgroup trees."""

from __future__ import annotations

from pathlib import Path

import pytest

from groupscore.sandbox.cgroups import CgroupSupport, SlotPool, detect_cgroups

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "sandbox"


def fixture(name: str) -> str:
    return (FIX / name).read_text()


def test_v1_hybrid_host_uses_v1_controllers_below_our_own_cgroup():
    cg = detect_cgroups(fixture("mountinfo_v1_hybrid.txt"), fixture("self_cgroup_v1_hybrid.txt"))
    assert (cg.version, cg.memory, cg.pids) == ("v1", True, True)
    assert cg.roots == {"memory": "/sys/fs/cgroup/memory/process_api/abc123", "pids": "/sys/fs/cgroup/pids"}
    assert cg.describe() == "v1 memory+pids"


def test_v1_in_a_container_maps_the_mount_root():
    cg = detect_cgroups(fixture("mountinfo_container_v1.txt"), fixture("self_cgroup_container_v1.txt"))
    assert cg.version == "v1"
    assert cg.roots == {"memory": "/sys/fs/cgroup/memory", "pids": "/sys/fs/cgroup/pids"}


def test_v1_with_only_memory_says_what_is_missing():
    info = "\n".join(line for line in fixture("mountinfo_v1_hybrid.txt").splitlines() if "pids" not in line)
    cg = detect_cgroups(info, fixture("self_cgroup_v1_hybrid.txt"))
    assert (cg.memory, cg.pids) == (True, False) and "no v1 pids" in cg.describe()


def test_v2_reads_the_available_controllers(tmp_path):
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory hugetlb pids rdma misc\n")
    info = fixture("mountinfo_v2.txt").replace("CGROOT", str(tmp_path))
    cg = detect_cgroups(info, fixture("self_cgroup_v2.txt"), v2_parent=None)
    assert (cg.version, cg.memory, cg.pids) == ("v2", True, True)
    assert cg.roots == {"memory": str(tmp_path), "pids": str(tmp_path)}


def test_v2_without_controllers_and_no_v1_is_none(tmp_path):
    (tmp_path / "cgroup.controllers").write_text("cpu io\n")
    info = fixture("mountinfo_v2.txt").replace("CGROOT", str(tmp_path))
    cg = detect_cgroups(info, fixture("self_cgroup_v2.txt"))
    assert cg.version is None and cg.describe().startswith("none: ")


def test_no_cgroup_mounts_at_all():
    cg = detect_cgroups("22 28 0:20 / /sys rw - sysfs sysfs rw\n", "0::/\n")
    assert cg == CgroupSupport(None, False, False, {}, cg.reason) and cg.reason


def _fake_v1(tmp_path: Path) -> CgroupSupport:
    for ctrl in ("memory", "pids"):
        (tmp_path / ctrl).mkdir()
    return CgroupSupport("v1", True, True, {"memory": str(tmp_path / "memory"), "pids": str(tmp_path / "pids")})


def _before_a_v1_run(slot, oom_control: str, usage_bytes: int, memsw: bool = False) -> tuple[Path, Path]:
    """A fake v1 slot's files as the kernel shows them before a run: its OOM counter and usage, no limits, no
    processes. Returns the slot's memory and pids folders."""
    mem, pids = slot.dirs["memory"], slot.dirs["pids"]
    (mem / "memory.oom_control").write_text(oom_control)
    (mem / "memory.usage_in_bytes").write_text(f"{usage_bytes}\n")
    for limit in ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes") if memsw else ("memory.limit_in_bytes",):
        (mem / limit).write_text("9223372036854771712\n")
    (pids / "pids.events").write_text("max 0\n")
    for d in (mem, pids):
        (d / "cgroup.procs").write_text("")
    return mem, pids


def test_v1_slot_sets_limits_and_reads_the_run(tmp_path):
    pool = SlotPool(_fake_v1(tmp_path))
    slot = pool.acquire()
    mem, pids = _before_a_v1_run(slot, "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n", 1 << 20, memsw=True)
    slot.prepare(256 << 20, 34)
    assert (mem / "memory.limit_in_bytes").read_text() == str(256 << 20)
    assert (mem / "memory.memsw.limit_in_bytes").read_text() == str(256 << 20)  # no swapping past the limit
    assert (pids / "pids.max").read_text() == "34"
    # the run: peak 9 MiB (1 MiB of it carried over), one OOM kill, the pids limit hit once
    (mem / "memory.max_usage_in_bytes").write_text(str(9 << 20))
    (mem / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n")
    (pids / "pids.events").write_text("max 1\n")
    stats = slot.finish()
    assert (stats.peak_memory_bytes, stats.oom_killed, stats.pids_limit_hit) == (8 << 20, True, True)
    pool.release(slot)
    assert pool.acquire() is slot  # v1 slots are reused, not rebuilt


def test_reused_v1_slot_reports_only_its_own_run_and_rewrites_only_changed_limits(tmp_path):
    pool = SlotPool(_fake_v1(tmp_path))
    slot = pool.acquire()
    mem, pids = _before_a_v1_run(slot, "oom_kill 0\n", 0)
    slot.prepare(64 << 20, 10)
    assert (mem / "memory.limit_in_bytes").read_text() == str(64 << 20)
    (mem / "memory.max_usage_in_bytes").write_text(str(80 << 20))
    (mem / "memory.oom_control").write_text("oom_kill 1\n")  # the first run is OOM-killed and hits the pids limit
    (pids / "pids.events").write_text("max 1\n")
    stats = slot.finish()
    assert (stats.oom_killed, stats.pids_limit_hit) == (True, True)
    pool.release(slot)
    assert pool.acquire() is slot
    (mem / "memory.limit_in_bytes").unlink()
    (mem / "memory.limit_in_bytes").mkdir()  # any write to it would now fail: the same limits are not rewritten
    slot.prepare(64 << 20, 10)
    stats = slot.finish()  # the second run left the counters alone
    assert (stats.oom_killed, stats.pids_limit_hit) == (False, False)
    pool.release(slot)
    assert pool.acquire() is slot
    with pytest.raises(OSError, match="cannot set the memory limit"):
        slot.prepare(64 << 20, 20)  # changed limits are written (and here the write fails)
    (mem / "memory.limit_in_bytes").rmdir()
    (mem / "memory.limit_in_bytes").write_text("0\n")
    slot.prepare(64 << 20, 20)
    assert (mem / "memory.limit_in_bytes").read_text() == str(64 << 20) and (pids / "pids.max").read_text() == "20"


def test_slot_holding_processes_is_not_reused(tmp_path):
    pool = SlotPool(_fake_v1(tmp_path))
    slot = pool.acquire()
    slot.dirs["memory"].joinpath("cgroup.procs").write_text("999999999\n")  # no such pid: kill fails quietly
    slot.dirs["pids"].joinpath("cgroup.procs").write_text("")
    assert slot.pids() == [999999999]
    pool.release(slot)
    assert pool.acquire() is not slot


def test_unwritable_cgroup_tree_disables_cgroups_with_a_reason(tmp_path):
    cg = CgroupSupport("v1", True, True, {"memory": str(tmp_path / "absent" / "memory"), "pids": str(tmp_path)})
    pool = SlotPool(cg)
    assert pool.acquire() is None and "cannot create cgroups" in pool.broken


def test_v2_slot_is_fresh_per_run(tmp_path):
    (tmp_path / "cgroup.subtree_control").write_text("memory pids\n")
    cg = CgroupSupport("v2", True, True, {"memory": str(tmp_path), "pids": str(tmp_path)})
    pool = SlotPool(cg)
    slot = pool.acquire()
    d = slot.dirs["memory"]
    assert slot.dirs["pids"] == d and slot.procs_files == [str(d / "cgroup.procs")]
    (d / "memory.events").write_text("oom 0\noom_kill 0\n")
    (d / "pids.events").write_text("max 0\n")
    slot.prepare(64 << 20, 10)
    assert (d / "memory.max").read_text() == str(64 << 20)
    (d / "memory.peak").write_text(str(5 << 20))
    assert slot.finish().peak_memory_bytes == 5 << 20
    for f in list(d.iterdir()):
        f.unlink()  # a real cgroup dir empties itself; the fake one must be emptied to be removed
    pool.release(slot)
    assert not d.exists()


@pytest.mark.skipif(not Path("/proc/self/cgroup").exists(), reason="needs Linux")
def test_this_host_is_detected():
    cg = detect_cgroups()
    assert cg.version in ("v1", "v2", None) and cg.describe()


def test_stale_cleanup_only_touches_dead_harnesses_of_our_pid_namespace(tmp_path):
    from groupscore.sandbox.cgroups import _parent_name, _remove_stale

    dead_ours = tmp_path / _parent_name(999_999_999)
    alive_ours = tmp_path / _parent_name()
    other_ns = tmp_path / "groupscore-sandbox-1-999999999"  # a dead-looking pid of another namespace
    for parent in (dead_ours, alive_ours, other_ns):
        (parent / "slot-1").mkdir(parents=True)
    _remove_stale(tmp_path)
    assert not dead_ours.exists() and alive_ours.exists() and other_ns.exists()


def test_v1_limit_that_cannot_be_set_raises(tmp_path):
    pool = SlotPool(_fake_v1(tmp_path))
    slot = pool.acquire()
    mem = slot.dirs["memory"]
    (mem / "memory.limit_in_bytes").mkdir()  # writing it fails like a refused cgroup write
    (mem / "cgroup.procs").write_text("")
    with pytest.raises(OSError, match="cannot set the memory limit"):
        slot.prepare(64 << 20, 10)


def test_a_slot_whose_thread_cannot_join_falls_back_once(tmp_path):
    # A tree where `tasks` cannot be written (here: a plain dir, so the write fails): launch raises OSError, the
    # slot stops offering it, and the harness moves processes in as on v2.
    pool = SlotPool(_fake_v1(tmp_path))
    slot = pool.acquire()
    for d in slot.dirs.values():
        (d / "tasks").mkdir()  # writing to a directory fails
    assert slot.can_launch
    with pytest.raises(OSError):
        slot.launch(lambda: 1)
    assert not slot.can_launch
