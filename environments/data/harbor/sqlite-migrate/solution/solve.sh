#!/bin/bash
cd /app
python3 - <<'PY'
import sqlite3
con = sqlite3.connect("users.db")
con.execute("ALTER TABLE users ADD COLUMN domain TEXT")
con.execute("UPDATE users SET domain = lower(trim(substr(email, instr(email, '@') + 1)))")
con.execute("CREATE INDEX idx_users_domain ON users(domain)")
con.commit()
PY
