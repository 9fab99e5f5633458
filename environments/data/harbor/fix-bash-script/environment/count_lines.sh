#!/bin/bash
# Usage: count_lines.sh DIR
# Prints "LINES NAME" for each *.txt file directly in DIR (by name), then "total LINES".
total=0
for f in $(ls $1/*.txt); do
  n=$(wc -l < $f)
  echo "$n $(basename $f)"
  total=$((total + n))
done
echo "total $total"
