# the column right, the index forgotten
cd /app
python3 -c "
import sqlite3
con = sqlite3.connect('users.db')
con.execute('ALTER TABLE users ADD COLUMN domain TEXT')
con.execute(\"UPDATE users SET domain = lower(trim(substr(email, instr(email, '@') + 1)))\")
con.commit()"
