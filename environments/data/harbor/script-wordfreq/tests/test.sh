#!/bin/bash
# The script is run on texts it has never seen (fixed seeds: the same texts every run) and compared with a reference.
mkdir -p /logs/verifier
/usr/bin/python3 - <<'PY'
import collections, random, re, subprocess, tempfile

def reference(text, n):
    counts = collections.Counter(w.lower() for w in re.findall(r"[A-Za-z]+", text))
    return "".join(f"{c} {w}\n" for w, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n])

def text_for(seed):
    rng = random.Random(seed)
    vocab = ["Alpha", "beta", "GAMMA", "delta", "it's", "x-ray", "zeta", "eta9theta", "Iota", "kappa", "lambda"]
    vocab += ["".join(rng.choice("abcdefgh") for _ in range(rng.randint(1, 3))) for _ in range(12)]
    words = [rng.choice(vocab) for _ in range(rng.randint(50, 400))]
    seps = [" ", "  ", ", ", ". ", "\n", "; ", "\t", "--", " (", ") ", "! "]
    return "".join(w + rng.choice(seps) for w in words)

cases = [(text_for(s), n) for s, n in [(1, 5), (2, 10), (3, 1), (4, 25), (5, 10)]]
cases.append(("Only, only ONLY once", 10))
cases.append(("", 4))
passed = 0
for i, (text, n) in enumerate(cases):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as fh:
        fh.write(text)
    args = ["bash", "/app/wordfreq.sh", fh.name] + ([str(n)] if n != 10 or i % 2 else [])
    try:
        out = subprocess.run(args, capture_output=True, text=True, timeout=10).stdout
    except subprocess.TimeoutExpired:
        out = None
    good = out == reference(text, n)
    passed += good
    print(f"case {i}: {'ok' if good else 'wrong'}")
open("/logs/verifier/reward.txt", "w").write("1" if passed == len(cases) else "0")
PY
