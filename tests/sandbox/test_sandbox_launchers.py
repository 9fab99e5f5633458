"""Both launchers apply the one Policy (sandbox/policy.py): every field of it, and of its rlimits, checked in a run
through nsjail and in a warm run, from what the program sees of itself (/proc/self/status, its rlimits, namespaces,
mounts, environment, ...) and from what the host sees of it (its seccomp filter, its cgroup slot's limits).

FIELD_CHECKS holds one check per field of the policy: a field added to the policy fails
test_every_policy_field_is_checked_for_both_launchers until a check here shows that both launchers apply it. The one
difference left is the uid and gid inside the jail, which docs/sandbox/warm.md ("Differences a program can see")
lists: a warm run's user namespace is its template's, where each run has an id of its own from INSIDE_BASE up (the
host id is the run's own either way). RunResult.launcher and RunResult.fallback say which launcher ran a program and why a run that could have
been warm was not.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import groupscore

from groupscore.sandbox import Limits, RunResult, RunStatus, launch_summary, policy_for, run, warm
from groupscore.sandbox import settings as sandbox_settings
from groupscore.sandbox.cgroups import Slot
from groupscore.sandbox.harness import cgroup_note
from groupscore.sandbox.policy import FILE_BIND_FLAGS, MOUNT_FLAGS, Policy, Rlimits
from groupscore.sandbox.seccomp_capture import read_filter
from groupscore.sandbox.toolchains import toolchain
from groupscore.sandbox.uids import ID_COUNT, per_jail_ids

LAUNCHERS = ("warm", "nsjail")
COLLECT_CAP = (1 << 20) + 5  # not a whole MiB: the collected file is cut here, the file size rlimit is 2 MiB
LIMITS = Limits(wall_time_s=8, memory_mb=300, max_processes=20, max_file_bytes=COLLECT_CAP, max_open_files=50)
NAMESPACE_LINKS = {"user": "user", "mount": "mnt", "pid": "pid", "network": "net", "ipc": "ipc", "uts": "uts"}
NAMESPACE_LINKS["cgroup"] = "cgroup"

# Reports what the program sees of its jail, as JSON. argv[1]: "filter" (wait for SIGUSR1 under a marked name while
# the host reads its seccomp filter) or "-"; argv[2]: how many bytes to write to the collected file out.bin.
PROBE = r"""
import ctypes, errno, fcntl, json, os, platform, resource, signal, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
if sys.argv[1] != "-":
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])
    libc.prctl(15, sys.argv[1].encode(), 0, 0, 0)  # PR_SET_NAME: the host finds this process by it
    signal.sigtimedwait([signal.SIGUSR1], 20)
def err(result):
    return "ok" if result == 0 else errno.errorcode[ctypes.get_errno()]
status = {}
for line in open("/proc/self/status"):
    key, _, value = line.partition(":")
    status[key] = value.split()
mounts = {}
for line in open("/proc/self/mountinfo"):  # the last entry of a mount point is the one on top
    left, _, right = line.partition(" - ")
    fields, rfields = left.split(), right.split()
    mounts[fields[4]] = [rfields[0], sorted(fields[5].split(",")), sorted(rfields[2].split(","))]
links = {}
for path in sys.stdin.read().split():
    links[path] = os.readlink(path) if os.path.islink(path) else None
sock = socket.socket()
try:
    sock.connect(("127.0.0.1", 9))
    net = "connected"
except OSError as e:
    net = errno.errorcode[e.errno]
sock.close()
with open("lock", "w") as fh:
    flock = err(fcntl.flock(fh, fcntl.LOCK_EX) or 0)
with open("out.bin", "wb") as fh:
    fh.write(b"x" * int(sys.argv[2]))
