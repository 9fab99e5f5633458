# deletes what should be excluded, then archives everything
cd /app
rm -rf project/cache && find project -name '*.log' -delete && tar -czf backup.tar.gz project
