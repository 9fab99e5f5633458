#!/bin/bash
# stats.py is run on files it has never seen (fixed seeds) and compared with the statistics module.
mkdir -p /logs/verifier
/usr/bin/python3 - <<'PY'
import random, statistics, subprocess, tempfile

def expected(values):
    return (f"count {len(values)}\nmean {statistics.fmean(values):.2f}\n"
            f"median {statistics.median(values):.2f}\nmax {max(values):.2f}\n")

def case(seed):
    rng = random.Random(seed)
    values = [round(rng.uniform(-500, 500), rng.choice([0, 1, 2])) for _ in range(rng.randint(1, 30))]
    lines = []
    for v in values:
        if rng.random() < 0.2:
            lines.append(rng.choice(["", "# note", "   "]))
        lines.append(str(int(v)) if v == int(v) and rng.random() < 0.5 else str(v))
    return values, "\n".join(lines) + ("\n" if seed % 2 else "")

cases = [case(s) for s in range(1, 13)]
cases.append(([-3.0, -1.0, -2.0, -7.5], "-3\n-1\n-2\n-7.5"))
cases.append(([5.0], "# one\n5"))
passed = 0
for i, (values, text) in enumerate(cases):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as fh:
        fh.write(text)
    try:
        out = subprocess.run(["/usr/bin/python3", "/app/stats.py", fh.name], capture_output=True, text=True,
                             timeout=10).stdout
    except subprocess.TimeoutExpired:
        out = ""
    good = out == expected(values)
    passed += good
    print(f"case {i}: {'ok' if good else 'wrong: ' + out.replace(chr(10), ' | ')}")
open("/logs/verifier/reward.txt", "w").write("1" if passed == len(cases) else "0")
PY
