"""The SQL verifier: candidate and gold run read-only on fresh in-memory copies of one database; results compared."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from pydantic import ValidationError

from groupscore.schema.verdict import Status
from groupscore.verifiers.registry import describe_error, parse_item, score_item

NEW_YORKERS = "SELECT name FROM customers WHERE city = 'New York'"


def score(completion: str, gold_sql: str = NEW_YORKERS, **fields):
    if "setup_sql" not in fields:
        fields.setdefault("database", "shop")
    return score_item(parse_item({"verifier": "sql", "completion": completion, "gold_sql": gold_sql, **fields}))


def sql_block(query: str) -> str:
    return f"The query filters customers by city.\n```sql\n{query}\n```"


@pytest.mark.parametrize(
    "query",
    [
        NEW_YORKERS,
        "select NAME from CUSTOMERS where CITY='New York';",
        "SELECT c.name AS who FROM customers c WHERE c.city IN ('New York')",  # alias: names are ignored
        "SELECT name FROM customers WHERE id IN (SELECT id FROM customers WHERE city LIKE 'New%')",
        "-- people in NYC\nWITH ny AS (SELECT * FROM customers WHERE city = 'New York') SELECT name FROM ny",
        "SELECT name FROM customers WHERE city = 'New York' ORDER BY name DESC",  # order ignored by default
    ],
)
def test_equivalent_queries_score_one(query):
    verdict = score(sql_block(query))
    assert (verdict.reward, verdict.status) == (1.0, Status.correct), verdict.reason


@pytest.mark.parametrize(
    "query, why",
    [
        ("SELECT name FROM customers WHERE city = 'London'", "different rows"),
        ("SELECT name FROM customers WHERE city != 'New York'", "complement"),
        ("SELECT name, city FROM customers WHERE city = 'New York'", "extra column"),
        ("SELECT DISTINCT city FROM customers WHERE city = 'New York'", "one row instead of two"),
    ],
)
def test_wrong_results_score_zero(query, why):
    verdict = score(sql_block(query))
    assert (verdict.reward, verdict.status) == (0.0, Status.incorrect), why


def test_ordered_comparison_when_the_item_asks_for_it():
    gold = "SELECT name FROM products ORDER BY price DESC, id"
    assert score(sql_block("SELECT name FROM products ORDER BY price DESC, id"), gold, ordered=True).reward == 1.0
    flipped = score(sql_block("SELECT name FROM products ORDER BY price ASC, id"), gold, ordered=True)
    assert flipped.reward == 0.0 and "order" in flipped.reason
    assert score(sql_block("SELECT name FROM products ORDER BY price ASC, id"), gold).reward == 1.0


def test_duplicates_count_in_unordered_comparison():
    gold = "SELECT city FROM customers"  # New York twice
    assert score(sql_block("SELECT DISTINCT city FROM customers"), gold).reward == 0.0


def test_reals_compare_at_configured_precision():
    gold = "SELECT AVG(price) FROM products"
    assert score(sql_block("SELECT SUM(price) / COUNT(*) FROM products"), gold).reward == 1.0
    assert score(sql_block("SELECT ROUND(AVG(price), 2) FROM products"), gold).reward == 0.0
    assert score(sql_block("SELECT ROUND(AVG(price), 2) FROM products"), gold, float_digits=3).reward == 1.0


def test_join_with_aggregate_on_the_shop_fixture():
    gold = """SELECT c.name, SUM(oi.quantity * p.price) FROM customers c JOIN orders o ON o.customer_id = c.id
              JOIN order_items oi ON oi.order_id = o.id JOIN products p ON p.id = oi.product_id
              WHERE o.status = 'shipped' GROUP BY c.id"""
    candidate = """SELECT (SELECT name FROM customers WHERE id = o.customer_id),
                          SUM((SELECT price FROM products WHERE id = oi.product_id) * oi.quantity)
                   FROM orders o, order_items oi WHERE oi.order_id = o.id AND o.status = 'shipped'
                   GROUP BY o.customer_id"""
    assert score(sql_block(candidate), gold).reward == 1.0
    without_filter = candidate.replace("AND o.status = 'shipped'", "")
    assert score(sql_block(without_filter), gold).reward == 0.0


@pytest.mark.parametrize(
    "query",
    [
        "DROP TABLE customers",
        "DELETE FROM customers",
        "INSERT INTO customers VALUES (99, 'x', NULL, 'y', 'z')",
        "UPDATE products SET price = 0",
        "SELECT 1; DROP TABLE customers",
        "SELECT name FROM customers; SELECT 1",
        "WITH x AS (SELECT 1) INSERT INTO products SELECT 99, 'x', 'y', 1 FROM x",
        "WITH x AS (SELECT 1) DELETE FROM customers",
        "ATTACH DATABASE '/tmp/groupscore-attack.db' AS a",
        "PRAGMA query_only = OFF",
        "VACUUM INTO '/tmp/groupscore-attack.db'",
        "SELECT random()",
        "SELECT hex(randomblob(8))",
    ],
)
def test_anything_but_one_deterministic_read_is_rejected_and_changes_nothing(query):
    verdict = score(sql_block(query))
    assert (verdict.reward, verdict.status) == (0.0, Status.incorrect), verdict.reason
    assert verdict.reason.startswith("rejected")
    assert score(sql_block(NEW_YORKERS)).reward == 1.0  # the database is untouched for the next item


def test_runaway_query_times_out_within_its_limit():
    endless = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT max(i) FROM n"
    start = time.perf_counter()
    verdict = score(sql_block(endless), time_limit_s=0.5)
    assert (verdict.reward, verdict.status) == (0.0, Status.timeout)
    assert time.perf_counter() - start < 3.0


def test_row_cap_and_size_limits():
    many = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n LIMIT 500) SELECT i FROM n"
    capped = score(sql_block(many), max_rows=100)
    assert capped.reward == 0.0 and "max_rows" in capped.reason
    huge = score(sql_block("SELECT zeroblob(2000000000)"))
    assert (huge.reward, huge.status) == (0.0, Status.unparsable)


def test_unparsable_and_missing_queries():
    assert score(sql_block("SELEC name FROM customers")).status == Status.incorrect  # not a read keyword
    syntax = score(sql_block("SELECT name FROM customers WHERE"))
    assert (syntax.reward, syntax.status) == (0.0, Status.unparsable)
    assert score(sql_block("SELECT nam FROM customers")).status == Status.unparsable
    assert score("I don't know.", extract="fenced").status == Status.no_answer
    assert score("").status == Status.no_answer


def test_raw_completion_is_the_query_when_there_is_no_block():
    assert score(NEW_YORKERS + ";").reward == 1.0


INLINE = "CREATE TABLE t(k INTEGER, v TEXT); INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'b');"


def test_inline_database_script():
    assert (
        score(sql_block("SELECT k FROM t WHERE v = 'b'"), "SELECT k FROM t WHERE k > 1", setup_sql=INLINE).reward == 1.0
    )
    assert score(sql_block("SELECT k FROM t"), "SELECT k FROM t WHERE k > 1", setup_sql=INLINE).reward == 0.0


@pytest.mark.parametrize(
    "setup_sql, why",
    [
        ("ATTACH DATABASE '/tmp/groupscore-attack.db' AS a; CREATE TABLE t(k);", "attach"),
        ("CREATE TABLE t(k); VACUUM INTO '/tmp/groupscore-attack.db';", "vacuum into a file"),
        (
            "CREATE TABLE t(k); WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n) INSERT INTO t SELECT i FROM n;",
            "endless setup",
        ),
        ("CREATE TABLE t(k", "syntax error"),
    ],
)
def test_bad_setup_scripts_give_an_error_verdict(setup_sql, why):
    verdict = score(sql_block("SELECT 1"), "SELECT 1", setup_sql=setup_sql, time_limit_s=0.5)
    assert verdict.status == Status.error, why
    assert "database script" in verdict.reason


def test_broken_gold_is_the_item_s_fault():
    verdict = score(sql_block(NEW_YORKERS), "SELECT nope FROM customers")
    assert verdict.status == Status.error and "gold" in verdict.reason


def test_same_verdicts_from_many_threads():
    queries = [NEW_YORKERS, "SELECT name FROM customers", "SELECT name FROM customers WHERE city = 'Boston'"] * 8
    expected = [score(sql_block(q)).reward for q in queries]
    with ThreadPoolExecutor(max_workers=6) as pool:
        got = list(pool.map(lambda q: score(sql_block(q)).reward, queries))
    assert got == expected == [1.0, 0.0, 0.0] * 8


@pytest.mark.parametrize(
    "fields, path",
    [
        ({}, "sql"),  # no database at all
        ({"database": "shop", "setup_sql": INLINE}, "sql"),  # both
        ({"database": "../../etc/passwd"}, "sql.database"),
        ({"database": "no_such_fixture"}, "sql.database"),
        ({"database": "shop", "time_limit_s": 0}, "sql.time_limit_s"),
        ({"database": "shop", "max_rows": 0}, "sql.max_rows"),
        ({"database": "shop", "gold_sql": ""}, "sql.gold_sql"),
    ],
)
def test_bad_fields_are_validation_errors_with_the_field_path(fields, path):
    raw = {"verifier": "sql", "completion": "SELECT 1", "gold_sql": "SELECT 1", **fields}
    with pytest.raises(ValidationError) as info:
        parse_item(raw)
    assert describe_error(info.value).startswith(path + ":")
