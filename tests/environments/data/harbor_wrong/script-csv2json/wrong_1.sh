# every number-like field through float(): "1e5", "+4" and " 5" become numbers, integers become floats
cat > /app/csv2json.py <<'PY'
import csv, json, sys
def typed(v):
    if v == "":
        return None
    try:
        f = float(v)
        return int(f) if f.is_integer() else f
    except ValueError:
        return v
rows = list(csv.reader(sys.stdin))
json.dump([dict(zip(rows[0], map(typed, r))) for r in rows[1:]], sys.stdout)
PY
