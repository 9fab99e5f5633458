#!/bin/bash
# The log is built from a fixed seed; its counts are in expected.txt, kept here (the agent never sees them).
mkdir -p /logs/verifier
if diff <(sed 's/[[:space:]]*$//' /app/errors_by_component.txt 2>/dev/null) /tests/expected.txt; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
