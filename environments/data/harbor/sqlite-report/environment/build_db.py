"""Builds the shop database this task starts from (seeded: the same rows every build)."""

import random
import sqlite3

random.seed(31)
con = sqlite3.connect("shop.db")
con.executescript("""
CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, country TEXT NOT NULL);
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER REFERENCES customers(id), placed TEXT NOT NULL,
                     status TEXT NOT NULL, total_cents INTEGER NOT NULL);
""")
names = ["Acme", "Borealis", "Cobalt", "Dune", "Ember", "Fjord", "Granite", "Harbor"]
con.executemany(
    "INSERT INTO customers VALUES (?, ?, ?)",
    [(i + 1, n, random.choice(["DE", "FR", "US"])) for i, n in enumerate(names)],
)
for i in range(300):
    year = random.choice([2023, 2024, 2024, 2025])
    con.execute(
        "INSERT INTO orders VALUES (?, ?, ?, ?, ?)",
        (
            i + 1,
            random.randint(1, 8),
            f"{year}-{random.randint(1, 12):02d}-{random.randint(1, 28):02d}",
            random.choice(["paid", "paid", "paid", "refunded", "pending"]),
            random.randint(500, 90000),
        ),
    )
con.commit()
