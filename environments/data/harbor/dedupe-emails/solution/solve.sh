#!/bin/bash
cd /app/data
tr 'A-Z' 'a-z' < contacts.txt | sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' | awk 'NF && !seen[$0]++' > unique.txt
