#!/bin/bash
mkdir -p /logs/verifier
expected='data/lost.txt
data/part3.txt
data/part6.txt
data/sub/b c.txt'
ok=1
[ "$(cat /app/bad_files.txt 2>/dev/null)" = "$expected" ] || { echo "bad_files.txt differs"; ok=0; }
[ "$(cat /app/extracted/data/part2.txt 2>/dev/null)" = "$(seq 2 9)" ] || { echo "not unpacked"; ok=0; }
[ -f /app/extracted/SHA256SUMS ] && [ "$(wc -l < /app/extracted/SHA256SUMS)" = 10 ] || { echo "no SHA256SUMS"; ok=0; }
echo $ok > /logs/verifier/reward.txt
