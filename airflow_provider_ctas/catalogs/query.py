"""The user's SQL is only ever used as a subquery, so a DDL or multi-statement text cannot run."""

from __future__ import annotations

import re

from airflow_provider_ctas.core.errors import InvalidInputError

SOURCE_ALIAS = "__ctas_source"
# What a Spark SQL query can start with; anything else is a statement of another kind.
_QUERY_STARTS = frozenset({"SELECT", "WITH", "VALUES", "FROM", "TABLE", "MAP", "REDUCE", "("})
_COMMENTS = re.compile(r"(--[^\n]*\n?|/\*.*?\*/|\s+)", re.DOTALL)
_FIRST_WORD = re.compile(r"\(|[A-Za-z_]+")


def clean_sql(sql: str) -> str:
    """Strip the trailing semicolons and whitespace a .sql file usually ends with."""
    text = sql.strip()
    while text.endswith(";"):
        text = text[:-1].rstrip()
    if not text:
        raise InvalidInputError("sql is empty")
    return text


def validate_query(sql: str, what: str = "sql") -> str:
    """The query, cleaned; a clear error for text that is not one query (before Spark sees it)."""
    text = clean_sql(sql)
    body = _COMMENTS.sub(" ", text).strip()
    match = _FIRST_WORD.match(body)
    first = match.group(0).upper() if match else body[:20]
    if first not in _QUERY_STARTS:
        raise InvalidInputError(
            f"{what} must be one query (SELECT, WITH ... SELECT, VALUES, TABLE or FROM ...), which runs as a "
            f"subquery; found {first!r}"
        )
    return text


def as_subquery(sql: str) -> str:
    # The newline before ')' keeps a trailing line comment in the user's SQL from swallowing it.
    return f"SELECT * FROM (\n{clean_sql(sql)}\n) AS {SOURCE_ALIAS}"
