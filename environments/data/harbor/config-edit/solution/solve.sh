#!/bin/bash
cd /app/config
awk '
  /^\[/ { if (section == "server" && !added) { print "workers = 4"; added = 1 }
          section = substr($0, 2, index($0, "]") - 2) }
  section == "server" && /^port[[:space:]]*=/ { print "port = 8081"; next }
  section == "server" && /^debug[[:space:]]*=/ { print "debug = false"; next }
  section == "logging" && /^level[[:space:]]*=/ { print "level = warning"; next }
  { print }
  END { if (section == "server" && !added) print "workers = 4" }
' app.ini > app.ini.new && mv app.ini.new app.ini
