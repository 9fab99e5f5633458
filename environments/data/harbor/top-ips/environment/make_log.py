"""Writes an access log in the common log format (seeded: the same log every build)."""

import random

random.seed(99)
counts = {
    "10.0.0.7": 31,
    "192.168.1.20": 27,
    "10.0.0.12": 27,
    "172.16.4.2": 19,
    "10.0.0.100": 15,
    "10.0.0.2": 15,
    "192.168.1.3": 12,
    "8.8.4.4": 6,
    "203.0.113.9": 3,
}
lines = [ip for ip, n in counts.items() for _ in range(n)]
random.shuffle(lines)
paths = ["/", "/login", "/api/items", "/api/items/7", "/static/app.js"]
with open("access.log", "w") as out:
    for i, ip in enumerate(lines):
        out.write(
            f'{ip} - - [12/Mar/2024:10:{i // 60:02d}:{i % 60:02d} +0000] "GET {random.choice(paths)} HTTP/1.1" '
            f"{random.choice([200, 200, 200, 304, 404, 500])} {random.randint(100, 9000)}\n"
        )
