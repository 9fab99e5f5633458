"""The SQL verifier: run candidate and gold queries read-only on an in-memory SQLite database and compare results."""
