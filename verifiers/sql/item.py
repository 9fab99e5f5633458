"""The SQL item: the gold query, the database (a fixture's name or an inline SQL script) and how results compare."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from groupscore.schema.item import ItemBase


class SqlItem(ItemBase):
    verifier: Literal["sql"] = "sql"
    gold_sql: str = Field(
        min_length=1, max_length=100_000, description="Reference query: one SELECT or WITH statement."
    )
    database: str | None = Field(default=None, description="Name of a database in verifiers/sql/data/, e.g. 'shop'.")
    setup_sql: str | None = Field(
        default=None,
        max_length=5_000_000,
        description="Instead of `database`: SQL script creating and filling the tables.",
    )
    ordered: bool = Field(
        default=False, description="Compare rows in order (for ORDER BY questions); else as multisets."
    )
    extract: Literal["auto", "fenced", "raw"] = Field(
        default="auto",
        description="fenced: the last ```sql block (else the last bare "
        "``` block); raw: the whole completion; auto: fenced "
        "if there is a block, else raw.",
    )
    time_limit_s: float = Field(default=2.0, gt=0.0, le=30.0, description="Budget for each query (and for the setup).")
    max_rows: int = Field(default=10_000, ge=1, le=1_000_000, description="A result with more rows scores 0.")
    float_digits: int = Field(default=10, ge=1, le=17, description="Significant digits at which REAL values compare.")

    @field_validator("database")
    @classmethod
    def _database_is_a_fixture(cls, name: str | None) -> str | None:
        if name is not None:
            from groupscore.verifiers.sql.databases import fixture_path

            fixture_path(name)  # ValueError for a bad or unknown name
        return name

    @model_validator(mode="after")
    def _one_database(self) -> SqlItem:
        if (self.database is None) == (self.setup_sql is None):
            raise ValueError("give exactly one of `database` (a fixture name) or `setup_sql` (a script)")
        return self
