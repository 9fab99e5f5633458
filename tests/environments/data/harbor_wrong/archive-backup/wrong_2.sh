# the cache excluded, the logs forgotten
cd /app
tar --exclude='project/cache' -czf backup.tar.gz project
