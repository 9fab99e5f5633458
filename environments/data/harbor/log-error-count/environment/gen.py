"""Writes the service log this task starts from (seeded: the same log every build)."""

import random

random.seed(2024)
components = ["auth", "billing", "cache", "db", "gateway", "mailer", "search"]
messages = {
    "INFO": ["request served", "user logged in", "cache warmed", "job finished"],
    "WARN": ["slow query", "retrying after ERROR 503 from upstream", "disk 80% full", "deprecated call"],
    "ERROR": ["connection refused", "timeout after 30s", "null reference", "payment declined"],
}
with open("logs/service.log", "w") as out:
    for i in range(400):
        level = random.choices(["INFO", "WARN", "ERROR"], weights=[6, 3, 2])[0]
        component = random.choice(components)
        out.write(
            f"2024-05-01T{8 + i // 60:02d}:{i % 60:02d}:{random.randint(0, 59):02d}Z {level} "
            f"[{component}] {random.choice(messages[level])}\n"
        )
