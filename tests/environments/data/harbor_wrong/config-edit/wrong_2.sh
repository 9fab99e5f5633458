# rewrites the file through configparser: right values, comments lost
cd /app/config
python3 - <<'PY'
import configparser
ini = configparser.ConfigParser()
ini.read("app.ini")
ini["server"]["port"] = "8081"
ini["server"]["debug"] = "false"
ini["server"]["workers"] = "4"
ini["logging"]["level"] = "warning"
with open("app.ini", "w") as fh:
    ini.write(fh)
PY
