# truthy instead of true: "yes" counts as active
cd /app
python3 -c '
import json
users = json.load(open("input/users.json"))["users"]
out = [{"name": u["name"], "email": u.get("email"), "admin": "admin" in u["roles"]}
       for u in sorted(users, key=lambda u: u["name"].lower()) if u.get("active")]
json.dump(out, open("active_users.json", "w"))'
