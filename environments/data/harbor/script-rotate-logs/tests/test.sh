#!/bin/bash
# rotate.sh runs on folders it has never seen, several times in a row, against a model of the rotation.
mkdir -p /logs/verifier
/usr/bin/python3 - <<'PY'
import os, random, re, subprocess, tempfile

def model(files, keep):
    if "app.log" not in files:
        return dict(files)
    rotated = lambda name: re.fullmatch(r"app\.log\.[0-9]+", name)
    out = {k: v for k, v in files.items() if k != "app.log" and not rotated(k)}
    for name, text in files.items():
        if rotated(name):
            n = int(name.rsplit(".", 1)[1])
            if n < keep:
                out[f"app.log.{n + 1}"] = text
    out["app.log.1"] = files["app.log"]
    out["app.log"] = ""
    return out

def snapshot(d):
    return {n: open(os.path.join(d, n)).read() for n in os.listdir(d)}

passed = total = 0
for seed in range(1, 9):
    rng = random.Random(seed)
    keep = rng.randint(1, 5)
    d = tempfile.mkdtemp()
    files = {"other.txt": "not a log\n", "app.log.bak": "backup\n"}
    if seed != 4:
        files["app.log"] = f"live {seed}\n"
    for n in rng.sample(range(1, 8), rng.randint(0, 5)):
        files[f"app.log.{n}"] = f"old {n}\n"
    for name, text in files.items():
        open(os.path.join(d, name), "w").write(text)
    for round_ in range(3):
        proc = subprocess.run(["bash", "/app/rotate.sh", d, str(keep)], capture_output=True, timeout=10)
        files = model(files, keep)
        if "app.log" in files and round_ < 2:
            open(os.path.join(d, "app.log"), "a").write(f"round {round_}\n")
            files["app.log"] += f"round {round_}\n"
        total += 1
        good = proc.returncode == 0 and snapshot(d) == files
        passed += good
        if not good:
            print(f"seed {seed} keep {keep} round {round_}: {sorted(snapshot(d).items())} != {sorted(files.items())}")
print(passed, "of", total)
open("/logs/verifier/reward.txt", "w").write("1" if passed == total else "0")
PY
