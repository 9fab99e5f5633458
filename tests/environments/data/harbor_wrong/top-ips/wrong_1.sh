# ties ordered numerically by address parts, not by text
cd /app
awk '{ n[$1]++ } END { for (ip in n) print n[ip], ip }' access.log | sort -k1,1nr -k2,2V | head -n 5 > top_ips.txt
