# right rotation, but no new app.log and old numbers above KEEP left behind
cat > /app/rotate.sh <<'SCRIPT'
dir=$1; keep=$2
[ -e "$dir/app.log" ] || exit 0
rm -f "$dir/app.log.$keep"
for ((n = keep - 1; n >= 1; n--)); do
  [ -e "$dir/app.log.$n" ] && mv "$dir/app.log.$n" "$dir/app.log.$((n + 1))"
done
mv "$dir/app.log" "$dir/app.log.1"
true
SCRIPT
