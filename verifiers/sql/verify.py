"""Scores a SqlItem: the candidate query and the gold query run read-only on fresh copies of one database;
reward 1 when their results are equal (as multisets of rows, or as lists when the item says `ordered`).

Column names are ignored (text-to-SQL execution accuracy): `SELECT name AS n` answers `SELECT name`.
"""

from __future__ import annotations

import re
import sqlite3
from collections import Counter
from typing import Any

from groupscore.schema.verdict import Status, Verdict
from groupscore.verifiers.sql.databases import SetupError, deadline, read_only_copy, script_for
from groupscore.verifiers.sql.item import SqlItem
from groupscore.verifiers.text import find_document

_FIRST_WORD = re.compile(r"[A-Za-z]+")
_READ_KEYWORDS = frozenset({"SELECT", "WITH"})


class QueryRejected(Exception):
    """Not a single read-only SELECT/WITH statement."""


def strip_sql(text: str) -> str:
    """The statement without leading comments and surrounding whitespace or semicolons."""
    text = text.strip()
    while text.startswith(("--", "/*")):
        if text.startswith("--"):
            newline = text.find("\n")
            text = "" if newline < 0 else text[newline + 1 :].lstrip()
        else:
            close = text.find("*/")
            text = "" if close < 0 else text[close + 2 :].lstrip()
    return text.rstrip().rstrip(";").rstrip()


def _normalize(value: Any, digits: int) -> Any:
    if isinstance(value, float):
        # Equivalent queries may sum in different orders; compare REALs at `digits` significant digits.
        return float(f"{value:.{digits}g}") + 0.0  # + 0.0 turns -0.0 into 0.0
    return value


def run_query(
    conn: sqlite3.Connection, sql: str, seconds: float, max_rows: int, digits: int
) -> tuple[int, list[tuple]]:
    """(number of columns, rows); QueryRejected, TimeoutError, or sqlite3.Error for a query that fails."""
    first_word = _FIRST_WORD.match(sql)
    if first_word is None or first_word.group().upper() not in _READ_KEYWORDS:
        raise QueryRejected("only a single SELECT or WITH query is allowed")
    try:
        with deadline(conn, seconds):
            cursor = conn.execute(sql)
            rows = cursor.fetchmany(max_rows + 1)
    except sqlite3.ProgrammingError as exc:  # "You can only execute one statement at a time."
        raise QueryRejected(str(exc)) from None
    except sqlite3.Error as exc:
        if "interrupted" in str(exc):
            raise TimeoutError(f"ran past {seconds} s") from None
        if "not authorized" in str(exc) or "prohibited" in str(exc) or "readonly" in str(exc):
            raise QueryRejected(f"only deterministic reads are allowed ({exc})") from None
        raise
    if len(rows) > max_rows:
        raise QueryRejected(f"more than max_rows={max_rows} rows")
    width = len(cursor.description or ())
    return width, [tuple(_normalize(v, digits) for v in row) for row in rows]


def _same(gold: list[tuple], candidate: list[tuple], ordered: bool) -> bool:
    return gold == candidate if ordered else Counter(gold) == Counter(candidate)


def score_sql(item: SqlItem) -> Verdict:
    found = find_document(item.completion, item.extract, language="sql")
    candidate_sql = strip_sql(found) if found is not None else ""
    if not candidate_sql:
        return Verdict(id=item.id, reward=0.0, status=Status.no_answer, reason="no SQL query in the completion")

    def verdict(reward: float, status: Status, reason: str, **details: Any) -> Verdict:
        return Verdict(
            id=item.id, reward=reward, status=status, extracted=candidate_sql[:2000], reason=reason, details=details
        )

    try:
        script = script_for(item.database, item.setup_sql)
        with read_only_copy(script, item.time_limit_s) as gold_conn:
            gold_width, gold_rows = run_query(
                gold_conn, strip_sql(item.gold_sql), item.time_limit_s, item.max_rows, item.float_digits
            )
    except (SetupError, QueryRejected, TimeoutError, sqlite3.Error, ValueError, OSError) as exc:
        return Verdict.error(item.id, f"gold query failed: {type(exc).__name__}: {exc}")

    try:
        with read_only_copy(script, item.time_limit_s) as conn:
            width, rows = run_query(conn, candidate_sql, item.time_limit_s, item.max_rows, item.float_digits)
    except QueryRejected as exc:
        return verdict(0.0, Status.incorrect, f"rejected: {exc}")
    except TimeoutError as exc:
        return verdict(0.0, Status.timeout, f"query {exc}")
    except sqlite3.Error as exc:
        return verdict(0.0, Status.unparsable, f"query failed: {exc}")

    shape = {"rows": len(rows), "gold_rows": len(gold_rows), "columns": width, "gold_columns": gold_width}
    if width != gold_width:
        return verdict(0.0, Status.incorrect, f"{width} columns, expected {gold_width}", **shape)
    if _same(gold_rows, rows, item.ordered):
        return verdict(1.0, Status.correct, "same result" + (" in the same order" if item.ordered else ""), **shape)
    if item.ordered and _same(gold_rows, rows, ordered=False):
        return verdict(0.0, Status.incorrect, "same rows in a different order", **shape)
    return verdict(0.0, Status.incorrect, f"different result ({len(rows)} rows, expected {len(gold_rows)})", **shape)
