#!/bin/bash
cd /app/docs
for f in *.txt; do
  python3 - "$f" <<'PY'
import sys
path = sys.argv[1]
text = open(path, newline="").read().replace("\r\n", "\n")
lines = [line.rstrip(" \t") for line in text.split("\n")]
open(path, "w", newline="").write("\n".join(lines).rstrip("\n") + "\n")
PY
done
