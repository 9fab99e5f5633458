#!/bin/bash
cat > /app/rotate.sh <<'SCRIPT'
#!/bin/bash
# Rotate DIR/app.log, keeping at most KEEP rotated copies.
dir=$1
keep=$2
[ -e "$dir/app.log" ] || exit 0
for f in "$dir"/app.log.*; do
  n=${f##*.}
  [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge "$keep" ] && rm -f -- "$f"
done
for ((n = keep - 1; n >= 1; n--)); do
  [ -e "$dir/app.log.$n" ] && mv -- "$dir/app.log.$n" "$dir/app.log.$((n + 1))"
done
mv -- "$dir/app.log" "$dir/app.log.1"
: > "$dir/app.log"
exit 0
SCRIPT
