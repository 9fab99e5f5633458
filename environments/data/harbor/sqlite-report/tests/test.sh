#!/bin/bash
mkdir -p /logs/verifier
/usr/bin/python3 - <<'PY'
import hashlib, sqlite3
expected = "customer,revenue\nEmber,10453.17\nGranite,8285.51\nDune,6824.06\n"
try:
    got = open("/app/top_customers.csv").read().replace("\r\n", "\n")
except OSError:
    got = ""
# The database must be as built: the same paid 2024 orders (a changed table would make any answer "right").
con = sqlite3.connect("file:/app/shop.db?mode=ro", uri=True)
rows = con.execute("SELECT count(*), sum(total_cents) FROM orders").fetchone()
ok = got.rstrip("\n") + "\n" == expected and rows == (300, 14239446)
print("report", repr(got), "orders", rows)
open("/logs/verifier/reward.txt", "w").write("1" if ok else "0")
PY
