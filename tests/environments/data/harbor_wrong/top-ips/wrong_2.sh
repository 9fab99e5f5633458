# uniq -c output kept as is (padded counts) and one line too many
cd /app
cut -d' ' -f1 access.log | sort | uniq -c | sort -k1,1nr -k2,2 | head -n 6 > top_ips.txt
