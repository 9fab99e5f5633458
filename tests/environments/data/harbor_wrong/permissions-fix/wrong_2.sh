# the files right, the folders forgotten
cd /app/site
chmod 755 scripts/*.sh && chmod 644 scripts/README.txt
chmod 600 secrets/*
find public -type f -exec chmod 644 {} +
