#!/bin/bash
# Partial credit: the share of checks that hold (each asked change, each setting left alone, the comments kept).
mkdir -p /logs/verifier
/usr/bin/python3 - <<'PY'
import configparser, json
checks = {}
try:
    text = open("/app/config/app.ini").read()
    ini = configparser.ConfigParser(inline_comment_prefixes=None)
    ini.read_string(text)
    get = lambda s, k: ini.get(s, k, fallback=None)
except (OSError, configparser.Error) as exc:
    text, get = "", lambda s, k: None
    print("unreadable:", exc)
checks["server.port"] = get("server", "port") == "8081"
checks["server.debug"] = get("server", "debug") == "false"
checks["server.workers"] = get("server", "workers") == "4"
checks["logging.level"] = get("logging", "level") == "warning"
checks["server.host"] = get("server", "host") == "0.0.0.0"
checks["database.port"] = get("database", "port") == "5432"
checks["database.host"] = get("database", "host") == "db.internal"
checks["database.pool"] = get("database", "pool") == "10"
checks["logging.debug"] = get("logging", "debug") == "true"
comments = ["; Service configuration. Keep the comments: operators read them.",
            "; debug must be off in production", "; pool size per worker"]
checks["comments"] = all(c in text.splitlines() for c in comments)
checks["sections"] = text.count("[server]") == 1 and text.count("[database]") == 1 and text.count("[logging]") == 1
print({k: v for k, v in checks.items() if not v} or "all checks hold")
json.dump({"reward": round(sum(checks.values()) / len(checks), 4), "checks": checks},
          open("/logs/verifier/reward.json", "w"))
PY
