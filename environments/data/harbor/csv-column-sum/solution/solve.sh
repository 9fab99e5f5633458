#!/bin/bash
cd /app
python3 - <<'PY'
import csv
from decimal import Decimal
totals = {}
with open("data/sales.csv", newline="") as fh:
    for row in csv.DictReader(fh):
        totals[row["region"]] = totals.get(row["region"], Decimal(0)) + Decimal(row["amount"])
with open("totals.csv", "w") as out:
    out.write("region,total\n")
    for region in sorted(totals):
        out.write(f"{region},{totals[region]:.2f}\n")
PY
