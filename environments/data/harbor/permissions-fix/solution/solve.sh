#!/bin/bash
cd /app/site
find scripts -maxdepth 1 -type f -name '*.sh' -exec chmod 755 {} +
find scripts -maxdepth 1 -type f ! -name '*.sh' -exec chmod 644 {} +
chmod 700 secrets && find secrets -type f -exec chmod 600 {} +
find public -type d -exec chmod 755 {} + && find public -type f -exec chmod 644 {} +
