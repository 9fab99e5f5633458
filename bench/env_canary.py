"""Leak canary for environment sessions: each session first looks for what earlier sessions left, then leaves some.

    .venv/bin/python bench/env_canary.py [--sessions 10000] [--threads 4] [--batch 500] [--deep-every 5] [--json]

A session gets a token (`gsleak-` and 16 hex digits) and, in order:
1. looks (shell, sqlite, python): any other session's token in file names or contents of every place it can list
   (/, its work dir and $HOME, /tmp, /var/tmp, /run, /dev, /dev/shm, /dev/mqueue, /etc), in any process's command
   line or environment, its own environment, abstract unix socket names, the hostname; and, since it has left nothing
   yet, any SysV IPC object, POSIX message queue, listening TCP socket, leftover `sleep`/`python3` process, database
   row or interpreter global at all;
2. leaves: files in all of those places it can write, background processes (`&`, nohup, setsid, a double fork, a
   python3 holding an abstract unix socket and a TCP listener), an exported variable, a line in ~/.bashrc, SysV
   queue, shared memory and semaphore (ipcmk), a hostname change (refused, normally), a database row, and a global
   and an environment variable in the python tool's interpreter;
3. looks again with no token excused: what it left must be visible to the probes (their sensitivity);
4. every `--deep-every`-th session is scored: its hidden test runs the look over the final state in the checker's
   jail (reward 1 for nothing foreign there), then the session is closed.

After each batch, with every session closed, the host is checked: no nsjail of ours and no process running as a
jail's host uid, every cgroup slot back in the pool and empty, every host id back, and no token in the host's
/tmp, /var/tmp, /dev/shm, SysV IPC or abstract sockets.

Printed: per kind, how many sessions saw foreign residue (the aim: 0 everywhere), how many saw their own (the
probe works), which writes the jail refused, and the host checks.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from groupscore.environments import Sessions, Task, ToolCall

TOKEN_RE = re.compile(r"gsleak-[0-9a-f]{16}")

# The look: counts, one `kind=N` each, of residue not excused (the token in $1; "none" excuses nothing); the last four
# count every object of their kind (the first look comes before this session has left any).
LOOK = r"""
own="$1"
export TMPDIR=/tmp  # the jail's TMPDIR names /work, which a session does not have
tok() { grep -aoE 'gsleak-[0-9a-f]{16}' | grep -vx -- "$own" | sort -u | wc -l; }
paths=$(find / "$HOME" /app /tmp /var/tmp /run /dev /dev/shm /dev/mqueue /etc /.session -xdev -maxdepth 4 2>/dev/null)
echo "files=$(printf '%s\n' "$paths" | tok)"
files=$(find / "$HOME" /app /tmp /var/tmp /run /dev/shm /dev/mqueue /etc /.session -xdev -maxdepth 4 -type f \
  -size -1024k -print0 2>/dev/null | xargs -0 grep -D skip -aohsE 'gsleak-[0-9a-f]{16}' -- 2>/dev/null)
echo "contents=$(printf '%s\n' "$files" | tok)"
echo "cmdlines=$(cat /proc/[0-9]*/cmdline /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | tok)"
echo "env=$(env | tok)"
echo "sockets=$(ss -xalH 2>/dev/null | tok)"
echo "hostname=$( { hostname; cat /proc/sys/kernel/hostname; } 2>/dev/null | tok)"
echo "ipc=$( { ipcs -m; ipcs -q; ipcs -s; } 2>/dev/null | grep -c '^0x')"
echo "mqueue=$(ls -A /dev/mqueue 2>/dev/null | wc -l)"
echo "listeners=$(ss -tlnH 2>/dev/null | wc -l)"
n=0
for p in /proc/[0-9]*; do
  [ "${p#/proc/}" = 1 ] && continue
  read -r c < "$p/comm" 2>/dev/null; case "$c" in sleep|python3*) n=$((n+1));; esac
done
echo "processes=$n"
"""

# The leaving: `left_<kind>=1` for each write that took.
LEAVE = r"""
t="$1"
for d in / "$HOME" /app /tmp /var/tmp /run /dev /dev/shm /dev/mqueue /etc /.session; do
  name=$(echo "$d" | tr / _)
  if ( echo "$t" > "$d/$t" ) 2>/dev/null; then echo "left_file$name=1"; else echo "left_file$name=0"; fi
