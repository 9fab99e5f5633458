# keeps one rotated file too many
cat > /app/rotate.sh <<'SCRIPT'
dir=$1; keep=$2
[ -e "$dir/app.log" ] || exit 0
for ((n = keep; n >= 1; n--)); do
  [ -e "$dir/app.log.$n" ] && mv "$dir/app.log.$n" "$dir/app.log.$((n + 1))"
done
mv "$dir/app.log" "$dir/app.log.1"
: > "$dir/app.log"
SCRIPT
