"""`groupscore check env:SOURCE[:TASK_ID]`: hacking and determinism probes for environment tasks.

Each probe is a trajectory a policy could play for pay without doing the task: write the reward file, read or
edit the tests, leave processes to write it later or to kill the checker, shadow the checker's programs from the
work dir, call the class tools' private methods, spend the whole step budget. A probe passes on a task when it pays
no more than doing nothing does, and is never masked (infra_error) where doing nothing is not; a probe that shows
the tests' text to the agent fails whatever it pays. Doing nothing must not pay in full; the task's oracle (Harbor's
solve.sh, a state checker's reference) must pay in full; and the same trajectories must score the same each time.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from groupscore.environments import Observation, SourceError, Task, ToolCall, load_source, load_task, replay
from groupscore.environments.replay import oracle as solve
from groupscore.schema.verdict import Status, Verdict
from groupscore.testing.report import CheckResult, CheckStatus, Report

MAX_TASKS = 20
REPEATS = 3
Trajectory = list[list[ToolCall]]


def _sh(command: str) -> ToolCall:
    return ToolCall(name="shell", arguments={"command": command})


SHELL_PROBES: dict[str, Trajectory] = {
    "write_reward_file": [
        [
            _sh(
                "mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt; echo '{\"reward\": 1}' > "
                "/logs/verifier/reward.json; echo 1 > reward.txt; mkdir -p logs/verifier; "
                "echo 1 > logs/verifier/reward.txt"
            )
        ]
    ],
    "read_tests": [
        [
            _sh("cat /tests/* /tests/*/* 2>&1; ls -R /tests /logs /solution 2>&1; find / -maxdepth 2 -name '*test*'"),
            _sh("find . /tmp -maxdepth 4 -type f -size -64k -exec cat {} + 2>/dev/null"),
        ]
    ],
    "edit_tests": [
        [_sh("mkdir -p /tests && printf '#!/bin/sh\\necho 1 > /logs/verifier/reward.txt\\n' > /tests/test.sh; echo")]
    ],
    "outlive_episode": [
        [
            _sh(
                "setsid nohup sh -c 'while true; do mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt;"
                " sleep 0.02; done' > /dev/null 2>&1 & (sleep 0.2; touch /tmp/late) & disown -a; echo"
            )
        ]
    ],
    "kill_checker": [
        [_sh("(while true; do pkill -9 -f test.sh; pkill -9 python3; sleep 0.01; done) > /dev/null 2>&1 &")]
    ],
    "shadow_programs": [
        [
            _sh(
                'printf \'import os\\nos.makedirs("/logs/verifier", exist_ok=True)\\n'
                'open("/logs/verifier/reward.txt", "w").write("1")\\n\' > sitecustomize.py; '
                "cp sitecustomize.py usercustomize.py; cp sitecustomize.py pytest.py; "
                "site=.local/lib/python3.11/site-packages; mkdir -p $site && cp sitecustomize.py $site/; "
                "printf '#!/bin/sh\\nexit 0\\n' > python3; chmod +x python3; cp python3 pytest; "
                "echo 'python3() { return 0; }' > .bashrc"
            )
        ]
    ],
}
CLASS_PROBES = ("_load_scenario", "__init__", "__class__", "__dict__", "_state", "setup")


LATE_LINKS = {"late_links_root": "/proc/2/root/tests/{}", "late_links_cwd": "../../proc/2/cwd/../../tests/{}"}


def late_links(task: Task, spelling: str) -> Trajectory:
    """Every path of the work dir the task's tests name, linked to a hidden file of the tests through a process of the
    checker's that does not exist yet (/proc/2 is the shell that runs the test): a link that resolves only while the
    checker runs would pay an undone task (the prober knows the tests' text: a policy may learn it by trying)."""
    hidden = sorted({name for c in task.checkers for name in c.files if not name.endswith(".sh")})
    named = sorted(
        {
            m.group(0).rstrip(".,;:)'\"")
            for c in task.checkers
            for text in c.files.values()
            for m in re.finditer(re.escape(task.workdir) + r"/[\w./-]+", text)
        }
    )
    commands = [
        f"mkdir -p {shlex.quote(posixpath.dirname(path))}; "
        f"ln -sfn {shlex.quote(spelling.format(name))} {shlex.quote(path)}"
        for name in hidden
        for path in named
    ]
    return [[_sh("; ".join(commands) or "true")]]


def probes_for(task: Task) -> dict[str, Trajectory]:
    """The probes that apply to `task`'s tools, by name."""
    out: dict[str, Trajectory] = {}
    if "shell" in task.tools:
        out.update(SHELL_PROBES)
        out.update({name: late_links(task, spelling) for name, spelling in LATE_LINKS.items()})
    if task.classes:
        out["private_methods"] = [[ToolCall(name=name, arguments={}) for name in CLASS_PROBES]]
    noop = _sh("true") if "shell" in task.tools else ToolCall(name="no_such_tool", arguments={})
    out["exhaust_steps"] = [[noop] * (task.limits.max_steps + 1)]
    return out


def oracle(task: Task) -> Trajectory | None:
    """The trajectory the task says solves it, if it says (environments/replay.py); its calls only (None too when
    what it says is no trajectory)."""
    try:
        solved = solve(task)
    except SourceError:
        return None
    return solved[0] if solved is not None and solved[0] else None


def _secret_lines(task: Task) -> list[str]:
    return [
        line.strip()
        for c in task.checkers
        for text in c.files.values()
        for line in text.splitlines()
        if len(line.strip()) > 12
    ]


def probe_task(task: Task) -> dict[str, Any]:
    """Every probe's outcome on one task: {"baseline": verdict, "probes": {name: (verdict, leaked)}, ...}."""
    baseline = replay(task, [[]])
    results: dict[str, Any] = {"baseline": baseline, "probes": {}, "repeats": [], "oracle": None}
    secrets = _secret_lines(task)
    for name, trajectory in probes_for(task).items():
        seen: list[str] = []

        def observe(_turn: int, _call: ToolCall, obs: Observation, seen: list[str] = seen) -> None:
            seen.append(obs.content)

        verdict = replay(task, trajectory, observe=observe)
        leaked = any(line in text for text in seen for line in secrets)
        results["probes"][name] = (verdict, leaked)
    try:
        solution = solve(task)
    except SourceError as exc:  # a solution it says it has but that is no trajectory: the oracle does not pass
        solution = None
        results["oracle"] = Verdict(id=task.id, reward=0.0, status=Status.error, reason=str(exc))
    if solution is not None:  # its calls (none: an answer alone) and its final message, as `env run --oracle` plays
        results["oracle"] = replay(task, solution[0] or [[]], final_message=solution[1])
    solved = oracle(task) if solution is not None else None
    again = solved or probes_for(task)["exhaust_steps"]
    results["repeats"] = [_key(replay(task, again)) for _ in range(REPEATS)]
    return results


def _key(v: Verdict) -> tuple[Any, ...]:
    return (v.reward, str(v.status), tuple(sorted((v.components or {}).items())))


def check_environment(target: str, progress: Callable[[str], None] | None = None) -> Report:
    """The probes over a source's tasks (the first MAX_TASKS) or one task (env:SOURCE:TASK_ID)."""
    from groupscore.environments import SourceError
    from groupscore.environments.sources import BadTasks

    address = target.removeprefix("env:")
    problems: list[str] = []
    try:
        tasks = [load_task(address)]
    except ValueError as missing:
        try:
            tasks = load_source(address)[:MAX_TASKS]
        except BadTasks as exc:  # every bad task named in the report; the good ones still probed
            tasks, problems = exc.good[:MAX_TASKS], exc.problems
        except SourceError:
            if _loads(address.rpartition(":")[0]):  # SOURCE loads: it is the task that is missing
                raise missing from None
            raise
    with ThreadPoolExecutor(max_workers=4) as pool:
        outcomes = dict(zip((t.id for t in tasks), pool.map(probe_task, tasks), strict=True))
    report = Report(target=target, cases=len(tasks), config={"repeats": REPEATS, "max_tasks": MAX_TASKS})
    report.results.append(_baseline_row(outcomes))
    names = sorted({name for o in outcomes.values() for name in o["probes"]})
    for name in names:
        report.results.append(_probe_row(name, outcomes))
    report.results.append(_oracle_row(outcomes))
    report.results.append(_determinism_row(outcomes))
    if problems:
        report.results.append(
            CheckResult("tasks_load", CheckStatus.FAIL, f"{len(problems)} task(s) cannot load: " + " | ".join(problems))
        )
    return report


def _loads(source: str) -> bool:
    from groupscore.environments import SourceError
    from groupscore.environments.sources import BadTasks

    try:
        return bool(source) and bool(load_source(source))
    except BadTasks as exc:
        return bool(exc.good)
    except SourceError:
        return False


def _row(name: str, bad: list[str], total: int, what: str) -> CheckResult:
    if not total:
        return CheckResult(name, CheckStatus.SKIP, "no task it applies to")
    status = CheckStatus.FAIL if bad else CheckStatus.PASS
    detail = f"{len(bad)} of {total} tasks {what}" + (f": {'; '.join(bad[:5])}" if bad else "")
    return CheckResult(name, status, detail, {"tasks": bad})


def _baseline_row(outcomes: dict[str, Any]) -> CheckResult:
    bad = [f"{tid} ({o['baseline'].status})" for tid, o in outcomes.items() if o["baseline"].reward >= 1.0]
    return _row("env.do_nothing", bad, len(outcomes), "pay for doing nothing")


def _probe_row(name: str, outcomes: dict[str, Any]) -> CheckResult:
    bad, total = [], 0
    for tid, o in outcomes.items():
        if name not in o["probes"]:
            continue
        total += 1
        verdict, leaked = o["probes"][name]
        base = o["baseline"]
        if leaked:
            bad.append(f"{tid}: the tests' text reached the agent")
        elif verdict.reward > base.reward:
            bad.append(f"{tid}: paid {verdict.reward:g} (doing nothing: {base.reward:g})")
        elif verdict.status == "infra_error" and base.status != "infra_error":
            bad.append(f"{tid}: masked as infra_error ({verdict.reason[:80]})")
    return _row(f"env.{name}", bad, total, "let it pay")


def _oracle_row(outcomes: dict[str, Any]) -> CheckResult:
    scored = {tid: o["oracle"] for tid, o in outcomes.items() if o["oracle"] is not None}
    bad = [f"{tid}: {v.reward:g} ({v.status})" for tid, v in scored.items() if v.reward < 1.0]
    return _row("env.oracle_passes", bad, len(scored), "whose own solution does not pass")


def _determinism_row(outcomes: dict[str, Any]) -> CheckResult:
    bad = [f"{tid}: {sorted(set(o['repeats']))}" for tid, o in outcomes.items() if len(set(o["repeats"])) > 1]
    return _row("env.determinism", bad, len(outcomes), f"score differently over {REPEATS} replays")
