# global substitutions: the database port and the logging debug flag change too
cd /app/config
sed -i -e 's/^port = .*/port = 8081/' -e 's/^debug = .*/debug = false/' -e 's/^level = .*/level = warning/' app.ini
sed -i 's/^\[server\]$/[server]\nworkers = 4/' app.ini
