# keeps the extension's case: PDF/ and pdf/ both appear
cd /app/downloads
for f in *.*; do
  [ -f "$f" ] || continue
  mkdir -p "${f##*.}" && mv -- "$f" "${f##*.}/"
done
