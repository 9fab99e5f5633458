"""Environment sessions: reset, shell step and scoring latency with many sessions open at once, beside the floor (a
bare bash per session) and a container per session (podman), in one run.

    .venv/bin/python bench/env_bench.py [--sessions 64] [--steps 4] [--threads 4] [--rounds 2] [--json]
                                        [--backends floor,jail,podman] [--profile 40]

Each round, for each backend in turn (the order alternating between rounds, so a load spike on a shared machine hits
every side): open `--sessions` sessions (`--threads` at a time, each reset timed), take per-session memory with all
of them open, run `--steps` shell steps in each (`echo hi`, `ls -la`, ...; interleaved over the sessions, so that
different sessions run in parallel), then score each with a one-command hidden test and close it.

- floor: a fresh unisolated `bash` per session (its start, answering one `echo`, is the reset; a `bash -c` per step;
  the test a `bash -c` in the session's directory).
- jail: `groupscore.environments.Sessions`: a jail per session with the session agent as its pid 1.
- podman: a container per session (`podman run -d` of a local Debian minbase image made with debootstrap and
  `podman import`; `--network none`, tmpfs /app and /tmp, memory and pids limits; `podman exec` per step; the test
  exec'd in the same container after the episode, as Harbor does; `podman rm -f` to close).

CPU per call, by phase: the CPU of the bench process and of everything it started (a cpuacct cgroup of its own, which
nsjail, the jail's processes and podman's client inherit; plus podman's containers and conmons), and the whole
machine's busy time during the phase (other work on a shared machine included), both divided by the calls.
`--profile N` times N serial resets and scorings of the jail piece by piece (slot, config, nsjail to the agent's
hello, init; finish, checker jail start, test).

One module because a benchmark under bench/ runs as a script with nothing of its own importable, and its three sides
are measured in one alternated run that shares the timing, the CPU accounting and the report.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from groupscore.environments import Sessions, Task, ToolCall

STEP_COMMANDS = ("echo hi", "ls -la", "echo $((6 * 7)) > answer.txt", "cat answer.txt")
TEST_SH = "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n"  # the one-command hidden test
PODMAN_IMAGE = "localhost/gs-bookworm-minbase"
PODMAN = ("podman", "--runtime", "runc")  # crun refuses this host's hybrid cgroup layout; runc takes it
HZ = os.sysconf("SC_CLK_TCK")  # /proc/stat's unit


def bench_task() -> Task:
    return Task(
        id="bench-shell",
        turns=[{"messages": [{"role": "user", "content": "run a few commands"}]}],
        tools=("shell",),
        checkers=[{"kind": "tests", "files": {"test.sh": TEST_SH}}],
    )


# -- the three sides ------------------------------------------------------------------------------------------------


class Floor:
    """No isolation: a bash per session in a directory of its own."""

    name = "floor"

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="gs-env-floor-"))
        self.open: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}

    def reset(self) -> str:
        sid = uuid.uuid4().hex
        work = self.root / sid
        (work / "app").mkdir(parents=True)
        proc = subprocess.Popen(
            ["bash", "--noprofile", "--norc"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=work / "app"
        )
        assert proc.stdin and proc.stdout
        proc.stdin.write(b"echo ready\n")
        proc.stdin.flush()
        assert proc.stdout.readline() == b"ready\n"
        self.open[sid] = (proc, work)
        return sid

    def step(self, sid: str, command: str) -> str:
        work = self.open[sid][1]
        done = subprocess.run(["bash", "-c", command], cwd=work / "app", capture_output=True, timeout=10)
        return done.stdout.decode()

    def score(self, sid: str) -> float:
        work = self.open[sid][1]
        (work / "logs" / "verifier").mkdir(parents=True)
        test = TEST_SH.replace("/logs/", f"{work}/logs/")
        subprocess.run(["bash", "-c", test], cwd=work / "app", capture_output=True, timeout=10)
        return float((work / "logs" / "verifier" / "reward.txt").read_text())

    def close(self, sid: str) -> None:
        proc, work = self.open.pop(sid)
        proc.kill()
        proc.wait()
        shutil.rmtree(work)

    def pids(self, sid: str) -> list[int]:
        return [self.open[sid][0].pid]

    def cgroup_memory(self, sid: str) -> int | None:
        return None

    def shutdown(self) -> None:
        for sid in list(self.open):
            self.close(sid)
        shutil.rmtree(self.root, ignore_errors=True)


class Jail:
    """groupscore's sessions."""

    name = "jail"

    def __init__(self, max_sessions: int) -> None:
        self.sessions = Sessions(max_sessions=max_sessions)
        self.task = bench_task()

    def reset(self) -> str:
        opening = self.sessions.reset(self.task)
        return opening.session_id

    def step(self, sid: str, command: str) -> str:
        obs = self.sessions.step(sid, ToolCall(name="shell", arguments={"command": command}))
        if obs.is_error:
            raise RuntimeError(f"step failed: {obs.content}")
        return obs.content

    def score(self, sid: str) -> float:
        verdict = self.sessions.score(sid)
        if verdict.status.value == "infra_error":
            raise RuntimeError(f"scoring failed: {verdict.reason}")
        return verdict.reward

    def close(self, sid: str) -> None:
        self.sessions.close(sid)

    def _jail(self, sid: str) -> Any:
        return self.sessions._get(sid).jail

    def pids(self, sid: str) -> list[int]:
        jail = self._jail(sid)
        if jail is None or jail.pid is None:
            return []
        return [jail.pid, *children(jail.pid)]  # nsjail, and the agent (the jail's pid 1)

    def cgroup_memory(self, sid: str) -> int | None:
        slot = getattr(self._jail(sid), "_slot", None)
        if slot is None or "memory" not in slot.dirs:
            return None
        for name in ("memory.usage_in_bytes", "memory.current"):
            path = slot.dirs["memory"] / name
            if path.exists():
                return int(path.read_text())
        return None

    def shutdown(self) -> None:
        self.sessions.close_all()


