#!/bin/bash
cd /app/media
find . -type f -printf '%P\n' | LC_ALL=C sort | while IFS= read -r f; do
  printf '%s\t%s\n' "$(sha256sum < "$f" | cut -d' ' -f1)" "$f"
done | awk -F'\t' 'seen[$1]++ { print $2 }' | LC_ALL=C sort > /app/removed.txt
while IFS= read -r f; do rm -- "$f"; done < /app/removed.txt
