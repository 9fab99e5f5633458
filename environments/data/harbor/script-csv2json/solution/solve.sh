#!/bin/bash
cat > /app/csv2json.py <<'PY'
"""CSV on standard input to a JSON array of objects on standard output, fields typed."""
import csv
import json
import re
import sys


def typed(field):
    if field == "":
        return None
    if re.fullmatch(r"-?[0-9]+", field):
        return int(field)
    if "." in field:
        try:
            return float(field)
        except ValueError:
            pass
    return field


reader = csv.reader(sys.stdin)
header = next(reader, [])
json.dump([{k: typed(v) for k, v in zip(header, row)} for row in reader], sys.stdout, ensure_ascii=False)
PY