class Podman:
    """A container per session."""

    name = "podman"

    def __init__(self) -> None:
        self.open: dict[str, str] = {}

    @staticmethod
    def available() -> str | None:
        """Why podman cannot run here, or None."""
        if shutil.which("podman") is None:
            return "podman is not installed (apt-get install podman runc)"
        try:
            done = subprocess.run([*PODMAN, "image", "exists", PODMAN_IMAGE], capture_output=True, timeout=30)
        except (OSError, subprocess.SubprocessError) as exc:
            return f"podman does not run: {exc}"
        if done.returncode != 0:
            make = f"debootstrap --variant=minbase bookworm DIR; tar -C DIR -c . | podman import - {PODMAN_IMAGE}"
            return f"no image {PODMAN_IMAGE} ({make})"
        return None

    def reset(self) -> str:
        name = "gs-env-bench-" + uuid.uuid4().hex[:12]
        cmd = [
            *PODMAN, "run", "-d", "--name", name, "--network", "none", "--memory", "512m", "--pids-limit", "64",
            "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024",
            "--tmpfs", "/app:size=64m", "--tmpfs", "/tmp:size=64m", "-w", "/app",
            PODMAN_IMAGE, "sleep", "infinity",
        ]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"podman run: {done.stderr.decode()[-500:]}")
        self.open[name] = done.stdout.decode().strip()
        return name

    def step(self, sid: str, command: str) -> str:
        done = subprocess.run([*PODMAN, "exec", sid, "bash", "-c", command], capture_output=True, timeout=60)
        return done.stdout.decode()

    def score(self, sid: str) -> float:
        script = f"mkdir -p /tests /logs/verifier && cat > /tests/test.sh <<'EOF'\n{TEST_SH}EOF\nbash /tests/test.sh"
        subprocess.run([*PODMAN, "exec", sid, "bash", "-c", script], capture_output=True, timeout=60)
        done = subprocess.run([*PODMAN, "exec", sid, "cat", "/logs/verifier/reward.txt"], capture_output=True)
        return float(done.stdout.decode())

    def close(self, sid: str) -> None:
        subprocess.run([*PODMAN, "rm", "-f", "-t", "0", sid], capture_output=True, timeout=60)
        self.open.pop(sid, None)

    def _cgroup(self, sid: str, controller: str) -> Path | None:
        cid = self.open.get(sid, "")
        for parent in ("libpod_parent", "machine.slice"):
            for name in (f"libpod-{cid}", f"libpod-{cid}.scope"):
                path = Path("/sys/fs/cgroup", controller, parent, name)
                if path.is_dir():
                    return path
        return None

    def pids(self, sid: str) -> list[int]:
        """conmon and the container's processes."""
        path = self._cgroup(sid, "pids")
        inside = [int(p) for p in path.joinpath("cgroup.procs").read_text().split()] if path else []
        conmon = [p for p in {ppid(pid) for pid in inside} if p and p not in inside]
        return conmon + inside

    def cgroup_memory(self, sid: str) -> int | None:
        path = self._cgroup(sid, "memory")
        return int(path.joinpath("memory.usage_in_bytes").read_text()) if path else None

    def shutdown(self) -> None:
        for sid in list(self.open):
            self.close(sid)


