#!/bin/bash
cd /app
python3 - <<'PY'
import json
users = json.load(open("input/users.json"))["users"]
active = [u for u in users if u.get("active") is True]
out = [{"name": u["name"], "email": u.get("email"), "admin": "admin" in u.get("roles", [])}
       for u in sorted(active, key=lambda u: u["name"].lower())]
json.dump(out, open("active_users.json", "w"), indent=2)
PY
