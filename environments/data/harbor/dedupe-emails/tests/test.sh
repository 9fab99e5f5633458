#!/bin/bash
mkdir -p /logs/verifier
if [ -f /app/data/unique.txt ] && diff /app/data/unique.txt /tests/expected.txt; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