# -- /proc ------------------------------------------------------------------------------------------------------------


def children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def ppid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def memory_kb(pid: int) -> tuple[int, int]:
    """(RSS, PSS) in KiB: PSS shares the pages common to many processes (the interpreter, nsjail's code)."""
    rss = pss = 0
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Rss:"):
                rss = int(line.split()[1])
            elif line.startswith("Pss:"):
                pss = int(line.split()[1])
    except OSError:
        pass
    return rss, pss


class CpuAccount:
    """CPU of this process and everything it starts, in nanoseconds exact: a cgroup v1 cpuacct group of our own
    (nsjail and the jail's processes stay in it: the sandbox's slots are memory and pids only), plus podman's
    containers and conmons (libpod_parent). None where there is no v1 cpuacct to make one in."""

    ROOT = Path("/sys/fs/cgroup/cpuacct")

    def __init__(self) -> None:
        self.group: Path | None = None
        if not (self.ROOT / "cpuacct.usage").exists():
            return
        try:
            group = self.ROOT / f"gs-env-bench-{os.getpid()}"
            group.mkdir(exist_ok=True)
            (group / "cgroup.procs").write_text(str(os.getpid()))
            self.group = group
        except OSError:
            self.group = None

    def seconds(self) -> float | None:
        if self.group is None:
            return None
        total = int((self.group / "cpuacct.usage").read_text())
        podman = self.ROOT / "libpod_parent" / "cpuacct.usage"
        if podman.exists():
            total += int(podman.read_text())
        return total / 1e9

    def close(self) -> None:
        if self.group is not None:
            (self.ROOT / "cgroup.procs").write_text(str(os.getpid()))
            try:
                self.group.rmdir()
            except OSError:
                pass  # a process we started is still in it


def machine_busy_s() -> float:
    cpu = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(cpu) - cpu[3] - cpu[4]) / HZ  # all but idle and iowait


# -- one round -------------------------------------------------------------------------------------------------------


@dataclass
class Samples:
    reset: list[float] = field(default_factory=list)
    step: list[float] = field(default_factory=list)
    score: list[float] = field(default_factory=list)
    close: list[float] = field(default_factory=list)
    cpu_ms: dict[str, list[float]] = field(default_factory=dict)  # per call of a phase: accounted, per round
    busy_ms: dict[str, list[float]] = field(default_factory=dict)  # per call of a phase: the whole machine, per round
    memory: dict[str, list[float]] = field(default_factory=dict)  # MiB per session, per measure
    phase_s: dict[str, list[float]] = field(default_factory=dict)


def timed(fn: Callable[[], Any], into: list[float], lock: threading.Lock) -> Any:
    t0 = time.perf_counter()
    out = fn()
    elapsed = time.perf_counter() - t0
    with lock:
        into.append(elapsed)
    return out