print(json.dumps({
    "pid": os.getpid(), "ppid": os.getppid(), "uid": os.getuid(), "gid": os.getgid(),
    "uid_map": open("/proc/self/uid_map").read().split(), "gid_map": open("/proc/self/gid_map").read().split(),
    "status": status,
    "rlimits": {n: resource.getrlimit(getattr(resource, n)) for n in dir(resource) if n.startswith("RLIMIT_")},
    "ns": {n: os.readlink(f"/proc/self/ns/{n}") for n in ("user", "mnt", "pid", "net", "ipc", "uts", "cgroup")},
    "mounts": mounts, "links": links,
    "hostname": socket.gethostname(), "env": dict(os.environ), "cwd": os.getcwd(), "argv0": sys.argv[0],
    "fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd")),
    "ifaces": [line.split(":")[0].strip() for line in open("/proc/self/net/dev").readlines()[2:]], "net": net,
    "cgroup": open("/proc/self/cgroup").read().split(),
    "unshare": err(libc.unshare(0x04000000)), "sysinfo": err(libc.sysinfo(ctypes.create_string_buffer(256))),
    "flock": flock, "version": platform.python_version(),
}))
"""


def _host_pid_named(marker: str, deadline: float) -> int:
    while time.monotonic() < deadline:
        for entry in os.listdir("/proc"):
            try:
                if entry.isdigit() and Path(f"/proc/{entry}/comm").read_text().strip() == marker:
                    return int(entry)
            except OSError:
                continue
        time.sleep(0.01)
    raise AssertionError(f"no process named {marker}")


def _probe(policy: Policy, *, as_init: bool, read_seccomp: bool) -> tuple[RunResult, dict[str, Any], bytes]:
    """The probe, run as run() would choose; with read_seccomp, the host reads its seccomp filter while it waits."""
    marker = "gsp" + secrets.token_hex(6) if read_seccomp else "-"  # a process name holds 15 bytes
    links = " ".join(m.target for m in policy.mounts if m.kind == "symlink")
    box: dict[str, Any] = {}
    exe = toolchain("python").executable
    flag = "-S" if as_init else "-s"  # the call runner's flag as pid 1, run()'s default otherwise (both go warm)

    def go() -> None:
        box["r"] = run(
            {"main.py": PROBE},
            [exe, flag, "-B", "main.py", marker, str(COLLECT_CAP + 5)],
            stdin=links,
            limits=LIMITS,
            collect=["out.bin", "lock"],
            as_init=as_init,
        )

    thread = threading.Thread(target=go)
    thread.start()
    seccomp = b""
    if read_seccomp:
        pid = _host_pid_named(marker, time.monotonic() + 20)
        seccomp = read_filter(pid)
        os.kill(pid, signal.SIGUSR1)
    thread.join(60)
    result = box["r"]
    assert result.status is RunStatus.OK, result
    return result, json.loads(result.stdout), seccomp


def _template_namespaces(policy: Policy) -> dict[str, str]:
    """The namespaces of the probe's template's interpreter (nsjail's child), seen from the host."""
    template, _ = warm.template_for(toolchain("python"), policy, "-s")
    assert template is not None
    pid = Path(f"/proc/{template.proc.pid}/task/{template.proc.pid}/children").read_text().split()[0]
    return {n: os.readlink(f"/proc/{pid}/ns/{n}") for n in NAMESPACE_LINKS.values()}


@pytest.fixture(scope="module")
def seen(jail_available) -> dict[str, Any]:
    """What each launcher's runs showed: the probe (as pid 2, and as pid 1), its seccomp filter, the cgroup limits the
    harness set, and runs stopped by the wall clock and the output cap."""
    if not per_jail_ids():
        pytest.skip("warm runs need root (a host id per run)")
    policy = policy_for("python", LIMITS)
    out: dict[str, Any] = {
        "policy": policy,
        "host_ns": {n: os.readlink(f"/proc/self/ns/{n}") for n in NAMESPACE_LINKS.values()},
    }
    with pytest.MonkeyPatch.context() as mp:
        prepared: list[tuple[int, int]] = []
        real_prepare = Slot.prepare

        def spy(self: Slot, memory_bytes: int, max_pids: int) -> None:
            prepared.append((memory_bytes, max_pids))
            real_prepare(self, memory_bytes, max_pids)

        mp.setattr(Slot, "prepare", spy)
        for launcher in LAUNCHERS:
            mp.setenv("GROUPSCORE_SANDBOX_WARM", "1" if launcher == "warm" else "0")
            sandbox_settings.reload()
            prepared.clear()
            result, probe, seccomp = _probe(policy, as_init=False, read_seccomp=True)
            init_result, init_probe, _ = _probe(policy, as_init=True, read_seccomp=False)
            assert (result.launcher, init_result.launcher) == (launcher, launcher), (result, init_result)
            entry = {"result": result, "probe": probe, "seccomp": seccomp, "init": init_probe, "slots": list(prepared)}
            if launcher == "warm":
                entry["template_ns"] = _template_namespaces(policy)
            entry["slow"] = run({"main.py": "import time\ntime.sleep(30)\n"}, limits=Limits(wall_time_s=1.5))
            flood = f"import sys\nsys.stdout.write('y' * {3 << 20})\n"
            entry["flood"] = run({"main.py": flood}, limits=Limits(wall_time_s=8))
            assert (entry["slow"].launcher, entry["flood"].launcher) == (launcher, launcher)
            out[launcher] = entry
        sandbox_settings.reload()
    sandbox_settings.reload()
    return out


def _both(seen: dict[str, Any], key: str = "probe") -> list[dict[str, Any]]:
    return [seen[launcher][key] for launcher in LAUNCHERS]


def _host_id(id_map: list[str], inside: int) -> int:
    for i in range(0, len(id_map), 3):
        first, outside, count = (int(x) for x in id_map[i : i + 3])
        if first <= inside < first + count:
            return outside + inside - first
    raise AssertionError(f"{inside} is not mapped: {id_map}")


# -- one check per policy field -----------------------------------------------------------------------------------


def check_language_and_toolchain(policy: Policy, seen: dict[str, Any]) -> None:
    # The run is a Python run on the policy's toolchain: its interpreter's version is the policy's.
    assert policy.language == "python"
    for probe in _both(seen):
        assert probe["version"] in policy.toolchain and probe["argv0"] == "main.py"


def check_namespaces(policy: Policy, seen: dict[str, Any]) -> None:
    # Every namespace the policy names is not the host's. Warm: the user namespace is the template's (made by nsjail
    # from this policy), every other one the run's own, not the template's.
    template = seen["warm"]["template_ns"]
    for name in policy.namespaces:
        link = NAMESPACE_LINKS[name]
        for probe in _both(seen):
            assert probe["ns"][link] != seen["host_ns"][link], name
        warm_ns = seen["warm"]["probe"]["ns"][link]
        assert (warm_ns == template[link]) is (name == "user"), name
        assert template[link] != seen["host_ns"][link], name  # the template's own, made by nsjail
    assert set(policy.namespaces) == set(NAMESPACE_LINKS)


def check_network(policy: Policy, seen: dict[str, Any]) -> None:
    assert policy.network.startswith("new empty network namespace")
    for probe in _both(seen):
        assert probe["ifaces"] == ["lo"] and probe["net"] == "ENETUNREACH"  # loopback down, no other interface


def check_uid_and_gid_inside(policy: Policy, seen: dict[str, Any]) -> None:
    # nsjail: the policy's ids. Warm: docs/sandbox/warm.md's one listed difference, an id of its own from INSIDE_BASE
    # up.
    nsjail, warm_probe = seen["nsjail"]["probe"], seen["warm"]["probe"]
    assert (nsjail["uid"], nsjail["gid"]) == (policy.uid_inside, policy.gid_inside)
    assert warm_probe["uid"] == warm_probe["gid"] >= warm.INSIDE_BASE


def check_uid_and_gid_outside(policy: Policy, seen: dict[str, Any]) -> None:
    # As root, every run a host id of its own from the policy's first id (outside_ids says so); never root.
    assert policy.outside_ids.startswith("per jail")
    for probe in _both(seen) + _both(seen, "init"):
        uid, gid = _host_id(probe["uid_map"], probe["uid"]), _host_id(probe["gid_map"], probe["gid"])
        assert uid == gid and policy.uid_outside <= uid < policy.uid_outside + ID_COUNT
        assert policy.gid_outside == policy.uid_outside != 0


def check_hostname(policy: Policy, seen: dict[str, Any]) -> None:
    for probe in _both(seen):
        assert probe["hostname"] == policy.hostname


def check_no_new_privs(policy: Policy, seen: dict[str, Any]) -> None:
    for probe in _both(seen) + _both(seen, "init"):
        assert probe["status"]["NoNewPrivs"] == ["1" if policy.no_new_privs else "0"]


def check_capabilities(policy: Policy, seen: dict[str, Any]) -> None:
    assert policy.capabilities == ()  # none kept: every set empty, in both
    for probe in _both(seen) + _both(seen, "init"):
        for key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
            assert int(probe["status"][key][0], 16) == 0, key


def check_init(policy: Policy, seen: dict[str, Any]) -> None:
    # pid 2 under an init (pid 1); as_init: the program is pid 1 itself.
    assert "pid 1; the program is pid 2" in policy.init
    for probe in _both(seen):
        assert (probe["pid"], probe["ppid"]) == (2, 1)
    for probe in _both(seen, "init"):
        assert probe["pid"] == 1


def check_mounts(policy: Policy, seen: dict[str, Any]) -> None:
    # Each mount of the policy, on top at its target, of its kind and with (at least) its kind's flags; the same in
    # both launchers (flags the host's own mount locks in may come on top, in both alike). The run's own files: bound
    # with FILE_BIND_FLAGS, read-only but the collected ones.
    def view(probe: dict[str, Any], target: str) -> tuple[str, list[str]]:
        fstype, flags, _ = probe["mounts"][target]
        return fstype, flags

    for m in policy.mounts:
        for probe in _both(seen):
            if m.kind == "symlink":
                assert probe["links"][m.target] == m.source, m
                continue
            fstype, flags = view(probe, m.target)
            assert fstype == {"tmpfs": "tmpfs", "proc": "proc"}.get(m.kind, fstype), m
            assert set(m.flags) - {"ro"} <= set(flags) and ("ro" in flags) is ("ro" in m.flags), (m, flags)
        if m.kind != "symlink":
            assert view(seen["warm"]["probe"], m.target) == view(seen["nsjail"]["probe"], m.target), m
    for name, writable in (("main.py", False), ("out.bin", True), ("lock", True)):
        target = f"{policy.work_dir}/{name}"
        for probe in _both(seen):
            _, flags = view(probe, target)
            assert set(FILE_BIND_FLAGS) <= set(flags) and ("ro" in flags) is not writable, (name, flags)
    assert set(MOUNT_FLAGS) == {"bind_ro", "bind_rw", "tmpfs", "proc", "symlink"}


def _super_options(probe: dict[str, Any], target: str) -> set[str]:
    return {o for o in probe["mounts"][target][2] if not o.startswith(("uid=", "gid=", "rw", "ro"))}


def check_proc(policy: Policy, seen: dict[str, Any]) -> None:
    proc = next(m for m in policy.mounts if m.kind == "proc")
    for probe in _both(seen):
        assert _super_options(probe, proc.target) == set(proc.options.split(","))


def check_work_dir(policy: Policy, seen: dict[str, Any]) -> None:
    work = next(m for m in policy.mounts if m.kind == "tmpfs" and m.target == policy.work_dir)
    size = f"size={policy.tmpfs_mb << 10}k"
    for probe in _both(seen) + _both(seen, "init"):
        assert probe["cwd"] == policy.work_dir
        assert size in _super_options(probe, policy.work_dir) and "nr_inodes=4096" in _super_options(probe, work.target)


def check_env(policy: Policy, seen: dict[str, Any]) -> None:
    # The policy's environment exactly; under an init, PWD besides (nsjail's init shell sets it, the warm init too).
    for probe in _both(seen):
        assert probe["env"] == {**dict(e.split("=", 1) for e in policy.env), "PWD": policy.work_dir}
    for probe in _both(seen, "init"):
        assert probe["env"] == dict(e.split("=", 1) for e in policy.env)


def check_rlimits(policy: Policy, seen: dict[str, Any]) -> None:
    # Rlimits.settings is the one form both apply (the soft CPU limit as pid 2 by the init, the hard one alone as pid
    # 1); the rlimits the policy leaves alone are equal in both too.
    for probe in _both(seen):
        for name, limit in policy.rlimits.settings(as_init=False).items():
            assert tuple(probe["rlimits"][name]) == limit, name
    for probe in _both(seen, "init"):
        for name, limit in policy.rlimits.settings(as_init=True).items():
            assert tuple(probe["rlimits"][name]) == limit, name
    assert seen["warm"]["probe"]["rlimits"] == seen["nsjail"]["probe"]["rlimits"]
    assert seen["warm"]["init"]["rlimits"] == seen["nsjail"]["init"]["rlimits"]


def check_cgroup(policy: Policy, seen: dict[str, Any]) -> None:
    # The harness sets the slot's limits from the policy for either launcher (pids: the program's, plus the
    # launcher's own processes in the slot); the program sits at its cgroup namespace's root, the slot.
    assert policy.cgroup == cgroup_note() == seen["warm"]["result"].cgroup == seen["nsjail"]["result"].cgroup
    if policy.cgroup_memory_mb is None and policy.cgroup_max_pids is None:
        pytest.skip("no cgroups on this host")
    for launcher in LAUNCHERS:
        for memory_bytes, max_pids in seen[launcher]["slots"]:
            assert memory_bytes == (policy.cgroup_memory_mb or 0) << 20
            assert (policy.cgroup_max_pids or 0) <= max_pids <= (policy.cgroup_max_pids or 0) + 4
        for probe in (seen[launcher]["probe"], seen[launcher]["init"]):
            assert all(line.endswith(":/") for line in probe["cgroup"]), probe["cgroup"]


def check_seccomp(policy: Policy, seen: dict[str, Any]) -> None:
    # The very filter nsjail compiles from seccomp_kafel, in both (read back from each program by the host); the
    # described rules at work: default allow, an EPERM, an ENOSYS, a no-op success.
    assert seen["warm"]["seccomp"] == seen["nsjail"]["seccomp"] != b""
    assert policy.seccomp_default == "allow" and "unshare" in policy.seccomp_denied_eperm
    assert "sysinfo" in policy.seccomp_denied_enosys and "flock" in policy.seccomp_noop_success
    assert any("fcntl" in rule for rule in policy.seccomp_other) and policy.seccomp_kafel.endswith("DEFAULT ALLOW")
    for probe in _both(seen) + _both(seen, "init"):
        assert probe["status"]["Seccomp"] == ["2"] and probe["status"]["Seccomp_filters"] == ["1"]
        assert (probe["unshare"], probe["sysinfo"], probe["flock"]) == ("EPERM", "ENOSYS", "ok")


def check_wall_time(policy: Policy, seen: dict[str, Any]) -> None:
    assert policy.wall_time_s == LIMITS.wall_time_s  # the probe's own; the slow runs' 1.5 s ends them, in both
    for launcher in LAUNCHERS:
        slow = seen[launcher]["slow"]
        assert slow.status is RunStatus.TIMEOUT and 1.5 <= slow.wall_time_s < 6, slow


def check_max_output_bytes(policy: Policy, seen: dict[str, Any]) -> None:
    for launcher in LAUNCHERS:
        flood = seen[launcher]["flood"]
        assert flood.status is RunStatus.OUTPUT_LIMIT and len(flood.stdout) == policy.max_output_bytes, flood.error


def check_collected_file_bytes(policy: Policy, seen: dict[str, Any]) -> None:
    for launcher in LAUNCHERS:
        result = seen[launcher]["result"]
        assert result.files_truncated == ["out.bin"] and len(result.files["out.bin"]) == policy.collected_file_bytes


def check_inherited_fds(policy: Policy, seen: dict[str, Any]) -> None:
    assert policy.inherited_fds.startswith("stdin (a file), stdout and stderr")
    for probe in _both(seen) + _both(seen, "init"):
        assert probe["fds"] == [0, 1, 2, 3]  # 3: the listing's own


FIELD_CHECKS = {
    "language": check_language_and_toolchain,
    "toolchain": check_language_and_toolchain,
    "namespaces": check_namespaces,
    "network": check_network,
    "uid_inside": check_uid_and_gid_inside,
    "gid_inside": check_uid_and_gid_inside,
    "uid_outside": check_uid_and_gid_outside,
    "gid_outside": check_uid_and_gid_outside,
    "outside_ids": check_uid_and_gid_outside,
    "hostname": check_hostname,
    "no_new_privs": check_no_new_privs,
    "capabilities": check_capabilities,
    "init": check_init,
    "mounts": check_mounts,
    "work_dir": check_work_dir,
    "tmpfs_mb": check_work_dir,
    "env": check_env,
    "rlimits": check_rlimits,
    "cgroup": check_cgroup,
    "cgroup_memory_mb": check_cgroup,
    "cgroup_max_pids": check_cgroup,
    "seccomp_default": check_seccomp,
    "seccomp_denied_eperm": check_seccomp,
    "seccomp_denied_enosys": check_seccomp,
    "seccomp_noop_success": check_seccomp,
    "seccomp_other": check_seccomp,
    "seccomp_kafel": check_seccomp,
    "wall_time_s": check_wall_time,
    "max_output_bytes": check_max_output_bytes,
    "collected_file_bytes": check_collected_file_bytes,
    "inherited_fds": check_inherited_fds,
}


def test_every_policy_field_is_checked_for_both_launchers() -> None:
    assert set(FIELD_CHECKS) == set(Policy.model_fields)


def test_every_rlimit_field_reaches_the_settings_both_launchers_apply() -> None:
    # check_rlimits compares what each program sees with Rlimits.settings; each field must move a setting.
    base = policy_for("python", LIMITS).rlimits
    for name in Rlimits.model_fields:
        changed = base.model_copy(update={name: getattr(base, name) + 1})
        assert changed.settings() != base.settings() or changed.settings(as_init=True) != base.settings(as_init=True)


@pytest.mark.parametrize("check", sorted(set(FIELD_CHECKS.values()), key=lambda f: f.__name__))
def test_both_launchers_apply_the_policy(check, seen) -> None:
    check(seen["policy"], seen)


def test_a_policy_the_warm_launcher_cannot_apply_goes_through_nsjail_and_says_why() -> None:
    policy = policy_for("python", LIMITS)
    assert warm.policy_unsupported(policy) is None
    assert "keeps capabilities" in str(
        warm.policy_unsupported(policy.model_copy(update={"capabilities": ("CAP_KILL",)}))
    )
    assert "no_new_privs off" in str(warm.policy_unsupported(policy.model_copy(update={"no_new_privs": False})))
    no_pid = policy.model_copy(update={"namespaces": tuple(n for n in policy.namespaces if n != "pid")})
    assert "no pid namespace" in str(warm.policy_unsupported(no_pid))
    assert warm.template_for(toolchain("python"), no_pid) == (None, warm.policy_unsupported(no_pid))


# -- which launcher ran, and why a run fell back ------------------------------------------------------------------


def test_the_result_says_which_launcher_ran_it(jail_available, through_nsjail) -> None:
    exe = toolchain("python").executable
    if per_jail_ids():
        assert (run({"main.py": "print(1)"}).launcher, run({"main.py": "print(1)"}).fallback) == ("warm", None)
    other = run({"main.py": "print(1)"}, [exe, "-c", "print(1)"])  # not a script: nsjail, no fallback
    assert (other.launcher, other.fallback) == ("nsjail", None)
    with through_nsjail:
        off = run({"main.py": "print(1)"})
    assert (off.launcher, off.fallback) == ("nsjail", None)
    bash = run({"main.sh": "echo 1"}, language="bash")
    assert (bash.launcher, bash.fallback) == ("nsjail", None)


def test_a_run_that_never_ran_names_no_launcher(jail_available) -> None:
    pytest.importorskip("groupscore.sandbox.toolchains").compiled_toolchain("c")
    r = run({"main.c": "int main(void) { return x; }\n"}, language="c")
    assert r.status is RunStatus.COMPILE_ERROR and (r.launcher, r.fallback) == (None, None)


def test_a_template_that_cannot_start_is_the_fallback_reason(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    if not per_jail_ids():
        pytest.skip("warm runs need root")
    broken = tmp_path / "template.py"
    broken.write_text("raise SystemExit(3)\n")
    monkeypatch.setattr(warm, "TEMPLATE_SCRIPT", broken)
    monkeypatch.setattr(warm, "_TEMPLATES", {})
    monkeypatch.setattr(warm, "_BROKEN", {})
    for _ in range(2):  # the first run starts the template and fails; the second finds it given up
        r = run({"main.py": "print('fine')"}, limits=Limits(wall_time_s=5))
        assert (r.status, r.stdout, r.launcher) == (RunStatus.OK, "fine\n", "nsjail")
        assert r.fallback is not None and r.fallback.startswith("no warm template: warm template did not start")


def test_a_warm_run_that_cannot_be_set_up_says_why_it_went_through_nsjail(monkeypatch: pytest.MonkeyPatch) -> None:
    if not per_jail_ids():
        pytest.skip("warm runs need root")
    monkeypatch.setattr(warm, "_TEMPLATES", {})
    monkeypatch.setattr(warm, "_BROKEN", {})
    real_submit = warm.Template.submit

    def bad_tmpfs(self, request, fds, as_init=False):
        real_submit(self, {**request, "tmpfs": ["size=nonsense", request["tmpfs"][1]]}, fds, as_init)

    monkeypatch.setattr(warm.Template, "submit", bad_tmpfs)
    r = run({"main.py": "print(1)"}, limits=Limits(wall_time_s=5))
    assert (r.status, r.launcher) == (RunStatus.OK, "nsjail")
    assert r.fallback is not None and r.fallback.startswith("warm run not set up: ") and "mount /work" in r.fallback
    again = run({"main.py": "print(1)"}, limits=Limits(wall_time_s=5))  # a second in a row: the template is given up
    assert again.launcher == "nsjail" and again.fallback is not None
    given_up = run({"main.py": "print(1)"}, limits=Limits(wall_time_s=5))
    assert given_up.fallback is not None and given_up.fallback.startswith("no warm template: runs could not be set up")


def test_launch_summary_counts_launchers_and_lists_each_fallback_once() -> None:
    results = [
        RunResult(status=RunStatus.OK, launcher="warm"),
        RunResult(status=RunStatus.OK, launcher="nsjail", fallback="no warm template: x"),
        RunResult(status=RunStatus.OK, launcher="nsjail", fallback="no warm template: x"),
        RunResult(status=RunStatus.COMPILE_ERROR),
    ]
    assert launch_summary(results) == {"launchers": {"warm": 1, "nsjail": 2}, "fallbacks": ["no warm template: x"]}
    assert launch_summary(results[:1]) == {"launchers": {"warm": 1}}


def test_the_cli_and_the_code_verdict_show_the_launcher(jail_available, tmp_path) -> None:
    from groupscore.verifiers.code.item import CodeItem
    from groupscore.verifiers.code.verify import score_code

    program = tmp_path / "hello.py"
    program.write_text("print('hi')\n")
    out = groupscore("sandbox", "run", str(program), timeout=120)
    data = json.loads(out.stdout)
    assert out.returncode == 0 and data["launcher"] in LAUNCHERS and "fallback" in data, out.stderr
    item = CodeItem(
        completion="```python\nprint(input()[::-1])\n```",
        tests=[{"type": "stdio", "stdin": "ab", "stdout": "ba"}, {"type": "stdio", "stdin": "xy", "stdout": "yx"}],
    )
    verdict = score_code(item)
    assert verdict.reward == 1.0 and sum(verdict.details["launchers"].values()) == 2, verdict.details
    if per_jail_ids():
        assert verdict.details["launchers"] == {"warm": 2} and "fallbacks" not in verdict.details
