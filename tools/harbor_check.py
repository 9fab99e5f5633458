"""Check Harbor tasks without the session jail: every oracle scores 1 and every wrong solution less, in a chroot.

    .venv/bin/python tools/harbor_check.py [TASK_DIR_OR_DIRS ...] [--wrong DIR]   # as root (mount namespaces)

A stand-in for the real episode (tests/environments/test_harbor_tasks.py runs them through sessions), for writing
tasks on a machine where the jail is not at hand: each run gets a fresh tmpfs root with the host's /usr read-only,
an empty /etc, the task's work dir built from its Dockerfile (files, then the steps), the solution run there as one
shell command, and only then /tests and /logs, for `bash /tests/test.sh`.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from groupscore.environments.harbor import load_harbor
from groupscore.environments.task import Task

DEFAULT_TASKS = Path(__file__).resolve().parents[1] / "environments" / "data" / "harbor"
DEFAULT_WRONG = Path(__file__).resolve().parents[1] / "tests" / "environments" / "data" / "harbor_wrong"

READ_ONLY = "/usr/bin /usr/lib /usr/lib64 /usr/share/zoneinfo /usr/share/misc /etc/alternatives /usr/lib/locale"
DRIVER = r"""
set -e
R="$STAGE/root"; mkdir -p "$R"
mount -t tmpfs -o size=256m tmpfs "$R"
mkdir -p "$R"/usr "$R"/dev "$R"/proc "$R"/tmp "$R"/etc "$R"/logs/verifier
ln -s usr/bin "$R/bin"; ln -s usr/lib "$R/lib"; ln -s usr/lib64 "$R/lib64"
for d in $READ_ONLY; do  # what the session jail shows of the host (environments/jails.py SHELL_RO)
  [ -e "$d" ] || continue; mkdir -p "$R$d"; mount --bind "$d" "$R$d"; mount -o remount,bind,ro "$R$d"
done
mount --rbind /dev "$R/dev"; mount -t proc proc "$R/proc"
chmod 1777 "$R/tmp"
mkdir -p "$R$WORKDIR"; cp -a "$STAGE/files/." "$R$WORKDIR/"
in_jail() { timeout "$1" chroot "$R" /usr/bin/env -i PATH=/usr/bin:/bin HOME="$WORKDIR" $TASK_ENV \
    /bin/bash --noprofile --norc -c "cd \"\$0\" && $2" "$WORKDIR"; }
for step in "$STAGE"/steps/*; do
  [ -e "$step" ] || break
  in_jail 120 "$(cat "$step")" || { echo "BUILD FAILED: $step"; exit 3; }
done
set +e
in_jail 120 "$(cat "$STAGE/solution.sh")" > "$STAGE/solution.out" 2>&1
echo "solution exit: $?"
mkdir -p "$R/tests"; cp -a "$STAGE/tests/." "$R/tests/"
in_jail 120 "PYTHONSAFEPATH=1 PYTHONDONTWRITEBYTECODE=1 bash /tests/test.sh" > "$STAGE/test.out" 2>&1
echo "test exit: $?"
[ -f "$R/logs/verifier/reward.txt" ] && echo "REWARD_TXT $(head -c 200 "$R/logs/verifier/reward.txt")"
[ -f "$R/logs/verifier/reward.json" ] && echo "REWARD_JSON $(head -c 2000 "$R/logs/verifier/reward.json" | tr -d '\n')"
exit 0
"""


def reward_of(output: str) -> float:
    for line in output.splitlines():
        if line.startswith("REWARD_TXT "):
            return float(line.split(None, 1)[1].strip() or 0)
        if line.startswith("REWARD_JSON "):
            return float(json.loads(line.split(None, 1)[1])["reward"])
    return 0.0


def run(task: Task, solution: str, keep: bool = False) -> tuple[float, str]:
    """The reward `solution` (shell text) earns on `task`, and what the run printed."""
    with tempfile.TemporaryDirectory(prefix="harbor-check-") as stage_name:
        stage = Path(stage_name)
        for name, text in task.files.items():
            (stage / "files" / name).parent.mkdir(parents=True, exist_ok=True)
            (stage / "files" / name).write_text(text)
        (stage / "files").mkdir(exist_ok=True)
        (stage / "steps").mkdir()
        for i, command in enumerate(task.metadata.get("build_commands", [])):
            (stage / "steps" / f"{i:03d}").write_text(command)
        for name, text in task.checkers[0].files.items():
            (stage / "tests" / name).parent.mkdir(parents=True, exist_ok=True)
            (stage / "tests" / name).write_text(text)
        (stage / "solution.sh").write_text(solution)
        env = " ".join(shlex.quote(f"{k}={v}") for k, v in task.env.items())
        proc = subprocess.run(
            ["unshare", "-m", "--propagation", "private", "bash", "-c", DRIVER],
            env={
                "STAGE": str(stage),
                "WORKDIR": task.workdir,
                "TASK_ENV": env,
                "READ_ONLY": READ_ONLY,
                "PATH": "/usr/sbin:/usr/bin:/bin",
            },
            capture_output=True,
            text=True,
            timeout=600,
        )
        out = proc.stdout + proc.stderr
        for name in ("solution.out", "test.out"):
            if (stage / name).exists():
                out += f"\n--- {name}\n" + (stage / name).read_text(errors="replace")[-3000:]
        return reward_of(proc.stdout), out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tasks", nargs="*", type=Path, default=[DEFAULT_TASKS])
    parser.add_argument("--wrong", type=Path, default=DEFAULT_WRONG, help="wrong solutions: WRONG/<task>/wrong_*.sh")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every run's output")
    args = parser.parse_args()
    failures, runs = [], 0
    for path in args.tasks:
        for task in load_harbor(path, build=False):
            attempts = [("oracle", task.metadata["solution_text"], True)]
            attempts += [(p.name, p.read_text(), False) for p in sorted((args.wrong / task.id).glob("wrong_*.sh"))]
            if len(attempts) < 3:
                failures.append(f"{task.id}: {len(attempts) - 1} wrong solutions (at least 2)")
            for name, text, should_pass in attempts:
                reward, out = run(task, text)
                runs += 1
                ok = reward == 1.0 if should_pass else reward < 1.0
                print(f"{'ok ' if ok else 'BAD'} {task.id:28} {name:10} reward {reward:g}")
                if not ok or args.verbose:
                    print("    " + out.strip().replace("\n", "\n    "))
                if not ok:
                    failures.append(f"{task.id} {name}: reward {reward:g}")
    print(f"{runs} runs, {len(failures)} failures" + "".join(f"\n  {f}" for f in failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
