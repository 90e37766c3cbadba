"""Databases on the local PostgreSQL server (127.0.0.1:5432, trust auth) for Airflow's metadata."""

from __future__ import annotations

from typing import Any


def _run_admin(statement: Any, params: tuple[str, ...] = (), host: str = "127.0.0.1", port: int = 5432) -> Any:
    """Run one statement on the server's ``postgres`` database outside a transaction (CREATE/DROP DATABASE)."""
    import psycopg2

    connection = psycopg2.connect(host=host, port=port, dbname="postgres", user="postgres")
    connection.autocommit = True
    try:
        with connection.cursor() as cursor:
            cursor.execute(statement, params)
            return cursor.fetchone() if cursor.description else None
    finally:
        connection.close()


def create_database(name: str, host: str = "127.0.0.1", port: int = 5432) -> str:
    """Create the database if it is missing; return its SQLAlchemy URL."""
    from psycopg2 import sql

    if _run_admin("SELECT 1 FROM pg_database WHERE datname = %s", (name,), host, port) is None:
        _run_admin(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)), host=host, port=port)
    return f"postgresql+psycopg2://postgres@{host}:{port}/{name}"


def drop_database(name: str, host: str = "127.0.0.1", port: int = 5432) -> None:
    from psycopg2 import sql

    _run_admin(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)), host=host, port=port)
