#!/bin/bash
mkdir -p /logs/verifier
/usr/bin/python3 - <<'PY'
import sqlite3
expected = [(1, "Ann", "ann@Example.COM", "example.com"), (2, "Bob", "bob@mail.org", "mail.org"),
            (3, "Cy", "cy@sub.Example.com", "sub.example.com"), (4, "Di", "DI@MAIL.ORG", "mail.org"),
            (5, "Ed", "ed@example.com ", "example.com"), (6, "Flo", "flo@x.io", "x.io")]
ok = False
try:
    con = sqlite3.connect("file:/app/users.db?mode=ro", uri=True)
    rows = con.execute("SELECT id, name, email, domain FROM users ORDER BY id").fetchall()
    index = con.execute("SELECT sql FROM sqlite_master WHERE type = 'index' AND name = 'idx_users_domain'").fetchone()
    columns = [r[2] for r in con.execute("PRAGMA index_info('idx_users_domain')")]
    ok = rows == expected and index is not None and columns == ["domain"]
    print(rows, index, columns)
except sqlite3.Error as exc:
    print("database:", exc)
open("/logs/verifier/reward.txt", "w").write("1" if ok else "0")
PY
