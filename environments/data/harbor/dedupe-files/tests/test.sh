#!/bin/bash
mkdir -p /logs/verifier
/usr/bin/python3 - <<'PY'
import os
remaining = {"2023/beach.jpg": "beach1\n", "2023/sunset.jpg": "sunset\n", "2024/beach.jpg": "beach2\n",
             "2024/solo.png": "solo\n", "misc/doc (1).txt": "doc\n"}
removed = "2024/sunset_copy.jpg\nmisc/a.jpg\nmisc/doc.txt\n"
found = {}
for folder, _, files in os.walk("/app/media"):
    for name in files:
        path = os.path.join(folder, name)
        found[os.path.relpath(path, "/app/media")] = open(path).read()
try:
    listed = open("/app/removed.txt").read()
except OSError:
    listed = ""
ok = found == remaining and listed == removed
print(sorted(found), repr(listed))
open("/logs/verifier/reward.txt", "w").write("1" if ok else "0")
PY
