"""The user's SQL is only ever used as a subquery, so a DDL or multi-statement text cannot run."""

from __future__ import annotations

from airflow_provider_ctas.core.errors import InvalidInputError

SOURCE_ALIAS = "__ctas_source"


def clean_sql(sql: str) -> str:
    """Strip the trailing semicolons and whitespace a .sql file usually ends with."""
    text = sql.strip()
    while text.endswith(";"):
        text = text[:-1].rstrip()
    if not text:
        raise InvalidInputError("sql is empty")
    return text


def as_subquery(sql: str) -> str:
    # The newline before ')' keeps a trailing line comment in the user's SQL from swallowing it.
    return f"SELECT * FROM (\n{clean_sql(sql)}\n) AS {SOURCE_ALIAS}"
