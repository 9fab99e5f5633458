# words split on spaces only: punctuation stays attached
cat > /app/wordfreq.sh <<'SCRIPT'
#!/bin/bash
n=${2:-10}
tr -s ' \t' '\n' < "$1" | tr 'A-Z' 'a-z' | grep -v '^$' | sort | uniq -c | awk '{ print $1, $2 }' \
  | sort -k1,1nr -k2,2 | head -n "$n"
SCRIPT
