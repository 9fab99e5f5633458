"""Host cost of answers: CPU and peak memory to read (and judge) the worst answers a jail can return, before and after.

    .venv/bin/python bench/decode_bench.py [--before REV] [--limit-s 8]

A candidate's process can write any bytes on its answer pipe, up to the 8 MiB frame cap, so each case below is an
answer text at (or near) that cap, or the size at which the old reader's cost already shows. Each case is read by
both readers, each in a fresh process (so that peak memory is its own): "before" is `parse_answer` and `host_eval`
of git revision REV (default: main before issue 10's family 4, literals read by ast.literal_eval), "after" those of
this checkout (JSON, bounded). A case that "judges" also evaluates a host assert on the value, as the code verifier
would. A reading past --limit-s seconds of CPU is stopped and shown as "> limit" (with its peak so far). CPU is the
reading process's own; "peak" is how far its maximum RSS rose above what it held with the text in memory.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BEFORE_REV = "be62d36"  # main when issue 10 family 4 started: answers read by ast.literal_eval
HASH_MODULUS = 2**61 - 1  # hash(k * HASH_MODULUS) == 0: ints that collide in every set and dict
FRAME_BYTES = 8 << 20


def colliding_ints(count: int) -> str:
    return ", ".join(str(HASH_MODULUS * k) for k in range(1, count + 1))


def colliding_ints_in_frame() -> str:
    """As many colliding ints as fit one frame."""
    parts, size, k = [], 16, 1
    while size + 26 < FRAME_BYTES:
        parts.append(str(HASH_MODULUS * k))
        size += len(parts[-1]) + 2
        k += 1
    return ", ".join(parts)


def full_frame_count(per_item: int) -> int:
    return (FRAME_BYTES - 64) // per_item


# name -> (what it is, text builder(side), host assert or None, env). Texts use double quotes: both readers' syntax.
CASES = {
    "colliding set, 15k ints": (
        "forged frame: a set whose ints all hash to 0",
        lambda side: f'["set", {colliding_ints(15_000)}]',
        None,
        {},
    ),
    "colliding set, full frame": (
        "as above, 8 MiB of it (~330k ints)",
        lambda side: f'["set", {colliding_ints_in_frame()}]',
        None,
        {},
    ),
    "colliding dict keys, 15k": (
        "forged frame: a dict whose keys all hash to 0",
        lambda side: '["dict", ' + ", ".join(f"[{HASH_MODULUS * k}, 0]" for k in range(1, 15_001)) + "]",
        None,
        {},
    ),
    "list of colliding ints, set() in an assert": (
        "honest list; the test asserts len(set(f(x))) == 3",
        lambda side: f'["list", {colliding_ints(15_000)}]',
        "len(set(r0)) == 3",
        {},
    ),
    "[0] * 2.7M": (
        "honest return value at the frame cap",
        lambda side: '["list", ' + "0, " * 2_699_999 + "0]",
        None,
        {},
    ),
    "nested empty lists, full frame": (
        "forged: ~930k one-element containers",
        lambda side: '["list", ' + '["list"], ' * full_frame_count(10) + '["list"]]',
        None,
        {},
    ),
    "int of 1.5M digits, digit limit off": (
        "forged; PYTHONINTMAXSTRDIGITS=0 on the host",
        lambda side: '["list", ' + "7" * 1_500_000 + "]",
        None,
        {"PYTHONINTMAXSTRDIGITS": "0"},
    ),
    "string of 1.3M escapes": (
        "forged: one string of \\u escapes",
        lambda side: '["list", "' + "\\u00e9" * 1_300_000 + '"]',
        None,
        {},
    ),
    "deep nesting, 3M levels": ("forged: brackets only", lambda side: "[" * 3_000_000 + "]" * 3_000_000, None, {}),
    "honest: 500k distinct ints": (
        "a large honest answer (list(range(500_000)))",
        lambda side: '["list", ' + ", ".join(map(str, range(500_000))) + "]",
        None,
        {},
    ),
}
SMALL_ANSWER = [1, 2.5, "abc", (1, 2), {"k": [None, True]}, {3, 4}]  # a HumanEval-sized answer, read 20,000 times


def load_readers(side: str, before_rev: str):
    """(parse_answer, host_eval module, encode-to-text) of one side."""
    if side == "after":
        from groupscore.verifiers.code import host_eval, jail_runner

        return jail_runner.parse_answer, host_eval, lambda v: jail_runner.json_text(jail_runner.encode_value(v))
    modules = {}
    for name, path in (
        ("old_jail_runner", "verifiers/code/jail_runner.py"),
        ("old_host_eval", "verifiers/code/host_eval.py"),
    ):
        source = subprocess.run(
            ["git", "-C", str(REPO), "show", f"{before_rev}:{path}"], capture_output=True, text=True, check=True
        ).stdout
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as handle:
            handle.write(source)
        spec = importlib.util.spec_from_file_location(name, handle.name)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        os.unlink(handle.name)
        modules[name] = module
    runner = modules["old_jail_runner"]
    return runner.parse_answer, modules["old_host_eval"], lambda v: repr(runner.encode_value(v))


def measure_case(name: str, side: str, before_rev: str) -> dict:
    """In the child process: read one case's text and report CPU, peak RSS growth and what came of it."""
    parse, host_eval, encode_text = load_readers(side, before_rev)
    if name == "small":
        texts = [encode_text(SMALL_ANSWER)] * 20_000
        base_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        started = time.process_time()
        for text in texts:
            parse(text)
        cpu_s = time.process_time() - started
        return {
            "cpu_s": cpu_s,
            "peak_mb": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base_kb) / 1024,
            "outcome": f"{cpu_s / len(texts) * 1e6:.1f} us per answer",
            "text": f"{len(texts[0])} B each",
        }
    _, build, judge, _ = CASES[name]
    text = build(side)
    base_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"base {base_kb}", flush=True)  # for the parent, should it have to stop this reading
    started = time.process_time()
    try:
        value = parse(text)
        outcome = f"read ({type(value).__name__})"
        if judge is not None:
            outcome += f", assert -> {host_eval.evaluate(ast.parse(judge, mode='eval').body, {'r0': value})}"
    except Exception as exc:  # noqa: BLE001 - a refusal is the outcome being measured
        outcome = f"refused: {type(exc).__name__}: {str(exc)[:60]}"
    cpu_s = time.process_time() - started
    return {
        "cpu_s": cpu_s,
        "peak_mb": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base_kb) / 1024,
        "outcome": outcome,
        "text": f"{len(text) / 1e6:.1f} MB",
    }


