"""Databases on the local PostgreSQL server (127.0.0.1:5432, trust auth) for Airflow's metadata."""

from __future__ import annotations


def create_database(name: str, host: str = "127.0.0.1", port: int = 5432, user: str = "postgres") -> str:
    """Create the database if it is missing; return its SQLAlchemy URL."""
    import psycopg2
    from psycopg2 import sql

    connection = psycopg2.connect(host=host, port=port, dbname="postgres", user=user)
    connection.autocommit = True
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
        if cursor.fetchone() is None:
            cursor.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    connection.close()
    return f"postgresql+psycopg2://{user}@{host}:{port}/{name}"


def drop_database(name: str, host: str = "127.0.0.1", port: int = 5432, user: str = "postgres") -> None:
    import psycopg2
    from psycopg2 import sql

    connection = psycopg2.connect(host=host, port=port, dbname="postgres", user=user)
    connection.autocommit = True
    with connection.cursor() as cursor:
        cursor.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
    connection.close()
