#!/bin/bash
cd /app
awk '{ n[$1]++ } END { for (ip in n) print n[ip], ip }' access.log | LC_ALL=C sort -k1,1nr -k2,2 | head -n 5 > top_ips.txt
