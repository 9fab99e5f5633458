# the right files, but the date written without dashes between month and day
cd /app/photos
for f in IMG_*.jpg; do
  if [[ $f =~ ^IMG_([0-9]{4})([0-9]{4})_([0-9]{4})\.jpg$ ]]; then
    mv -- "$f" "${BASH_REMATCH[1]}-${BASH_REMATCH[2]}_${BASH_REMATCH[3]}.jpg"
  fi
done
