#!/bin/bash
cd /app/logs
{
  cat web.log
  while read -r epoch rest; do
    printf '%s %s\n' "$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)" "$rest"
  done < api.log
} | LC_ALL=C sort -s -k1,1 > /app/merged.log
