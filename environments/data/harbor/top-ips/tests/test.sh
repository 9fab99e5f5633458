#!/bin/bash
mkdir -p /logs/verifier
expected='31 10.0.0.7
27 10.0.0.12
27 192.168.1.20
19 172.16.4.2
15 10.0.0.100'
if [ "$(sed 's/^[[:space:]]*//; s/[[:space:]]*$//' /app/top_ips.txt 2>/dev/null)" = "$expected" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
