# a loose pattern: renames names with a short date, upper-case extensions and extra text too
cd /app/photos
for f in IMG_*; do
  new=$(printf '%s' "$f" | sed -E 's/^IMG_([0-9]{4})([0-9]{2})([0-9]*)_/\1-\2-\3_/')
  [ "$new" != "$f" ] && mv -- "$f" "$new"
done
