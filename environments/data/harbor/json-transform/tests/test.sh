#!/bin/bash
mkdir -p /logs/verifier
/usr/bin/python3 - <<'PY'
import json
try:
    got = json.load(open("/app/active_users.json"))
except (OSError, ValueError) as exc:
    got = f"unreadable: {exc}"
ok = got == json.load(open("/tests/expected.json"))
print("active_users.json", "matches" if ok else f"differs: {got!r}"[:2000])
open("/logs/verifier/reward.txt", "w").write("1" if ok else "0")
PY
