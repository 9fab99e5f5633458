# the right counts, but ties left in reverse order
cd /app
awk '$2 == "ERROR" { c = $3; gsub(/[][]/, "", c); n[c]++ } END { for (c in n) print c, n[c] }' logs/service.log \
  | sort -k2,2nr -k1,1r > errors_by_component.txt