def one_round(side: Any, n: int, steps: int, threads: int, cpu: CpuAccount, out: Samples) -> None:
    """Resets, then steps, then scoring and closing, each phase `threads` calls at a time; CPU per call by phase."""
    lock = threading.Lock()

    def phase(name: str, calls: int, run: Callable[[], Any]) -> Any:
        cpu0, busy0, t0 = cpu.seconds(), machine_busy_s(), time.perf_counter()
        result = run()
        out.phase_s.setdefault(name, []).append(time.perf_counter() - t0)
        cpu1, busy1 = cpu.seconds(), machine_busy_s()
        if cpu0 is not None and cpu1 is not None:
            out.cpu_ms.setdefault(name, []).append(1000 * (cpu1 - cpu0) / calls)
        out.busy_ms.setdefault(name, []).append(1000 * (busy1 - busy0) / calls)
        return result

    with ThreadPoolExecutor(threads) as pool:
        host0 = memory_kb(os.getpid())[0]
        sids = phase("reset", n, lambda: list(pool.map(lambda _: timed(side.reset, out.reset, lock), range(n))))
        out.memory.setdefault("host_process_per_session", []).append((memory_kb(os.getpid())[0] - host0) / 1024 / n)
        sample_memory(side, sids, out)
        calls = [(sid, STEP_COMMANDS[k % len(STEP_COMMANDS)]) for k in range(steps) for sid in sids]
        step = lambda: list(pool.map(lambda c: timed(lambda: side.step(*c), out.step, lock), calls))  # noqa: E731
        outputs = phase("step", len(calls), step)
        assert all("hi" in o for o, (_, c) in zip(outputs, calls, strict=True) if c == "echo hi"), outputs[:3]

        def score_and_close() -> list[float]:
            rewards = list(pool.map(lambda sid: timed(lambda: side.score(sid), out.score, lock), sids))
            list(pool.map(lambda sid: timed(lambda: side.close(sid), out.close, lock), sids))
            return rewards

        rewards = phase("score+close", n, score_and_close)
        assert rewards == [1.0] * n, rewards


def sample_memory(side: Any, sids: list[str], out: Samples) -> None:
    for sid in sids:
        pids = side.pids(sid)
        mem = [memory_kb(p) for p in pids]
        values = {"rss": sum(r for r, _ in mem) / 1024, "pss": sum(p for _, p in mem) / 1024}
        for i, (rss, _) in enumerate(mem[:2]):
            values[f"rss_{i}"] = rss / 1024
        cg = side.cgroup_memory(sid)
        if cg is not None:
            values["cgroup"] = cg / (1 << 20)
        for key, value in values.items():
            out.memory.setdefault(key, []).append(value)


def pct(xs: list[float], q: float) -> float:
    """Nearest-rank percentile."""
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, math.ceil(q / 100 * len(s)) - 1))] if s else float("nan")


def median(xs: list[float]) -> float:
    return pct(xs, 50)


# -- the jail piece by piece ------------------------------------------------------------------------------------------


