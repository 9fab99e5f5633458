#!/bin/bash
mkdir -p /logs/verifier
/usr/bin/python3 - <<'PY'
import random
r = random.Random(8)
t0 = 1710237600
web = [(s, "2024-03-12T%02d:%02d:%02dZ web request %d" % (10 + s // 3600, s // 60 % 60, s % 60, i))
       for i, s in enumerate(sorted(r.sample(range(0, 3600), 40)))]
api = [(s, "2024-03-12T%02d:%02d:%02dZ api call %d" % (10 + s // 3600, s // 60 % 60, s % 60, i))
       for i, s in enumerate(sorted(r.sample(range(0, 3600), 40)))]
expected = "".join(line + "\n" for _, line in sorted(web + api))
try:
    got = open("/app/merged.log").read()
except OSError:
    got = ""
print("merged.log", "matches" if got == expected else "differs")
open("/logs/verifier/reward.txt", "w").write("1" if got == expected else "0")
PY
