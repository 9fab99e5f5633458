#!/bin/bash
mkdir -p /logs/verifier
/usr/bin/python3 - <<'PY'
expected = {
    "a.txt": b"Title\n\nFirst line\nsecond line\n\n\nend\n",
    "b.txt": b"unix line\nwith trailing\nspaces\n",
    "c.txt": b"mixed\nline\nlast\n",
    "notes.md": b"keep\r\n",
}
got = {}
for name in expected:
    try:
        got[name] = open(f"/app/docs/{name}", "rb").read()
    except OSError:
        got[name] = None
bad = [n for n in expected if got[n] != expected[n]]
print("differ:", bad, [got[n] for n in bad])
open("/logs/verifier/reward.txt", "w").write("0" if bad else "1")
PY
