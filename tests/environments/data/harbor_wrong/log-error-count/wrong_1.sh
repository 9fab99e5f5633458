# counts every line that mentions ERROR, warnings about upstream errors included
cd /app
grep ERROR logs/service.log | sed -E 's/.*\[([a-z]+)\].*/\1/' | sort | uniq -c | sort -k1,1nr -k2,2 \
  | awk '{ print $2, $1 }' > errors_by_component.txt
