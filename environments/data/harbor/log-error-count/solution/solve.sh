#!/bin/bash
cd /app
awk '$2 == "ERROR" { c = $3; gsub(/[][]/, "", c); n[c]++ } END { for (c in n) print c, n[c] }' logs/service.log \
  | LC_ALL=C sort -k2,2nr -k1,1 > errors_by_component.txt
