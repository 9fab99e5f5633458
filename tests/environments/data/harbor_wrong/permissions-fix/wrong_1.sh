# everything 755: scripts run, but secrets are readable by all
cd /app/site && chmod -R 755 .
