# right parsing, but sorted by total instead of by region
cd /app
python3 - <<'PY'
import csv
totals = {}
for row in csv.DictReader(open("data/sales.csv", newline="")):
    totals[row["region"]] = totals.get(row["region"], 0) + float(row["amount"])
with open("totals.csv", "w") as out:
    out.write("region,total\n")
    for region, total in sorted(totals.items(), key=lambda kv: kv[1]):
        out.write(f"{region},{total:.2f}\n")
PY
