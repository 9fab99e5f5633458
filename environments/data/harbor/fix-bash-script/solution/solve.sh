#!/bin/bash
cat > /app/count_lines.sh <<'SCRIPT'
#!/bin/bash
# Usage: count_lines.sh DIR
# Prints "LINES NAME" for each *.txt file directly in DIR (by name), then "total LINES".
export LC_ALL=C  # plain character order for the glob
shopt -s nullglob
total=0
for f in "$1"/*.txt; do
  [ -f "$f" ] || continue
  n=$(wc -l < "$f")
  echo "$n ${f##*/}"
  total=$((total + n))
done
echo "total $total"
SCRIPT
