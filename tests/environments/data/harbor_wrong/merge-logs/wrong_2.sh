# converted in local time with an offset written as +00:00 and the web lines left out
cd /app/logs
while read -r epoch rest; do
  printf '%s %s\n' "$(date -d "@$epoch" --iso-8601=seconds)" "$rest"
done < api.log > /app/merged.log
