#!/bin/bash
cd /app/store
find . -type f -size +102400c -printf '%s\t%P\n' | sort -t$'\t' -k1,1nr | cut -f2- > /app/large_files.txt
