# trims, but compares case-sensitively
cd /app/data
sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' contacts.txt | awk 'NF && !seen[$0]++' | tr 'A-Z' 'a-z' > unique.txt
