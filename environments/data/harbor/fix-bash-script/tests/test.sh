#!/bin/bash
# The fixed script runs on folders it has never seen (awkward names) and is compared with a reference.
mkdir -p /logs/verifier
/usr/bin/python3 - <<'PY'
import os, random, subprocess, tempfile

def reference(d):
    names = sorted(n for n in os.listdir(d) if n.endswith(".txt") and os.path.isfile(os.path.join(d, n)))
    lines, total = [], 0
    for n in names:
        count = open(os.path.join(d, n), "rb").read().count(b"\n")
        lines.append(f"{count} {n}")
        total += count
    return "\n".join(lines + [f"total {total}"]) + "\n"

layouts = [
    {"my notes.txt": 3, "b.txt": 1, "Z.txt": 2, "skip.md": 4},
    {},
    {"only.md": 2},
    {"-dash.txt": 2, "*star.txt": 1, "a  b.txt": 5, "tab\there.txt": 2},
    {"x.txt": 0, "y.txt": 1000},
]
passed = 0
for i, files in enumerate(layouts):
    d = os.path.join(tempfile.mkdtemp(), "folder with space" if i % 2 == 0 else "plain")
    os.makedirs(d)
    os.makedirs(os.path.join(d, "sub.txt"))  # a folder named like a text file is not a file
    for name, count in files.items():
        open(os.path.join(d, name), "w").write("".join(f"line {k}\n" for k in range(count)))
    try:
        out = subprocess.run(["bash", "/app/count_lines.sh", d], capture_output=True, text=True, timeout=10).stdout
    except subprocess.TimeoutExpired:
        out = ""
    good = out == reference(d)
    passed += good
    print(f"layout {i}: {'ok' if good else 'wrong: ' + repr(out)}")
open("/logs/verifier/reward.txt", "w").write("1" if passed == len(layouts) else "0")
PY
