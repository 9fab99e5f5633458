"""The walk a reader takes through `groupscore train`: every function of ours that runs, in call order, from
`train_command` to the start of GRPO training (or to the end of a dry run); how many modules it visits and how often
it comes back to a module it had left.

    .venv/bin/python tools/call_walk.py train/demo.yaml --dry-run
    .venv/bin/python tools/call_walk.py train/demo.yaml --set run_dir=/tmp/walk --set sft.max_steps=2
    .venv/bin/python tools/call_walk.py train/demo.yaml --dry-run --until prepare   # preparation alone

How it counts (sys.setprofile, the main thread; the embedded service's threads are not followed):
- a stop is a function of groupscore.train (or one of another package of ours that train calls directly: a reader
  of train/ opens it, and not what lies under it) at its first call; later calls of the same function are not new
  stops. Comprehensions, lambdas and dunder methods (dataclass machinery) are not stops, nor functions a library
  calls back (pydantic's validators, TRL's callbacks): the reader follows calls written in our code.
- the modules are those of the stops. A return (marked R) is a stop that enters a module the walk had been in and
  left: not the module of the stop before it, and not one whose function is still on the stack (a function that
  calls out and goes on with its own helpers is read in one visit). Indentation is the depth of our calls.
- `--until grpo` (default) stops the run where TRL's training loop would start (transformers' Trainer.train);
  `--until prepare` where `prepare` returns.

Another version of the code (an older commit, `git archive` into DIR) is walked through its import view:
`python DIR/tools/import_graph.py --view DIR/view`, then this script with PYTHONPATH=DIR/view.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

PACKAGE = "groupscore."
TRAIN = "groupscore.train."


class WalkEnds(BaseException):  # not an error: where the walk ends (past any `except Exception`)
    """Raised where the walk ends (the start of GRPO training), to stop the run there."""


@dataclass(frozen=True)
class Stop:
    module: str  # groupscore.train's modules by their own name (`taskset`), others under groupscore (`client.http`)
    function: str
    callers: tuple[str, ...]  # the modules of our functions on the stack when it was called, innermost first


@dataclass
class Walk:
    stops: list[Stop] = field(default_factory=list)  # first calls, in call order
    seen: set[tuple[str, str]] = field(default_factory=set)
    ended: bool = False  # the walk's end was reached: what unwinds after it is not part of it

    def record(self, frame: FrameType, event: str, _arg: Any) -> None:
        if event != "call" or self.ended:
            return
        module = frame.f_globals.get("__name__", "")
        if not module.startswith(PACKAGE):
            return
        name = frame.f_code.co_qualname
        if name.startswith("<") or ".<" in name or name.rsplit(".", 1)[-1].startswith("__"):
            return
        caller = frame.f_back
        while caller is not None and caller.f_globals.get("__name__") == "__main__":
            caller = caller.f_back  # this script's own wrappers (--until prepare) stand for the call they make
        if caller is not None and caller.f_code.co_name == "<module>":
            return  # a class body run by an import
        if self.stops and (caller is None or not caller.f_globals.get("__name__", "").startswith(PACKAGE)):
            return  # run by a library (pydantic's validators, TRL's callbacks), not called by our code
        callers = []
        while caller is not None:
            outer = caller.f_globals.get("__name__", "")
            if outer.startswith(PACKAGE) and not outer.startswith(TRAIN):
                return  # under a function of another package of ours (one that train called): not train's walk
            if outer.startswith(TRAIN):
                if not callers and (_short(outer), caller.f_code.co_qualname) not in self.seen:
                    return  # called by a function that is no stop (a validator pydantic ran)
                callers.append(_short(outer))
            caller = caller.f_back
        key = (_short(module), name)
        if key not in self.seen:
            self.seen.add(key)
            self.stops.append(Stop(key[0], name, tuple(callers)))

    def returns(self) -> list[bool]:
        """Per stop: whether it re-enters a module the walk had left (one not on the stack, nor the previous stop's)."""
        out, visited, previous = [], set(), None
        for stop in self.stops:
            entered = stop.module != previous and stop.module not in stop.callers
            out.append(entered and stop.module in visited)
            visited.add(stop.module)
            previous = stop.module
        return out

    def summary(self) -> str:
        returns = self.returns()
        lines = [
            f"{i:3d} {'R' if back else ' '} {'  ' * len(stop.callers)}{stop.module}.{stop.function}"
            for i, (stop, back) in enumerate(zip(self.stops, returns), 1)
        ]
        again: dict[str, int] = {}
        for stop, back in zip(self.stops, returns):
            if back:
                again[stop.module] = again.get(stop.module, 0) + 1
        modules = len({stop.module for stop in self.stops})
        lines.append(
            f"{len(self.stops)} stops in {modules} modules; {sum(returns)} returns to a module already left (R)"
            + (f": {', '.join(f'{m} {n}x' for m, n in sorted(again.items(), key=lambda kv: -kv[1]))}" if again else "")
        )
        return "\n".join(lines)


def _short(module: str) -> str:
    return module.removeprefix(TRAIN).removeprefix(PACKAGE)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", type=Path)
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--until", choices=("grpo", "prepare"), default="grpo")
    args = parser.parse_args(argv)
    walk = Walk()

    import transformers

    from groupscore.train import commands

    train = transformers.Trainer.train

    def stop_at_grpo(trainer: Any, *rest: Any, **kwargs: Any) -> Any:
        from trl import GRPOTrainer

        if isinstance(trainer, GRPOTrainer):
            walk.ended = True
            raise WalkEnds  # the walk ends where GRPO's training loop starts
        return train(trainer, *rest, **kwargs)  # SFT's

    transformers.Trainer.train = stop_at_grpo  # type: ignore[method-assign]
    if args.until == "prepare":
        holders = [
            m
            for name, m in sys.modules.items()
            if name.startswith(TRAIN) and getattr(getattr(m, "prepare", None), "__name__", "") == "prepare"
        ]
        original = holders[0].prepare

        def prepare_then_stop(config: Any) -> Any:
            original(config)
            walk.ended = True
            raise WalkEnds

        for module in holders:  # wherever `prepare` is called from
            if module.prepare is original:
                module.prepare = prepare_then_stop
    sys.setprofile(walk.record)
    try:
        commands.train_command(args.config, dry_run=args.dry_run, sets=args.set)
    except WalkEnds:
        pass
    finally:
        sys.setprofile(None)
    print(walk.summary())
    return 0


if __name__ == "__main__":
    sys.exit(main())
