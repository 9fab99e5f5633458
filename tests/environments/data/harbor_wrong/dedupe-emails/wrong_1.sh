# sort -u: right set, wrong order
cd /app/data
tr 'A-Z' 'a-z' < contacts.txt | sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' | grep -v '^$' | sort -u > unique.txt
