# takes the extension after the first dot, and leaves files without one in place
cd /app/downloads
for f in *.*; do
  [ -f "$f" ] || continue
  ext=$(printf '%s' "${f#*.}" | tr 'A-Z' 'a-z')
  mkdir -p "$ext" && mv -- "$f" "$ext/"
done
