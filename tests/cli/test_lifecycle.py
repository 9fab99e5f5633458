"""Every process a `groupscore` command starts ends with it, whatever ends the command: SIGTERM (what `timeout`,
SLURM, Kubernetes and `docker stop` send), SIGINT (Ctrl-C; also to a command a script started with `&`, which
inherits SIGINT ignored), SIGHUP (a closed terminal) or the death of the process that started it (cli/lifecycle.py).

Each test starts the command as a user types it (the venv's `groupscore` script, in an empty folder, or under a
`bash -c 'groupscore ... & wait'` standing in for a script), waits until the command has started its helpers (the
embedded service, scoring processes and their templates, nsjail, a reward's worker, a Ray cluster), ends it, and then
requires every one of those processes gone within a few seconds. A process counts as the command's when it was below
the command in /proc before the signal, or when its environment carries this test's marker variable (an orphan is
reparented away from the command, and nsjail gets an environment of its own, hence both). Whatever is left is
SIGKILLed at the end of the test, so a failure leaks nothing into the next one.

Cost: about 40 s on the 2-core VM, most of it the commands' own start-up (train imports torch, demo starts a
service) and the service's 5 s of grace; the Ray test, slow-marked like the other Ray tests, ~25 s more (a local
cluster and Serve). Before cli/lifecycle.py, 8 of the 10 failed: everything but `serve` ended by SIGHUP or by a
background SIGINT (uvicorn's own handlers, and scoring processes that follow their owner) was left running.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from helpers import py, write_jsonl

from groupscore.service.embedded import free_port

ROOT = Path(__file__).resolve().parents[2]
GROUPSCORE = Path(sys.executable).with_name("groupscore")  # the console script, as a user runs it
MARK = "LIFECYCLE_TEST_MARK"  # not GROUPSCORE_*: `serve` warns about names it does not read
WITHIN_S = 10.0  # "a few seconds": the service's in-flight requests get 5 of them (service/server.py)
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
# Code items whose program outlives any test: the command is ended while nsjail runs them.
SLEEPER = py("import time\ntime.sleep(50)\nprint(6)")


DOUBLE = {"type": "stdio", "stdin": "3\n", "stdout": "6\n"}


def _sleeping_item(item_id: object) -> dict:
    return {"id": item_id, "verifier": "code", "completion": SLEEPER, "time_limit_s": 50, "tests": [DOUBLE]}


# -- /proc ------------------------------------------------------------------------------------------------------------


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, start time) of a process, or None once it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()
    return fields[0].decode(), int(fields[1]), int(fields[19])


def _descendants(root: int) -> dict[int, int]:
    """pid -> start time of every process below `root`."""
    children: dict[int, list[int]] = {}
    starts = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _stat(int(entry))) is not None:
            children.setdefault(stat[1], []).append(int(entry))
            starts[int(entry)] = stat[2]
    found: dict[int, int] = {}
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            found[child] = starts[child]
            todo.append(child)
    return found


def _marked(marker: str) -> dict[int, int]:
    """pid -> start time of every process whose environment carries MARK=marker."""
    needle = f"{MARK}={marker}".encode()
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if needle in Path(f"/proc/{entry}/environ").read_bytes() and (stat := _stat(int(entry))):
                found[int(entry)] = stat[2]
        except OSError:
            pass
    return found


def _running(processes: dict[int, int]) -> dict[int, int]:
    """Those of `processes` (pid -> start time) still running: same start time (not a reused pid), not a zombie."""
    return {
        pid: start
        for pid, start in processes.items()
        if (stat := _stat(pid)) is not None and stat[2] == start and stat[0] not in ("Z", "X")
    }


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


# -- a command under test ---------------------------------------------------------------------------------------------


def interactive_dispositions() -> None:
    """The command starts with the signal dispositions of an interactive shell, whatever the test run inherited: a
    `make test` started by `nohup ... &` ignores SIGHUP, SIGINT and SIGQUIT, and `groupscore` rightly keeps an
    inherited ignored SIGHUP (nohup's contract), which is not what these tests are about."""
    for number in (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT):
        signal.signal(number, signal.SIG_DFL)


@dataclass
class Command:
    argv: list[str]
    # SIGTERM, SIGINT, SIGHUP: sent to the command; "parent": the bash that started it (`&`) is SIGKILLed;
    # "background:SIGINT": started with `&` by a bash, then SIGINT (which it inherited ignored)
    how: str
    cwd: Path
    marker: str = field(default_factory=lambda: uuid.uuid4().hex)
    pid: int = 0
    proc: subprocess.Popen | None = None
    shell: subprocess.Popen | None = None
    log: Path = Path()
    seen: dict[int, int] = field(default_factory=dict)  # the command and every helper found before the signal

    def start(self) -> None:
        env = {**os.environ, **OFFLINE, MARK: self.marker, "PYTHONUNBUFFERED": "1"}
        env.pop("RAY_ADDRESS", None)
        self.log = self.cwd / "command.log"
        out = self.log.open("wb")
        if self.how == "parent" or self.how.startswith("background:"):
            # What a script does: `groupscore ... &`, then wait (a non-interactive bash starts it with SIGINT ignored).
            script = 'exec 3>&1 1>&2; "$@" & echo $! >&3; wait'
            self.shell = subprocess.Popen(
                ["bash", "-c", script, "bash", *self.argv],
                cwd=self.cwd,
                env=env,
                stdout=subprocess.PIPE,
                stderr=out,
                preexec_fn=interactive_dispositions,
            )
            self.pid = int(self.shell.stdout.readline())
        else:
            self.proc = subprocess.Popen(
                self.argv,
                cwd=self.cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=interactive_dispositions,
            )
            self.pid = self.proc.pid
        out.close()
        self.seen[self.pid] = _stat(self.pid)[2]

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]

    def helpers(self) -> dict[int, str]:
        """The command's descendants now, pid -> command line (and remembered for the check after the signal)."""
        found = _descendants(self.pid)
        self.seen.update(found)
        return {pid: _cmdline(pid) for pid in found}

    def wait_until(self, ready: Callable[[Command], bool], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not ready(self):
            assert _running({self.pid: self.seen[self.pid]}), f"{self.argv[1]} ended early:\n{self.output()}"
            assert time.monotonic() < deadline, f"{self.argv[1]} not ready in {timeout_s:.0f} s:\n{self.output()}"
            time.sleep(0.1)

    def end(self, within_s: float = WITHIN_S) -> tuple[int, float]:
        """End the command the test's way; returns (helpers running at the signal, seconds until all were gone)."""
        self.helpers()
        self.seen.update(_marked(self.marker))
        if self.shell is not None:
            self.seen.pop(self.shell.pid, None)
        count = len(_running(self.seen)) - 1
        started = time.monotonic()
        if self.how == "parent":
            self.shell.kill()
            self.shell.wait()
        else:
            os.kill(self.pid, getattr(signal, self.how.split(":")[-1]))
        left = self.seen
        while time.monotonic() - started < within_s:
            if self.proc is not None:
                self.proc.poll()  # reap the command itself (else it lingers as our zombie)
            left = _running({**self.seen, **_marked(self.marker)})
            if not left:
                break
            time.sleep(0.1)
        elapsed = time.monotonic() - started
        assert not left, (
            f"{self.argv[1]} ended by {self.how} ({count} helpers then): {len(left)} processes still running "
            f"{within_s:.0f} s later:\n" + "\n".join(f"  {pid} {_cmdline(pid)[:150]}" for pid in left)
        )
        print(f"{' '.join(self.argv[1:3])} / {self.how}: {count} helpers, all gone {elapsed:.1f} s after the signal")
        return count, elapsed

    def cleanup(self) -> None:
        """Whatever a failed test left: SIGKILL it, so that it cannot disturb the tests after this one."""
        for pid in {**_running(self.seen), **_running(_marked(self.marker))}:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for proc in (self.proc, self.shell):
            if proc is not None:
                if proc.poll() is None:
                    proc.kill()
                proc.wait()
                if proc.stdout is not None:
                    proc.stdout.close()


@pytest.fixture
def command(tmp_path):
    """command(how, *args): a `groupscore ARGS` to start; cleaned up after the test whatever happened."""
    made: list[Command] = []

    def make(how: str, *args: str | Path) -> Command:
        cwd = tmp_path / f"cwd{len(made)}"
        cwd.mkdir()
        made.append(Command([str(GROUPSCORE), *map(str, args)], how, cwd))
        return made[-1]

    yield make
    for cmd in made:
        cmd.cleanup()


def _has(*words: str, count: int = 1) -> Callable[[Command], bool]:
    """Ready once `count` of the command's helpers have each of `words` in their command line."""
    return lambda cmd: sum(all(w in line for w in words) for line in cmd.helpers().values()) >= count


def _ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/readyz", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


# -- the tests --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["SIGHUP", "background:SIGINT", "parent"])
def test_serve_ends_with_its_scoring_processes(command, how):
    port = free_port()
    cmd = command(how, "serve", "--port", port, "--workers", "2")
    cmd.start()
    cmd.wait_until(lambda c: _ready(f"http://127.0.0.1:{port}") and bool(c.helpers()), timeout_s=120)
    count, _ = cmd.end()
    assert count >= 3  # two scoring processes and their template at least


def test_serve_sigterm_with_a_program_running_ends_within_the_shutdown_grace(command):
    """An item whose program runs for 50 s is in flight: uvicorn waited for it (~30 s for a 30 s program); now it
    gets 5 s, then its request is cancelled and its scoring process and nsjail are ended."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = command("SIGTERM", "serve", "--port", port, "--workers", "1")
    cmd.start()
    cmd.wait_until(lambda c: _ready(url), timeout_s=120)
    answered = threading.Event()

    def post() -> None:
        try:
            httpx.post(f"{url}/v1/score", json={"items": [_sleeping_item(1)]}, timeout=120)
        except httpx.TransportError:
            pass  # the server went away under it
        answered.set()

    threading.Thread(target=post, daemon=True).start()
    sent = time.monotonic()
    # its program runs (nsjail is there, and has been for a while: not just the readiness probe's jail)
    cmd.wait_until(lambda c: _has("nsjail")(c) and time.monotonic() - sent > 3, timeout_s=60)
    assert not answered.is_set(), "the request was answered before the signal: nothing was in flight"
    cmd.end()
    assert answered.wait(5)  # answered (an error) or dropped, not left hanging


def test_score_sigint_while_programs_run_ends_at_once(command, tmp_path):
    """Ctrl-C used to leave the batch's threads scoring the rest of the file (minutes here) before the command
    exited; the programs running under nsjail end with it."""
    items = write_jsonl(tmp_path / "items.jsonl", [_sleeping_item(i) for i in range(4)])
    cmd = command("SIGINT", "score", items, "-o", tmp_path / "out.jsonl", "-j", "2", "--no-progress")
    cmd.start()
    cmd.wait_until(_has("nsjail"), timeout_s=60)
    cmd.end()


def test_check_sigterm_ends_the_reward_worker_and_its_children(command):
    cmd = command("SIGTERM", "check", "slow_rewards:slow", "--cases", "cases.jsonl", "--report", "report.json")
    (cmd.cwd / "slow_rewards.py").write_text(
        "import subprocess, time\n\n\ndef slow(prompts, completions, **kwargs):\n"
        "    subprocess.Popen(['sleep', '300'])\n    time.sleep(300)\n    return [0.0 for _ in completions]\n"
    )
    (cmd.cwd / "cases.jsonl").write_text(json.dumps({"prompt": "2+2?", "completion": "4", "answer": "4"}) + "\n")
    cmd.start()
    cmd.wait_until(_has("sleep", "300"), timeout_s=60)
    cmd.end()


@pytest.mark.parametrize("how", ["SIGTERM", "parent"])
def test_demo_ends_with_its_embedded_service_and_jails(command, how):
    """The issue's count: 18 of the demo's helpers (the service, its scoring processes, nsjail and the warm
    templates) were alive 5 s after SIGTERM."""
    cmd = command(how, "demo", "--run-dir", "run")
    cmd.start()
    cmd.wait_until(lambda c: "[2/3]" in c.output() and _has("nsjail")(c), timeout_s=120)  # the code stage: jails
    count, _ = cmd.end()
    assert count >= 8


def test_train_sigterm_ends_the_embedded_service(command):
    """`groupscore train` on the bundled demo config, ended once its embedded service scores (SFT runs by then)."""
    cmd = command("SIGTERM", "train", ROOT / "train" / "demo.yaml", "--set", "run_dir=run")
    cmd.start()
    cmd.wait_until(_has("groupscore", "serve"), timeout_s=180)
    service = next(pid for pid, line in cmd.helpers().items() if "groupscore serve" in line)
    cmd.wait_until(lambda c: len(_descendants(service)) >= 3, timeout_s=120)  # its scoring processes are up
    count, _ = cmd.end()
    assert count >= 4


@pytest.mark.slow
def test_serve_on_ray_started_by_a_script_ends_on_sigint(command):
    """The issue's case: `groupscore serve --ray &` in a script, then SIGINT. It used to be ignored until Serve was up,
    then the blocking delete of the application held the command for 30 s and more, and once Serve's HAProxy was
    left running under init. Now the local cluster, Serve and HAProxy end within seconds."""
    pytest.importorskip("ray")
    cmd = command("background:SIGINT", "serve", "--ray", "--port", free_port())
    cmd.start()
    cmd.wait_until(lambda c: "serving on Ray Serve" in c.output() and bool(c.helpers()), timeout_s=240)
    count, _ = cmd.end(within_s=15)
    assert count >= 5  # GCS, raylet, the dashboard, Serve's controller and proxy at least


@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT", "parent"])
def test_env_run_ends_with_its_sessions_jail_mid_step(command, how):
    """`groupscore env run` replaying a trajectory whose step runs for minutes: its session's jail (nsjail, the
    agent, the step's bash) ends with the command."""
    cmd = command(how, "env", "run", "demo:count-errors", "--trajectory", "calls.json")
    (cmd.cwd / "calls.json").write_text(json.dumps([[{"name": "shell", "arguments": {"command": "sleep 300"}}]]))
    cmd.start()
    cmd.wait_until(lambda c: _has("nsjail")(c) and _has("sleep", "300")(c), timeout_s=60)
    count, _ = cmd.end()
    assert count >= 3  # nsjail, the session's agent, the step's sleep


def test_demo_env_sigterm_ends_its_service_and_session_jails(command):
    """`groupscore demo --env` as the README types it, ended once its episodes have sessions open."""
    cmd = command("SIGTERM", "demo", "--env", "--run-dir", "run")
    cmd.start()
    cmd.wait_until(_has("nsjail", count=2), timeout_s=180)
    count, _ = cmd.end()
    assert count >= 4
