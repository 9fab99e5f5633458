#!/bin/bash
cd /app
python3 - <<'PY'
path = "stats.py"
src = open(path).read()
src = src.replace("for i in range(len(lines) - 1):", "for i in range(len(lines)):")
src = src.replace("    return values[len(values) // 2]\n",
                  "    mid = len(values) // 2\n"
                  "    if len(values) % 2:\n"
                  "        return values[mid]\n"
                  "    return (values[mid - 1] + values[mid]) / 2\n")
src = src.replace("    best = 0\n    for v in values:", "    best = values[0]\n    for v in values:")
open(path, "w").write(src)
PY
