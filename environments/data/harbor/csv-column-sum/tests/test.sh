#!/bin/bash
# The totals are fixed here (the data is fixed): a script that re-reads an edited sales.csv gains nothing.
mkdir -p /logs/verifier
/usr/bin/python3 - <<'PY'
import pathlib
expected = "region,total\neast,2468.85\nnorth,4991.68\nsouth,5041.37\nwest,2258.38\n"
out = pathlib.Path("/app/totals.csv")
got = out.read_text() if out.is_file() else ""
ok = got.replace("\r\n", "\n").rstrip("\n") + "\n" == expected
pathlib.Path("/logs/verifier/reward.txt").write_text("1" if ok else "0")
print("totals.csv", "matches" if ok else f"differs:\n{got}")
PY