done
mkdir -p /tmp/.d && echo "$t" > /tmp/.d/.hidden && echo "left_file_hidden=1"
echo "export GSLEAK=$t" >> "$HOME/.bashrc" && echo "left_bashrc=1"
export GSLEAK_ENV="$t"
(exec -a "$t-bg" sleep 1000) >/dev/null 2>&1 &
nohup bash -c "exec -a $t-nohup sleep 1000" >/dev/null 2>&1 &
setsid -f bash -c "exec -a $t-setsid sleep 1000" >/dev/null 2>&1 < /dev/null
( (exec -a "$t-doublefork" sleep 1000) >/dev/null 2>&1 & ) &
GSLEAK_ENV="$t" nohup python3 -S -c '
import os, socket, time
u = socket.socket(socket.AF_UNIX); u.bind("\0" + os.environ["GSLEAK_ENV"]); u.listen()
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1", 40123)); s.listen()
print("up", flush=True)
time.sleep(1000)' > /tmp/.listener 2>&1 &
disown -a
ipcmk -Q >/dev/null 2>&1 && echo left_ipc_queue=1 || echo left_ipc_queue=0
ipcmk -M 4096 >/dev/null 2>&1 && echo left_ipc_shm=1 || echo left_ipc_shm=0
ipcmk -S 1 >/dev/null 2>&1 && echo left_ipc_sem=1 || echo left_ipc_sem=0
hostname "$t" >/dev/null 2>&1 && echo left_hostname=1 || echo left_hostname=0
for i in $(seq 100); do grep -q up /tmp/.listener 2>/dev/null && break; sleep 0.01; done
grep -q up /tmp/.listener && echo left_sockets=1 || echo left_sockets=0
"""

PY_LOOK = "import builtins, os\nprint('python=%d' % sum(('gsleak' in k) for k in dir(builtins)))"
PY_LEAVE = "import builtins, os\nsetattr(builtins, 'gsleak_' + T, T)\nos.environ['GSLEAK_PY'] = T\nprint('ok')"

TEST_SH = f"""#!/bin/bash
set -u
cat > /tmp/.look.sh <<'LOOK_EOF'
{LOOK}
LOOK_EOF
out=$(bash /tmp/.look.sh "$(cat /app/.gs-token)")
rm -f /tmp/.look.sh
echo "$out"
bad=$(printf '%s\\n' "$out" | grep -v '=0$' | wc -l)
if [ "$bad" = 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
"""


def canary_task() -> Task:
    return Task(
        id="leak-canary",
        turns=[{"messages": [{"role": "user", "content": "look, then leave"}]}],
        tools=("shell", "sqlite", "python", "write_file"),
        database={"sql": "CREATE TABLE notes(token TEXT);"},
        checkers=[{"kind": "tests", "files": {"test.sh": TEST_SH}}],
        limits={"max_steps": 64, "step_time_s": 20.0},
    )


def counts(text: str) -> dict[str, int]:
    return {k: int(v) for k, v in re.findall(r"^(\w+)=(\d+)$", text, flags=re.M)}


class Tally:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sessions = 0
        self.scored = 0
        self.looked: Counter[str] = Counter()  # kind -> sessions that looked for it
        self.foreign: Counter[str] = Counter()  # kind -> sessions that saw residue of another session
        self.own: Counter[str] = Counter()  # kind -> sessions whose second look saw what they left
        self.left: Counter[str] = Counter()  # write -> sessions where it took
        self.checker_foreign = 0  # scored sessions whose checker saw foreign residue (reward 0)
        self.errors: list[str] = []
        self.examples: list[str] = []
        self.host: list[dict[str, Any]] = []
        self.seconds = 0.0

    def add(self, first: dict[str, int], second: dict[str, int], left: dict[str, int], reward: float | None) -> None:
        with self.lock:
            self.sessions += 1
            for kind, n in first.items():
                self.looked[kind] += 1
                if n:
                    self.foreign[kind] += 1
            for kind, n in second.items():
                if n:
                    self.own[kind] += 1
            for kind, n in left.items():
                if n:
                    self.left[kind] += 1
            if reward is not None:
                self.scored += 1
                self.checker_foreign += reward != 1.0


def shell(sessions: Sessions, sid: str, command: str) -> str:
    obs = sessions.step(sid, ToolCall(name="shell", arguments={"command": command}))
    return obs.content


def one_session(sessions: Sessions, task: Task, n: int, deep_every: int, tally: Tally) -> None:
    """Look, leave; every `deep_every`-th session also uses the python tool, looks again (sensitivity) and is
    scored (its checker looks too)."""
    token = "gsleak-" + uuid.uuid4().hex[:16]
    deep = deep_every > 0 and n % deep_every == 0
    sid = sessions.reset(task).session_id
    try:
        call = lambda name, **args: sessions.step(sid, ToolCall(name=name, arguments=args)).content  # noqa: E731
        call("write_file", path="/app/.look.sh", content=LOOK)
        first = counts(shell(sessions, sid, f"bash /app/.look.sh {token}"))
        first["database"] = rows(call("sqlite", query="SELECT count(*) AS n FROM notes"))
        if deep:
            first.update(counts(call("python", code=PY_LOOK)))
        call("write_file", path="/app/.gs-token", content=token)
        call("write_file", path="/app/.leave.sh", content=LEAVE)
        left = counts(shell(sessions, sid, f"bash /app/.leave.sh {token}"))
        call("sqlite", query=f"INSERT INTO notes VALUES ('{token}')")
        second: dict[str, int] = {}
        reward = None
        if deep:
            call("python", code=f"T = {token!r}\n" + PY_LEAVE)
            second = counts(shell(sessions, sid, "bash /app/.look.sh none"))
            second["database"] = rows(call("sqlite", query="SELECT count(*) AS n FROM notes"))
            second.update(counts(call("python", code=PY_LOOK)))
        if len(first) < 11 or (deep and len(second) < 12) or not left:
            raise RuntimeError(f"a probe did not answer: {first} {second} {left}")
        if deep:
            verdict = sessions.score(sid)
            if verdict.status.value == "infra_error":
                raise RuntimeError(f"scoring: {verdict.reason}")
            reward = verdict.reward
            if reward != 1.0:
                with tally.lock:
                    tally.examples.append(json.dumps(verdict.details)[:2000])
        tally.add(first, second, left, reward)
        if any(first.values()):
            with tally.lock:
                tally.examples.append(f"session {n}: {first}")
    except Exception as exc:  # noqa: BLE001 counted and shown; the canary goes on
        with tally.lock:
            tally.errors.append(f"session {n}: {type(exc).__name__}: {exc}"[:500])
    finally:
        sessions.close(sid)


def rows(text: str) -> int:
    last = text.strip().splitlines()[-1:] or ["?"]
    return int(last[0]) if last[0].isdigit() else -1


# -- the host's side ---------------------------------------------------------------------------------------------------


def host_snapshot() -> dict[str, Any]:
    """What the host holds now that a session could have left."""
    from groupscore.sandbox.uids import id_pool

    ours = set(id_pool()._held)
    me = os.getpid()
    ps = subprocess.run(["ps", "-eo", "pid=,ppid=,uid=,stat=,comm="], capture_output=True, text=True).stdout
    procs = [line.split(None, 4) for line in ps.split("\n") if line.strip()]
    jail_uid = [p for p in procs if int(p[2]) in ours and not p[3].startswith("Z")]
    zombies = [p for p in procs if int(p[2]) in ours and p[3].startswith("Z")]
    nsjails = [p for p in procs if p[4].startswith("nsjail") and int(p[1]) == me]
    tokens = 0
    for d in ("/tmp", "/var/tmp", "/dev/shm", "/run"):
        try:
            tokens += sum(1 for name in os.listdir(d) if TOKEN_RE.search(name))
        except OSError:
            pass
    sockets = len(TOKEN_RE.findall(Path("/proc/net/unix").read_text()))
    ipc = sum(len(Path(f"/proc/sysvipc/{k}").read_text().splitlines()) - 1 for k in ("msg", "shm", "sem"))
    return {
        "jail_uid_processes": len(jail_uid),
        "jail_uid_zombies": len(zombies),  # dead, waiting for the host's init to reap them
        "our_nsjails": len(nsjails),
        "host_token_files": tokens,
        "host_token_sockets": sockets,
        "host_sysv_ipc": ipc,
        **slot_state(),
    }


def slot_state() -> dict[str, int]:
    from groupscore.sandbox.harness import slot_pool
    from groupscore.sandbox.uids import id_pool

    pool, ids = slot_pool(), id_pool()
    busy_slots, names = set(), set()
    for parent in pool._parents.values():
        for slot in parent.glob("slot-*"):  # one dir per controller (v1): counted by name
            names.add(slot.name)
            if {int(p) for p in (slot / "cgroup.procs").read_text().split()} - {os.getpid()}:
                busy_slots.add(slot.name)
    return {
        "slot_dirs": len(names),
        "slots_made": pool._count,
        "slots_free": len(pool._free),
        "slots_with_processes": len(busy_slots),
        "host_ids_held": len(ids._held),
        "host_ids_free": len(ids._free),
    }


def host_leaks(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    out = []
    for key in (
        "jail_uid_processes",
        "jail_uid_zombies",
        "our_nsjails",
        "host_token_files",
        "host_token_sockets",
        "slots_with_processes",
    ):
        if after[key] > before[key]:  # what the process held before (a warm template's jail) is not the sessions'
            out.append(f"{key}={before[key]} -> {after[key]}")
    if after["host_sysv_ipc"] > before["host_sysv_ipc"]:
        out.append(f"host SysV IPC objects {before['host_sysv_ipc']} -> {after['host_sysv_ipc']}")
    # Slots in use (made and not back in the pool) and slot dirs not in the pool: neither may grow across sessions.
    busy = {
        k: (v["slots_made"] - v["slots_free"], v["slot_dirs"] - v["slots_free"])
        for k, v in (("b", before), ("a", after))
    }
    if any(a > b for a, b in zip(busy["a"], busy["b"], strict=True)):
        out.append(f"slots: {after['slots_made']} made, {after['slots_free']} free, {after['slot_dirs']} dirs")
    ids = {k: v["host_ids_held"] - v["host_ids_free"] for k, v in (("before", before), ("after", after))}
    if ids["after"] > ids["before"]:
        out.append(f"host ids in use: {ids['before']} -> {ids['after']}")
    return out


def run(total: int, threads: int, batch: int, deep_every: int, progress: bool = True) -> Tally:
    sessions, task, tally = Sessions(max_sessions=max(64, threads * 2)), canary_task(), Tally()
    before = host_snapshot()
    t0 = time.monotonic()
    try:
        with ThreadPoolExecutor(threads) as pool:
            for start in range(0, total, batch):
                ids = range(start, min(total, start + batch))
                list(pool.map(lambda n: one_session(sessions, task, n, deep_every, tally), ids))
                assert sessions.open_count() == 0
                time.sleep(1.1)  # host ids rest 1 s after their jail before they count as free
                after = host_snapshot()
                for _ in range(50):  # a closed jail's agent can wait a while as a zombie of the host's init
                    if not after["jail_uid_zombies"]:
                        break
                    time.sleep(0.1)
                    after = {**host_snapshot(), "zombies_seen": after.get("zombies_seen", after["jail_uid_zombies"])}
                leaks = host_leaks(before, after)
                tally.host.append({"after": ids.stop, "leaks": leaks, **after})
                if progress:
                    rate = ids.stop / (time.monotonic() - t0)
                    print(
                        f"[{time.strftime('%H:%M:%S')}] {ids.stop} sessions, {rate:.1f}/s; foreign residue: "
                        f"{dict(tally.foreign) or 0}; checker saw foreign: {tally.checker_foreign}; "
                        f"errors {len(tally.errors)}; host: {leaks or 'clean'}",
                        flush=True,
                    )
    finally:
        sessions.close_all()
        tally.seconds = time.monotonic() - t0
    return tally


def report(tally: Tally) -> dict[str, Any]:
    return {
        "sessions": tally.sessions,
        "seconds": round(tally.seconds, 1),
        "sessions_per_s": round(tally.sessions / max(tally.seconds, 1e-9), 2),
        "scored": tally.scored,
        "looked": dict(tally.looked),
        "foreign_residue_sessions": dict(tally.foreign),
        "checker_saw_foreign": tally.checker_foreign,
        "own_residue_seen": dict(tally.own),
        "writes_that_took": dict(tally.left),
        "errors": len(tally.errors),
        "error_examples": tally.errors[:5],
        "examples": tally.examples[:5],
        "host_batches": len(tally.host),
        "host_leaks": [h for h in tally.host if h["leaks"]],
        "host_last": tally.host[-1] if tally.host else None,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=10_000)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--batch", type=int, default=500, help="sessions between host checks")
    ap.add_argument(
        "--deep-every",
        type=int,
        default=5,
        help="every N-th session also uses the python tool, looks again and is scored (0: none)",
    )
    ap.add_argument("--out", help="also write the report here (JSON)")
    ap.add_argument("--json", action="store_true", help="no progress lines, only the report")
    args = ap.parse_args()
    tally = run(args.sessions, args.threads, args.batch, args.deep_every, progress=not args.json)
    out = report(tally)
    print(json.dumps(out, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    clean = not tally.foreign and not tally.checker_foreign and not out["host_leaks"] and not tally.errors
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
