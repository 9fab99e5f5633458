#!/bin/bash
mkdir -p /app/extracted && cd /app/extracted && tar -xzf /app/incoming/bundle.tar.gz
sha256sum -c SHA256SUMS 2>/dev/null | grep -v ': OK$' | sed -E 's/: FAILED( open or read)?$//' | LC_ALL=C sort > /app/bad_files.txt
