#!/bin/bash
cat > /app/wordfreq.sh <<'SCRIPT'
#!/bin/bash
# Top N words of a file: letters only, lower-cased, by count then alphabetically.
file=$1
n=${2:-10}
tr -cs 'A-Za-z' '\n' < "$file" | tr 'A-Z' 'a-z' | grep -v '^$' | LC_ALL=C sort | uniq -c \
  | awk '{ print $1, $2 }' | LC_ALL=C sort -k1,1nr -k2,2 | head -n "$n"
SCRIPT
chmod +x /app/wordfreq.sh