def run_case(name: str, side: str, before_rev: str, limit_s: float) -> dict:
    """Run one reading in a child; stop it once it has used `limit_s` of CPU (its peak so far is still reported)."""
    env = {**os.environ, **(CASES[name][3] if name in CASES else {})}
    command = [sys.executable, __file__, "--child", name, "--side", side, "--before", before_rev]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    ticks = os.sysconf("SC_CLK_TCK")
    stopped_peak_kb = None
    while child.poll() is None:
        time.sleep(0.1)
        try:
            with open(f"/proc/{child.pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            cpu_s = (int(fields[11]) + int(fields[12])) / ticks  # utime + stime
            if cpu_s > limit_s:
                with open(f"/proc/{child.pid}/status") as status:
                    stopped_peak_kb = next(int(line.split()[1]) for line in status if line.startswith("VmHWM"))
                child.kill()
        except (OSError, StopIteration, IndexError, ValueError):
            pass  # it has just exited
    out, err = child.communicate()
    lines = out.strip().splitlines()
    base_kb = next((int(line.split()[1]) for line in lines if line.startswith("base ")), None)
    if stopped_peak_kb is not None:
        peak = None if base_kb is None else (stopped_peak_kb - base_kb) / 1024
        return {"cpu_s": None, "peak_mb": peak, "outcome": f"stopped after {limit_s:g} s of CPU"}
    if child.returncode != 0 or not lines or lines[-1].startswith("base "):
        return {"cpu_s": None, "peak_mb": None, "outcome": f"died: {(err.strip().splitlines() or ['?'])[-1][:80]}"}
    return json.loads(lines[-1])


def cell(result: dict, limit_s: float) -> str:
    if result["cpu_s"] is None:
        peak = "" if result["peak_mb"] is None else f" / {result['peak_mb']:.0f} MB so far"
        return f"> {limit_s:g} s{peak}"
    return f"{result['cpu_s']:.3f} s / {result['peak_mb']:.0f} MB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", default=BEFORE_REV, help="git revision of the old readers")
    parser.add_argument("--limit-s", type=float, default=8.0, help="stop a reading after this much CPU time")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--side", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure_case(args.child, args.side, args.before)))
        return
    print(
        f"# decode_bench: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"load {os.getloadavg()[0]:.1f}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; before = {args.before}"
    )
    print("| answer | text | before: CPU / peak | after: CPU / peak | before | after |")
    print("| --- | --- | --- | --- | --- | --- |")
    started = time.monotonic()
    for name in [*CASES, "small"]:
        before = run_case(name, "before", args.before, args.limit_s)
        after = run_case(name, "after", args.before, args.limit_s)
        size = after.get("text") or before.get("text") or "?"
        label = name if name != "small" else "honest: small answer x 20,000"
        print(
            f"| {label} | {size} | {cell(before, args.limit_s)} | {cell(after, args.limit_s)} | "
            f"{before['outcome']} | {after['outcome']} |",
            flush=True,
        )
    print(f"# {time.monotonic() - started:.0f} s in all")


if __name__ == "__main__":
    main()