def profile(count: int) -> dict[str, dict[str, float]]:
    """Serial resets and scorings of the jail, each split into its parts (medians, ms)."""
    from groupscore.environments import checkers as checkers_mod
    from groupscore.environments import session as session_mod
    from groupscore.sandbox import session_launcher as launcher
    from groupscore.sandbox.nsjail_launcher import nsjail_binary

    parts: dict[str, list[float]] = {}
    current: dict[str, float] = {}

    def wrap(owner: Any, name: str, label: str) -> Callable[[], None]:
        original = getattr(owner, name)

        def timed_call(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                current[label] = current.get(label, 0.0) + time.perf_counter() - t0

        setattr(owner, name, timed_call)
        return lambda: setattr(owner, name, original)

    def wrap_request() -> Callable[[], None]:
        original = launcher.SessionJail.request

        def request(self: Any, message: dict[str, Any], timeout: float) -> dict[str, Any]:
            t0 = time.perf_counter()
            try:
                return original(self, message, timeout)
            finally:
                label = f"agent op {message.get('op')}"
                current[label] = current.get(label, 0.0) + time.perf_counter() - t0

        launcher.SessionJail.request = request  # type: ignore[method-assign]
        return lambda: setattr(launcher.SessionJail, "request", original)

    def wrap_start() -> Callable[[], None]:
        # nsjail's start to the agent's hello: the jail's _start minus the parts timed inside it
        original = launcher.SessionJail._start

        def start(self: Any) -> None:
            t0 = time.perf_counter()
            try:
                original(self)
            finally:
                current["jail start (whole)"] = current.get("jail start (whole)", 0.0) + time.perf_counter() - t0

        launcher.SessionJail._start = start  # type: ignore[method-assign]
        return lambda: setattr(launcher.SessionJail, "_start", original)

    undo = [
        wrap(launcher, "config_text", "config rendering"),
        wrap(launcher, "prepared_slot", "cgroup slot"),
        wrap(launcher, "send_config", "config to nsjail"),
        wrap(launcher, "kill_nsjail", "kill nsjail"),
        wrap(launcher, "finish_slot", "slot finish"),
        wrap(session_mod, "open_session_jail", "open session jail"),
        wrap(checkers_mod, "open_checker_jail", "open checker jail"),
        wrap_request(),
        wrap_start(),
    ]
    task, sessions = bench_task(), Sessions()
    try:
        for _ in range(count):
            current.clear()
            t0 = time.perf_counter()
            sid = sessions.reset(task).session_id
            current["reset (total)"] = time.perf_counter() - t0
            for key, value in current.items():
                parts.setdefault("reset: " + key, []).append(value)
            sessions.step(sid, ToolCall(name="shell", arguments={"command": "echo hi"}))
            current.clear()
            t0 = time.perf_counter()
            sessions.score(sid)
            current["score (total)"] = time.perf_counter() - t0
            for key, value in current.items():
                parts.setdefault("score: " + key, []).append(value)
            sessions.close(sid)
    finally:
        for fn in undo:
            fn()
        sessions.close_all()
    out = {k: {"p50_ms": 1000 * median(v), "min_ms": 1000 * min(v)} for k, v in parts.items()}
    out["host: python -S -B agent to its hello (no jail)"] = agent_start_ms(count)
    out["host: nsjail --help"] = command_ms(count, [nsjail_binary(), "--help"])
    out["host: bash -c true"] = command_ms(count, ["bash", "-c", "true"])
    return out


def agent_start_ms(count: int) -> dict[str, float]:
    import tempfile

    from groupscore.environments.agent.protocol import BOOT, JAIL_DIR, PACKAGE, PYTHON_FLAGS
    from groupscore.environments.jails import AGENT_DIR
    from groupscore.sandbox.toolchains import toolchain

    exe, times = toolchain("python").executable, []
    top = tempfile.mkdtemp(prefix="agent-start-")
    os.symlink(AGENT_DIR, os.path.join(top, PACKAGE))  # the package where the jail binds it, here outside a jail
    argv = [exe, *PYTHON_FLAGS, "-c", BOOT.replace(repr(JAIL_DIR), repr(top))]
    for _ in range(count):
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert proc.stdout is not None
        proc.stdout.readline()
        times.append(time.perf_counter() - t0)
        proc.kill()
        proc.wait()
    return {"p50_ms": 1000 * median(times), "min_ms": 1000 * min(times)}


def command_ms(count: int, argv: list[str]) -> dict[str, float]:
    times = []
    for _ in range(count):
        t0 = time.perf_counter()
        subprocess.run(argv, capture_output=True)
        times.append(time.perf_counter() - t0)
    return {"p50_ms": 1000 * median(times), "min_ms": 1000 * min(times)}


# -- main -------------------------------------------------------------------------------------------------------------


def summary(samples: Samples) -> dict[str, Any]:
    def stats(xs: list[float]) -> dict[str, float]:
        return {"p50_ms": 1000 * pct(xs, 50), "p99_ms": 1000 * pct(xs, 99), "max_ms": 1000 * max(xs), "n": len(xs)}

    return {
        "reset": stats(samples.reset),
        "step": stats(samples.step),
        "score": stats(samples.score),
        "close": stats(samples.close),
        "cpu_ms_per_call": samples.cpu_ms,
        "machine_busy_ms_per_call": samples.busy_ms,
        "memory_mib_median": {k: median(v) for k, v in samples.memory.items()},
        "phase_s": samples.phase_s,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=64, help="sessions open at once")
    ap.add_argument("--steps", type=int, default=4, help="shell steps per session")
    ap.add_argument("--threads", type=int, default=4, help="calls in flight at once (a trainer's concurrency)")
    ap.add_argument("--rounds", type=int, default=2, help="rounds; the order of the sides alternates")
    ap.add_argument("--backends", default="floor,jail,podman")
    ap.add_argument("--profile", type=int, default=0, metavar="N", help="also time N serial jail resets by parts")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = ap.parse_args()

    names = args.backends.split(",")
    skipped: dict[str, str] = {}
    if "podman" in names and (why := Podman.available()):
        skipped["podman"] = why
        names.remove("podman")
    makers: dict[str, Callable[[], Any]] = {
        "floor": Floor,
        "jail": lambda: Jail(max(args.sessions, 64)),
        "podman": Podman,
    }
    sides = {name: makers[name]() for name in names}
    samples = {name: Samples() for name in names}
    load0 = os.getloadavg()[0]
    cpu = CpuAccount()
    try:
        for _ in range(2):  # warm-up (caches, the first jail's policy, podman's storage), not counted
            for name in names:
                side = sides[name]
                sid = side.reset()
                side.step(sid, "echo hi")
                side.score(sid)
                side.close(sid)
        for r in range(args.rounds):
            for name in names if r % 2 == 0 else names[::-1]:
                one_round(sides[name], args.sessions, args.steps, args.threads, cpu, samples[name])
    finally:
        for side in sides.values():
            side.shutdown()
        cpu.close()
    result: dict[str, Any] = {
        "machine": {
            "node": platform.node(),
            "cpus": os.cpu_count(),
            "kernel": platform.release(),
            "load_start": load0,
            "load_end": os.getloadavg()[0],
        },
        "args": vars(args),
        "sides": {name: summary(samples[name]) for name in names},
        "skipped": skipped,
    }
    if "floor" in names:
        floor = result["sides"]["floor"]
        result["ratios_to_floor"] = {
            name: {m: round(s[m]["p50_ms"] / floor[m]["p50_ms"], 2) for m in ("reset", "step", "score")}
            for name, s in result["sides"].items()
        }
    if args.profile:
        result["jail_profile"] = profile(args.profile)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print_table(result)
    return 0


def print_table(result: dict[str, Any]) -> None:
    m, a = result["machine"], result["args"]
    print(
        f"{m['node']}: {m['cpus']} CPUs, kernel {m['kernel']}, load {m['load_start']:.1f} -> {m['load_end']:.1f}; "
        f"{a['sessions']} sessions open at once, {a['steps']} steps each, {a['threads']} threads, {a['rounds']} rounds"
    )
    print(f"{'side':8} {'reset p50/p99':>16} {'step p50/p99':>16} {'score p50/p99':>16}   (ms)")
    for name, s in result["sides"].items():
        print(
            f"{name:8} {s['reset']['p50_ms']:7.1f}/{s['reset']['p99_ms']:7.1f} {s['step']['p50_ms']:7.1f}/"
            f"{s['step']['p99_ms']:7.1f} {s['score']['p50_ms']:7.1f}/{s['score']['p99_ms']:7.1f}"
        )
        for label, key in (
            ("CPU ms per call, accounted", "cpu_ms_per_call"),
            ("machine busy ms per call", "machine_busy_ms_per_call"),
        ):
            if s[key]:
                print(
                    f"{'':8} {label}: "
                    + "; ".join(f"{k} " + "/".join(f"{x:.1f}" for x in v) for k, v in s[key].items())
                )
        print(
            f"{'':8} memory MiB per session (median): "
            + ", ".join(f"{k} {v:.2f}" for k, v in s["memory_mib_median"].items())
        )
    for name, ratios in result.get("ratios_to_floor", {}).items():
        print(f"{name:8} / floor, p50: " + ", ".join(f"{k} {v:.2f}x" for k, v in ratios.items()))
    for name, why in result["skipped"].items():
        print(f"{name}: skipped: {why}")
    for part, v in result.get("jail_profile", {}).items():
        print(f"  {part:50} p50 {v['p50_ms']:7.2f} ms   min {v['min_ms']:7.2f} ms")


if __name__ == "__main__":
    sys.exit(main())
