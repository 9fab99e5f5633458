#!/bin/bash
# Partial credit: the share of paths with the asked mode (content unchanged).
mkdir -p /logs/verifier
/usr/bin/python3 - <<'PY'
import json, os, stat
want = {"scripts/deploy.sh": 0o755, "scripts/backup.sh": 0o755, "scripts/README.txt": 0o644,
        "secrets": 0o700, "secrets/api.key": 0o600, "secrets/db.pass": 0o600,
        "public": 0o755, "public/css": 0o755, "public/index.html": 0o644, "public/css/site.css": 0o644}
content = {"scripts/deploy.sh": "#!/bin/bash\necho deploy\n", "secrets/api.key": "key=abc\n",
           "public/css/site.css": "body{}\n", "scripts/README.txt": "notes\n"}
right = {}
for rel, mode in want.items():
    try:
        right[rel] = stat.S_IMODE(os.lstat(f"/app/site/{rel}").st_mode) == mode
    except OSError:
        right[rel] = False
for rel, text in content.items():
    try:
        right[f"{rel} content"] = open(f"/app/site/{rel}").read() == text
    except OSError:
        right[f"{rel} content"] = False
print({k: v for k, v in right.items() if not v} or "all modes right")
json.dump({"reward": round(sum(right.values()) / len(right), 4)}, open("/logs/verifier/reward.json", "w"))
PY
