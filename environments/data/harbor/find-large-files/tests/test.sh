#!/bin/bash
mkdir -p /logs/verifier
expected='with space/huge file.iso
a/b/big.dat
.hidden_big
a/just_over.bin'
if [ "$(cat /app/large_files.txt 2>/dev/null | sed 's|^\./||')" = "$expected" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
